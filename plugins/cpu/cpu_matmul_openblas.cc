// OpenBLAS backend. CBLAS takes both storage orders, so C's order is used
// as the CBLAS order and each input is NoTrans when it shares that order,
// Trans otherwise: any mix of row/column-major views runs without copies.
#include "cpu_matmul_backends.h"

#include "htr_sdk_dtype.h"

#include <vector>

#if HTR_CPU_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace htr_cpu {

void widen_bf16(const uint16_t* src, int64_t rows, int64_t cols, const Mat2D& m, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t e = m.col_major ? i + j * m.ld : i * m.ld + j;
      out[i * cols + j] = htr_sdk::bf16_to_f32(src[e]);
    }
  }
}

void narrow_to_bf16(const float* src, int64_t rows, int64_t cols, const Mat2D& m,
                    uint16_t* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const int64_t e = m.col_major ? i + j * m.ld : i * m.ld + j;
      out[e] = htr_sdk::f32_to_bf16(src[i * cols + j]);
    }
  }
}

#if HTR_CPU_HAVE_OPENBLAS

OpenBlasMatmul::OpenBlasMatmul(uint32_t threads) : threads_(threads) {
  openblas_set_num_threads(static_cast<int>(threads));
}

bool OpenBlasMatmul::built() { return true; }

std::string OpenBlasMatmul::description() const {
  const char* cfg = openblas_get_config();
  return std::string("openblas (") + (cfg != nullptr ? cfg : "?") + ", " +
         std::to_string(openblas_get_num_threads()) + " threads)";
}

namespace {

void sgemm(const Mat2D& c_layout, const Mat2D& a, const Mat2D& b, int64_t m, int64_t n,
           int64_t k, float alpha, const float* pa, const float* pb, float beta, float* pc) {
  const CBLAS_ORDER order = c_layout.col_major ? CblasColMajor : CblasRowMajor;
  const CBLAS_TRANSPOSE ta = a.col_major == c_layout.col_major ? CblasNoTrans : CblasTrans;
  const CBLAS_TRANSPOSE tb = b.col_major == c_layout.col_major ? CblasNoTrans : CblasTrans;
  cblas_sgemm(order, ta, tb, static_cast<blasint>(m), static_cast<blasint>(n),
              static_cast<blasint>(k), alpha, pa, static_cast<blasint>(a.ld), pb,
              static_cast<blasint>(b.ld), beta, pc, static_cast<blasint>(c_layout.ld));
}

}  // namespace

htr_sdk::WorkError OpenBlasMatmul::run(const MatmulPlan& p, const MatmulArgs& args) {
  if (p.in_dtype == HTR_DTYPE_F32) {
    const float* a = static_cast<const float*>(args.a);
    const float* b = static_cast<const float*>(args.b);
    float* c = static_cast<float*>(args.c);
    for (int64_t bi = 0; bi < p.batch; ++bi) {
      sgemm(p.c, p.a, p.b, p.m, p.n, p.k, p.alpha, a + batch_offset(p, p.a_bstride, bi),
            b + batch_offset(p, p.b_bstride, bi), p.beta, c + batch_offset(p, p.c_bstride, bi));
    }
    return {};
  }
  // bf16 inputs: widen to dense row-major f32, multiply, store.
  const Mat2D dense_a{false, p.k}, dense_b{false, p.n}, dense_c{false, p.n};
  std::vector<float> fa(static_cast<size_t>(p.m * p.k));
  std::vector<float> fb(static_cast<size_t>(p.k * p.n));
  std::vector<float> fc;
  if (p.out_dtype == HTR_DTYPE_BF16) {
    fc.resize(static_cast<size_t>(p.m * p.n));
  }
  const uint16_t* a = static_cast<const uint16_t*>(args.a);
  const uint16_t* b = static_cast<const uint16_t*>(args.b);
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    widen_bf16(a + batch_offset(p, p.a_bstride, bi), p.m, p.k, p.a, fa.data());
    widen_bf16(b + batch_offset(p, p.b_bstride, bi), p.k, p.n, p.b, fb.data());
    const int64_t coff = batch_offset(p, p.c_bstride, bi);
    if (p.out_dtype == HTR_DTYPE_F32) {
      sgemm(p.c, dense_a, dense_b, p.m, p.n, p.k, p.alpha, fa.data(), fb.data(), p.beta,
            static_cast<float*>(args.c) + coff);
    } else {
      uint16_t* c = static_cast<uint16_t*>(args.c) + coff;
      if (p.beta != 0.0f) {
        widen_bf16(c, p.m, p.n, p.c, fc.data());
      }
      sgemm(dense_c, dense_a, dense_b, p.m, p.n, p.k, p.alpha, fa.data(), fb.data(), p.beta,
            fc.data());
      narrow_to_bf16(fc.data(), p.m, p.n, p.c, c);
    }
  }
  return {};
}

#else  // !HTR_CPU_HAVE_OPENBLAS

OpenBlasMatmul::OpenBlasMatmul(uint32_t threads) : threads_(threads) {}
bool OpenBlasMatmul::built() { return false; }
std::string OpenBlasMatmul::description() const { return "openblas (not built)"; }
htr_sdk::WorkError OpenBlasMatmul::run(const MatmulPlan&, const MatmulArgs&) {
  return htr_sdk::WorkError{HTR_STATUS_UNIMPLEMENTED, "cpu plugin built without OpenBLAS"};
}

#endif

}  // namespace htr_cpu
