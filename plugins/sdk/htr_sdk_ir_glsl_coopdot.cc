// htr_sdk_ir_glsl_coopdot.cc — see htr_sdk_ir_glsl_coopdot.h.
#include "htr_sdk_ir_glsl_coopdot.h"

namespace htr_sdk::ir {

namespace {

std::string str(int64_t v) { return std::to_string(v); }

std::string frag(int bits, int64_t rows, int64_t cols) {
  return "fcoopmatNV<" + std::to_string(bits) + ", gl_ScopeSubgroup, " + str(rows) + ", " + str(cols) + ">";
}

}  // namespace

int64_t coop_packed_ld(int64_t cols) { return (cols + 8) / 8; }

std::string coop_pack_group(const std::string& dst, int64_t cols, bool bf16, const std::string& g,
                            const std::function<std::string(const std::string&)>& elem, const std::string& tmp) {
  const std::string r = tmp + "r", c = tmp + "c", x = tmp + "x", bits = bf16 ? "htr_bf16_bits(" : "htr_f16_bits(";
  auto half = [&](int q) { return bits + elem("(" + x + " + " + std::to_string(q) + ")") + ")"; };
  auto pair = [&](int q) { return "(" + half(q) + " | (" + half(q + 1) + " << 16u))"; };
  return "{ int " + r + " = (" + g + ") / " + str(cols / 8) + ", " + c + " = (" + g + ") % " + str(cols / 8) + ", " + x +
         " = " + r + " * " + str(cols) + " + " + c + " * 8; " + dst + "[" + r + " * " + str(coop_packed_ld(cols)) + " + " +
         c + "] = uvec4(" + pair(0) + ", " + pair(2) + ", " + pair(4) + ", " + pair(6) + "); }";
}

std::vector<std::string> coop_dot_lines(const CoopDotShape& s, int64_t M, int64_t N, int64_t K, const std::string& a,
                                        const std::string& b, const std::string& init, const std::string& carr,
                                        const std::string& res, const std::string& tmp) {
  const int64_t fc = N / s.cn, nf = (M / s.cm) * fc, lda = coop_packed_ld(K), ldb = coop_packed_ld(N);
  const std::string f = tmp + "f", r0 = tmp + "r", c0 = tmp + "c", acc = tmp + "acc", fa = frag(16, s.cm, s.ck),
                    fb = frag(16, s.ck, s.cn), fd = frag(32, s.cm, s.cn);
  std::vector<std::string> l;
  l.push_back("[[dont_unroll]] for (int " + f + " = int(gl_SubgroupID); " + f + " < " + str(nf) + "; " + f +
              " += " + str(s.subgroups) + ") {");
  l.push_back("  int " + r0 + " = (" + f + " / " + str(fc) + ") * " + str(s.cm) + ", " + c0 + " = (" + f + " % " +
              str(fc) + ") * " + str(s.cn) + ";");
  if (carr.empty()) {
    l.push_back("  " + fd + " " + acc + " = " + fd + "(float(" + init + "));");
  } else {
    l.push_back("  " + fd + " " + acc + "; coopMatLoadNV(" + acc + ", " + carr + ", uint(" + r0 + " * " + str(N) +
                " + " + c0 + "), uint(" + str(N) + "), false);");
  }
  for (int64_t kk = 0; kk < K; kk += s.ck) {
    const std::string x = tmp + "a" + str(kk / s.ck), y = tmp + "b" + str(kk / s.ck);
    l.push_back("  " + fa + " " + x + "; coopMatLoadNV(" + x + ", " + a + ", uint(" + r0 + " * " + str(lda) + " + " +
                str(kk / 8) + "), uint(" + str(lda) + "), false);");
    l.push_back("  " + fb + " " + y + "; coopMatLoadNV(" + y + ", " + b + ", uint(" + str(kk * ldb) + " + " + c0 +
                " / 8), uint(" + str(ldb) + "), false);");
    l.push_back("  " + acc + " = coopMatMulAddNV(" + x + ", " + y + ", " + acc + ");");
  }
  l.push_back("  coopMatStoreNV(" + acc + ", " + res + ", uint(" + r0 + " * " + str(N) + " + " + c0 + "), uint(" +
              str(N) + "), false);");
  l.push_back("}");
  return l;
}

std::vector<std::string> coop_accumulate_lines(const CoopDotShape& s, int64_t ftm, int64_t ftn, int64_t K,
                                               int64_t lda, int64_t ldb, const std::string& regs,
                                               const std::string& tr, const std::string& tc, const std::string& a,
                                               const std::string& b, const std::string& tmp) {
  const std::string fa = frag(16, s.cm, s.ck), fb = frag(16, s.ck, s.cn);
  std::vector<std::string> l;
  for (int64_t kk = 0; kk < K; kk += s.ck) {
    const std::string step = str(kk / s.ck);
    for (int64_t i = 0; i < ftm; ++i) {
      const std::string x = tmp + "a" + step + "_" + str(i);
      l.push_back(fa + " " + x + "; coopMatLoadNV(" + x + ", " + a + ", uint((" + tr + " + " + str(i * s.cm) + ") * " +
                  str(lda) + " + " + str(kk / 8) + "), uint(" + str(lda) + "), false);");
    }
    for (int64_t j = 0; j < ftn; ++j) {
      const std::string y = tmp + "b" + step + "_" + str(j);
      l.push_back(fb + " " + y + "; coopMatLoadNV(" + y + ", " + b + ", uint(" + str(kk * ldb) + " + (" + tc + " + " +
                  str(j * s.cn) + ") / 8), uint(" + str(ldb) + "), false);");
    }
    for (int64_t i = 0; i < ftm; ++i)
      for (int64_t j = 0; j < ftn; ++j) {
        const std::string q = regs + "[" + str(i * ftn + j) + "]";
        l.push_back(q + " = coopMatMulAddNV(" + tmp + "a" + step + "_" + str(i) + ", " + tmp + "b" + step + "_" + str(j) +
                    ", " + q + ");");
      }
  }
  return l;
}

}  // namespace htr_sdk::ir
