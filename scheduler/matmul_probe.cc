// matmul_probe.cc — see matmul_probe.h.
#include "matmul_probe.h"

namespace htr::sched {

void MatmulTransAttrs(bool trans_a, bool trans_b, htr_attr_t out[2]) {
  out[0] = htr_attr_t{};
  out[1] = htr_attr_t{};
  out[0].name = "trans_a";
  out[1].name = "trans_b";
  out[0].kind = out[1].kind = HTR_ATTR_INT;
  out[0].i = trans_a ? 1 : 0;
  out[1].i = trans_b ? 1 : 0;
}

int32_t QueryLibraryMatmul(htr_device_t* device, const MatmulProbe& p, std::string* why) {
  const int64_t mat[2] = {2, 2}, vec[1] = {2};
  htr_tensor_t* t[4] = {nullptr, nullptr, nullptr, nullptr};  // a, b, c, bias
  const htr_dtype_t dt[4] = {p.in, p.in, p.out, p.bias};
  std::string answer;
  int32_t score = 0;
  bool ok = true;
  for (int i = 0; i < (p.has_bias ? 4 : 3) && ok; ++i) {
    if (htr_status_t s = htr_tensor_create(device, dt[i], i == 3 ? 1 : 2, i == 3 ? vec : mat, &t[i])) {
      answer = std::string("probe tensor: ") + htr_status_message(s);
      htr_status_free(s);
      ok = false;
    }
  }
  if (ok) {
    htr_attr_t attrs[2];
    MatmulTransAttrs(p.trans_a, p.trans_b, attrs);
    htr_tensor_t* ins[3] = {t[0], t[1], t[3]};
    htr_tensor_t* out = t[2];
    if (htr_status_t s = htr_op_query(device, "matmul", ins, p.has_bias ? 3 : 2, &out, 1, attrs, 2, &score)) {
      answer = htr_status_message(s);
      htr_status_free(s);
      score = 0;
    } else if (score <= 0) {
      answer = "library score 0";
      score = 0;
    }
  }
  for (auto* x : t) htr_tensor_release(x);
  if (score <= 0 && why) *why = answer;
  return score;
}

}  // namespace htr::sched
