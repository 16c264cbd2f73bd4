// matmul: argument parsing into a plan, and the engine that dispatches to
// OpenBLAS or oneDNN. Auto-tuning times the real inputs against scratch
// output, alternating the two backends so a burst of load from other
// processes hits both measurements alike; the minimum of each is compared.
#include "cpu_matmul.h"

#include "cpu_matmul_backends.h"
#include "cpu_pool.h"

#include "htr_sdk_args.h"
#include "htr_sdk_decision.h"
#include "htr_sdk_dtype.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

namespace htr_cpu {

const char* matmul_impl_name(MatmulImpl impl) {
  switch (impl) {
    case MatmulImpl::kOpenBlas: return "openblas";
    case MatmulImpl::kOneDnn: return "onednn";
    default: return "auto";
  }
}

bool matmul_impl_parse(const char* name, MatmulImpl* out) {
  if (name == nullptr) {
    return false;
  }
  if (std::strcmp(name, "auto") == 0) {
    *out = MatmulImpl::kAuto;
  } else if (std::strcmp(name, "openblas") == 0) {
    *out = MatmulImpl::kOpenBlas;
  } else if (std::strcmp(name, "onednn") == 0) {
    *out = MatmulImpl::kOneDnn;
  } else {
    return false;
  }
  return true;
}

bool matmul_impl_built(MatmulImpl impl) {
  switch (impl) {
    case MatmulImpl::kOpenBlas: return OpenBlasMatmul::built();
    case MatmulImpl::kOneDnn: return OneDnnMatmul::built();
    default: return OpenBlasMatmul::built() || OneDnnMatmul::built();
  }
}

namespace {

// Logical rows x cols matrix with element strides (rs, cs) -> BLAS layout.
bool to_mat2d(int64_t rows, int64_t cols, int64_t rs, int64_t cs, Mat2D* out) {
  if (rows <= 1 && cols <= 1) {
    *out = Mat2D{false, 1};
  } else if (cs == 1 && (rows == 1 || rs >= cols)) {
    *out = Mat2D{false, rows == 1 ? cols : rs};
  } else if (rs == 1 && (cols == 1 || cs >= rows)) {
    *out = Mat2D{true, cols == 1 ? rows : cs};
  } else if (rows == 1 && cs >= 1) {
    *out = Mat2D{true, cs};
  } else if (cols == 1 && rs >= 1) {
    *out = Mat2D{false, rs};
  } else {
    return false;
  }
  return out->ld <= INT32_MAX;
}

// A rows x cols tensor stored row-major (last stride 1, row stride >= cols;
// either is free where its dim is 1) -> its Mat2D.
bool row_major_mat2d(const htr_plugin_tensor_t& t, int64_t rows, int64_t cols, Mat2D* out) {
  const int64_t rs = t.strides[0], cs = t.strides[1];
  if ((cols > 1 && cs != 1) || (rows > 1 && rs < std::max<int64_t>(cols, 1))) {
    return false;
  }
  *out = Mat2D{false, rows > 1 ? rs : std::max<int64_t>(cols, 1)};
  return out->ld <= INT32_MAX;
}

const char* epilogue_name(MatmulEpilogue e) {
  return e == MatmulEpilogue::kGelu ? "gelu" : e == MatmulEpilogue::kDgelu ? "dgelu" : "none";
}

// The epilogue's extra checks on a plan matmul_plan() has filled in: beta 0,
// rank 2, pre [m, n] in C's dtype, C and pre row-major.
htr_status_t plan_epilogue(const htr_sdk::Host& host, const htr_op_desc_t* desc,
                           MatmulEpilogue epilogue, MatmulPlan* p) {
  const char* name = epilogue_name(epilogue);
  if (p->beta != 0.0f) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul epilogue %s requires beta 0 (got %g)", name,
                      static_cast<double>(p->beta));
  }
  const htr_plugin_tensor_t& A = desc->inputs[0];
  const htr_plugin_tensor_t& B = desc->inputs[1];
  const htr_plugin_tensor_t& C = desc->outputs[0];
  if (A.rank != 2 || B.rank != 2 || C.rank != 2) {
    return host.error(HTR_STATUS_UNIMPLEMENTED,
                      "cpu: matmul epilogue %s with batch dims (ranks A %u, B %u, C %u; only 2)",
                      name, A.rank, B.rank, C.rank);
  }
  const htr_plugin_tensor_t& pre =
      epilogue == MatmulEpilogue::kGelu ? desc->outputs[1] : desc->inputs[2];
  if (pre.rank != 2 || pre.shape[0] != p->m || pre.shape[1] != p->n) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: matmul epilogue %s: pre must be [%lld, %lld]",
                      name, static_cast<long long>(p->m), static_cast<long long>(p->n));
  }
  if (pre.dtype != C.dtype) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul epilogue %s: pre is %s, not C's dtype %s", name,
                      htr_sdk::dtype_name(pre.dtype), htr_sdk::dtype_name(C.dtype));
  }
  for (uint32_t d = 0; d < 2; ++d) {
    if (pre.strides[d] < 0) {
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul with negative strides");
    }
  }
  Mat2D c;
  if (!row_major_mat2d(C, p->m, p->n, &c)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul epilogue %s: C must be row-major",
                      name);
  }
  if (!row_major_mat2d(pre, p->m, p->n, &p->pre)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul epilogue %s: pre must be row-major",
                      name);
  }
  p->c = c;
  p->epilogue = epilogue;
  return nullptr;
}

}  // namespace

htr_status_t matmul_plan(const htr_sdk::Host& host, const htr_op_desc_t* desc,
                         MatmulImpl default_impl, MatmulPlan* out) {
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  // The epilogue decides the tensor counts, so it is read first.
  const char* epilogue_attr = nullptr;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_string(host, desc, "epilogue", nullptr, &epilogue_attr));
  MatmulEpilogue epilogue = MatmulEpilogue::kNone;
  if (epilogue_attr == nullptr || std::strcmp(epilogue_attr, "none") == 0) {
    epilogue = MatmulEpilogue::kNone;
  } else if (std::strcmp(epilogue_attr, "gelu") == 0) {
    epilogue = MatmulEpilogue::kGelu;
  } else if (std::strcmp(epilogue_attr, "dgelu") == 0) {
    epilogue = MatmulEpilogue::kDgelu;
  } else {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul epilogue '%s' unknown (none|gelu|dgelu)", epilogue_attr);
  }
  if (epilogue == MatmulEpilogue::kNone &&
      (desc->num_inputs < 2 || desc->num_inputs > 3 || desc->num_outputs != 1)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul takes 2 inputs (3 with a bias) and 1 output (got %u, %u)",
                      desc->num_inputs, desc->num_outputs);
  }
  if (epilogue == MatmulEpilogue::kGelu &&
      (desc->num_inputs < 2 || desc->num_inputs > 3 || desc->num_outputs != 2)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul epilogue gelu takes 2 inputs (3 with a bias) and 2 outputs "
                      "(C, pre) (got %u, %u)",
                      desc->num_inputs, desc->num_outputs);
  }
  if (epilogue == MatmulEpilogue::kDgelu && (desc->num_inputs != 3 || desc->num_outputs != 1)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul epilogue dgelu takes 3 inputs (A, B, pre) and 1 output "
                      "(got %u, %u)",
                      desc->num_inputs, desc->num_outputs);
  }
  static const char* const kAttrs[] = {"trans_a", "trans_b", "alpha", "beta", "impl", "epilogue"};
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_attr_names(host, desc, kAttrs, 6));
  int64_t ta = 0, tb = 0;
  double alpha = 1.0, beta = 0.0;
  const char* impl_name = nullptr;
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_a", 0, &ta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_b", 0, &tb));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "alpha", 1.0, &alpha));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "beta", 0.0, &beta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_string(host, desc, "impl", nullptr, &impl_name));
  MatmulPlan p;
  p.impl = default_impl;
  if (impl_name != nullptr && !matmul_impl_parse(impl_name, &p.impl)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul impl '%s' unknown (auto|openblas|onednn)", impl_name);
  }
  if (!matmul_impl_built(p.impl)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul impl '%s' not built in",
                      matmul_impl_name(p.impl));
  }
  p.alpha = static_cast<float>(alpha);
  p.beta = static_cast<float>(beta);

  const htr_plugin_tensor_t& A = desc->inputs[0];
  const htr_plugin_tensor_t& B = desc->inputs[1];
  const htr_plugin_tensor_t& C = desc->outputs[0];
  if (A.rank < 2 || B.rank < 2 || C.rank < 2) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: matmul operands need rank >= 2");
  }
  if (A.dtype != B.dtype ||
      !((A.dtype == HTR_DTYPE_F32 && C.dtype == HTR_DTYPE_F32) ||
        (A.dtype == HTR_DTYPE_BF16 && (C.dtype == HTR_DTYPE_BF16 || C.dtype == HTR_DTYPE_F32)))) {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul %s x %s -> %s not supported",
                      htr_sdk::dtype_name(A.dtype), htr_sdk::dtype_name(B.dtype),
                      htr_sdk::dtype_name(C.dtype));
  }
  p.in_dtype = A.dtype;
  p.out_dtype = C.dtype;
  for (const htr_plugin_tensor_t* t : {&A, &B, &C}) {
    for (uint32_t d = 0; d < t->rank; ++d) {
      if (t->strides[d] < 0) {
        return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul with negative strides");
      }
      if (t->shape[d] > INT32_MAX) {
        return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul dim beyond int32");
      }
    }
  }
  const uint32_t ra = A.rank, rb = B.rank, rc = C.rank;
  // op(A) is m x k with strides (ars, acs); op(B) is k x n.
  const int64_t m = ta ? A.shape[ra - 1] : A.shape[ra - 2];
  const int64_t ka = ta ? A.shape[ra - 2] : A.shape[ra - 1];
  const int64_t ars = ta ? A.strides[ra - 1] : A.strides[ra - 2];
  const int64_t acs = ta ? A.strides[ra - 2] : A.strides[ra - 1];
  const int64_t kb = tb ? B.shape[rb - 1] : B.shape[rb - 2];
  const int64_t n = tb ? B.shape[rb - 2] : B.shape[rb - 1];
  const int64_t brs = tb ? B.strides[rb - 1] : B.strides[rb - 2];
  const int64_t bcs = tb ? B.strides[rb - 2] : B.strides[rb - 1];
  if (ka != kb || C.shape[rc - 2] != m || C.shape[rc - 1] != n) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul shapes disagree: op(A) %lldx%lld, op(B) %lldx%lld, C %lldx%lld",
                      static_cast<long long>(m), static_cast<long long>(ka),
                      static_cast<long long>(kb), static_cast<long long>(n),
                      static_cast<long long>(C.shape[rc - 2]),
                      static_cast<long long>(C.shape[rc - 1]));
  }
  p.m = m;
  p.n = n;
  p.k = ka;
  if (desc->num_inputs == 3 && epilogue != MatmulEpilogue::kDgelu) {
    const htr_plugin_tensor_t& Bi = desc->inputs[2];
    if (Bi.rank != 1 || Bi.shape[0] != n) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: matmul bias must be [%lld]",
                        static_cast<long long>(n));
    }
    if (Bi.dtype != HTR_DTYPE_F32 && Bi.dtype != C.dtype) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT,
                        "cpu: matmul bias %s is neither f32 nor C's dtype %s",
                        htr_sdk::dtype_name(Bi.dtype), htr_sdk::dtype_name(C.dtype));
    }
    if (n > 1 && Bi.strides[0] != 1) {
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul bias must be contiguous");
    }
    p.has_bias = true;
    p.bias_dtype = Bi.dtype;
  }
  if (!to_mat2d(m, ka, ars, acs, &p.a) || !to_mat2d(ka, n, brs, bcs, &p.b) ||
      !to_mat2d(m, n, C.strides[rc - 2], C.strides[rc - 1], &p.c)) {
    return host.error(HTR_STATUS_UNIMPLEMENTED,
                      "cpu: matmul layout unsupported (one of the last two strides must be 1)");
  }
  // Batch dims: C's; A's and B's equal to them or absent.
  p.batch_rank = rc - 2;
  const uint32_t na = ra - 2, nb = rb - 2;
  if ((na != 0 && na != p.batch_rank) || (nb != 0 && nb != p.batch_rank)) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cpu: matmul batch ranks disagree (A %u, B %u, C %u)", na, nb,
                      p.batch_rank);
  }
  p.batch = 1;
  for (uint32_t d = 0; d < p.batch_rank; ++d) {
    const int64_t s = C.shape[d];
    if ((na != 0 && A.shape[d] != s) || (nb != 0 && B.shape[d] != s)) {
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cpu: matmul batch dim %u disagrees", d);
    }
    if (s > 1 && C.strides[d] == 0 && m * n > 0) {
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cpu: matmul C batch stride 0 (overlap)");
    }
    p.batch_shape[d] = s;
    p.a_bstride[d] = na != 0 ? A.strides[d] : 0;
    p.b_bstride[d] = nb != 0 ? B.strides[d] : 0;
    p.c_bstride[d] = C.strides[d];
    p.batch *= s;
  }
  if (epilogue != MatmulEpilogue::kNone) {
    HTR_SDK_RETURN_IF_ERROR(plan_epilogue(host, desc, epilogue, &p));
  }
  *out = p;
  return nullptr;
}

int64_t batch_offset(const MatmulPlan& p, const int64_t* bstride, int64_t linear) {
  int64_t off = 0;
  for (uint32_t d = p.batch_rank; d-- > 0;) {
    const int64_t idx = linear % p.batch_shape[d];
    linear /= p.batch_shape[d];
    off += idx * bstride[d];
  }
  return off;
}

// ------------------------------------------------------------------ engine

MatmulEngine::MatmulEngine(const htr_sdk::Host& host, ThreadPool* pool, std::string tune_dir)
    : host_(host), pool_(pool), tune_dir_(std::move(tune_dir)) {
  if (OpenBlasMatmul::built()) {
    openblas_ = std::make_unique<OpenBlasMatmul>(1);
  }
  if (OneDnnMatmul::built()) {
    for (uint32_t i = 0; i <= workers(); ++i) {
      onednn_.push_back(std::make_unique<OneDnnMatmul>(1));
      if (!onednn_.back()->usable()) {
        host_.log(HTR_LOG_WARN, "oneDNN engine could not be created; matmul uses OpenBLAS only");
        onednn_.clear();
        break;
      }
    }
  }
}

MatmulEngine::~MatmulEngine() = default;

uint32_t MatmulEngine::workers() const { return pool_ != nullptr ? pool_->size() : 0; }

std::string MatmulEngine::backends_description() const {
  std::string s;
  if (openblas_) {
    s += openblas_->description();
  }
  if (!onednn_.empty()) {
    s += s.empty() ? "" : ", ";
    s += onednn_.front()->description();
  }
  if (s.empty()) {
    return "no matmul backend";
  }
  return s + "; single-threaded, split over " + std::to_string(std::max(workers(), 1u)) +
         " pool threads";
}

bool MatmulEngine::bf16_native() const { return !onednn_.empty() && onednn_.front()->bf16_native(); }

MatmulEngine::Key MatmulEngine::key_of(const MatmulPlan& p) {
  return Key{p.m, p.n, p.k, p.a.col_major, p.b.col_major, p.c.col_major,
             static_cast<int>(p.in_dtype), static_cast<int>(p.out_dtype)};
}

MatmulImpl MatmulEngine::cached_choice(const MatmulPlan& plan) const {
  std::lock_guard<std::mutex> lock(cache_mu_);
  auto it = choices_.find(key_of(plan));
  return it == choices_.end() ? MatmulImpl::kAuto : it->second;
}

htr_sdk::WorkError MatmulEngine::run_impl(MatmulImpl impl, const MatmulPlan& p,
                                          const MatmulArgs& args, uint32_t slot) {
  if (impl == MatmulImpl::kOpenBlas && openblas_) {
    return openblas_->run(p, args);
  }
  if (impl == MatmulImpl::kOneDnn && !onednn_.empty()) {
    return onednn_[std::min<size_t>(slot, onednn_.size() - 1)]->run(p, args);
  }
  return htr_sdk::WorkError{HTR_STATUS_UNIMPLEMENTED,
                            std::string("matmul backend unavailable: ") + matmul_impl_name(impl)};
}

namespace {

// C = beta * C for every batch entry (the k == 0 case: op(A)op(B) is zero).
void scale_output(const MatmulPlan& p, void* c) {
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    const int64_t base = batch_offset(p, p.c_bstride, bi);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < p.n; ++j) {
        const int64_t e = base + (p.c.col_major ? i + j * p.c.ld : i * p.c.ld + j);
        if (p.out_dtype == HTR_DTYPE_F32) {
          float* x = static_cast<float*>(c) + e;
          *x = p.beta == 0.0f ? 0.0f : p.beta * *x;
        } else {
          uint16_t* x = static_cast<uint16_t*>(c) + e;
          *x = p.beta == 0.0f ? htr_sdk::f32_to_bf16(0.0f)
                              : htr_sdk::f32_to_bf16(p.beta * htr_sdk::bf16_to_f32(*x));
        }
      }
    }
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

htr_sdk::WorkError MatmulEngine::tune(const MatmulPlan& p, const MatmulArgs& args,
                                      MatmulImpl* out) {
  // One batch entry, beta 0, into dense scratch with C's orientation.
  MatmulPlan t = p;
  t.batch_rank = 0;
  t.batch = 1;
  t.beta = 0.0f;
  t.c = Mat2D{p.c.col_major, std::max<int64_t>(1, p.c.col_major ? p.m : p.n)};
  const size_t bytes =
      static_cast<size_t>(p.m) * static_cast<size_t>(p.n) * (p.out_dtype == HTR_DTYPE_F32 ? 4 : 2);
  std::vector<unsigned char> scratch(bytes + 64);
  MatmulArgs ta = args;
  ta.c = scratch.data();

  const MatmulImpl impls[2] = {MatmulImpl::kOpenBlas, MatmulImpl::kOneDnn};
  double best[2] = {1e30, 1e30};
  bool ok[2] = {false, false};
  for (int i = 0; i < 2; ++i) {  // warm-up: primitive creation, thread wake-up
    auto t0 = std::chrono::steady_clock::now();
    ok[i] = run_impl(impls[i], t, ta, workers()).ok();
    best[i] = seconds_since(t0);
  }
  if (ok[0] && ok[1]) {
    // ABBA rounds until both have >= 3 samples and 0.1 s passed (small
    // shapes: up to 25 rounds, so a quiet window is likely to be seen), or
    // 2 rounds and 0.5 s (large shapes). The minimum of each is compared.
    best[0] = best[1] = 1e30;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < 25; ++r) {
      for (int j = 0; j < 2; ++j) {
        const int i = (r & 1) ? 1 - j : j;
        auto t0 = std::chrono::steady_clock::now();
        run_impl(impls[i], t, ta, workers());
        best[i] = std::min(best[i], seconds_since(t0));
      }
      const double spent = seconds_since(start);
      if ((r >= 2 && spent > 0.1) || (r >= 1 && spent > 0.5)) {
        break;
      }
    }
  }
  if (!ok[0] && !ok[1]) {
    return htr_sdk::WorkError{HTR_STATUS_INTERNAL, "matmul: no backend ran this shape"};
  }
  const int win = !ok[0] ? 1 : !ok[1] ? 0 : (best[1] < best[0] ? 1 : 0);
  *out = impls[win];
  host_.log(HTR_LOG_INFO,
            "matmul auto m=%lld n=%lld k=%lld %s->%s: openblas %.3f ms, onednn %.3f ms -> %s",
            static_cast<long long>(p.m), static_cast<long long>(p.n),
            static_cast<long long>(p.k), htr_sdk::dtype_name(p.in_dtype),
            htr_sdk::dtype_name(p.out_dtype), ok[0] ? best[0] * 1e3 : -1.0,
            ok[1] ? best[1] * 1e3 : -1.0, matmul_impl_name(*out));
  return {};
}

htr_sdk::WorkError MatmulEngine::stored_or_tuned(const MatmulPlan& p, const MatmulArgs& args,
                                                 MatmulImpl* out) {
  if (tune_dir_.empty()) {
    return tune(p, args, out);
  }
  // The file is named by the backends (versions, threads, ISA) and the shape's key, so a
  // decision measured with other backends or another thread count is never reused.
  const Key k = key_of(p);
  const std::string key = "matmul-v1|" + backends_description() + "|" +
                          std::to_string(std::get<0>(k)) + "," + std::to_string(std::get<1>(k)) +
                          "," + std::to_string(std::get<2>(k)) + "," +
                          std::to_string(std::get<3>(k)) + std::to_string(std::get<4>(k)) +
                          std::to_string(std::get<5>(k)) + "," + std::to_string(std::get<6>(k)) +
                          "," + std::to_string(std::get<7>(k));
  const std::string path = tune_dir_ + "/" + htr_sdk::decision_hash(key);
  std::string line;
  MatmulImpl impl = MatmulImpl::kAuto;
  if (htr_sdk::decision_read(path, &line) && matmul_impl_parse(line.c_str(), &impl) &&
      impl != MatmulImpl::kAuto) {
    *out = impl;
    return {};
  }
  htr_sdk::WorkError e = tune(p, args, &impl);
  if (!e.ok()) {
    return e;
  }
  line = htr_sdk::decision_settle(tune_dir_, path, matmul_impl_name(impl));
  MatmulImpl stored = MatmulImpl::kAuto;
  if (matmul_impl_parse(line.c_str(), &stored) && stored != MatmulImpl::kAuto && stored != impl) {
    host_.log(HTR_LOG_INFO, "matmul auto m=%lld n=%lld k=%lld: %s stored by an earlier process is kept",
              static_cast<long long>(p.m), static_cast<long long>(p.n), static_cast<long long>(p.k),
              matmul_impl_name(stored));
    impl = stored;
  }
  *out = impl;
  return {};
}

htr_sdk::WorkError MatmulEngine::choose(const MatmulPlan& p, const MatmulArgs& args,
                                        MatmulImpl* out) {
  MatmulImpl impl = p.impl;
  if (impl == MatmulImpl::kAuto) {
    if (!openblas_ || onednn_.empty()) {
      impl = openblas_ ? MatmulImpl::kOpenBlas : MatmulImpl::kOneDnn;
    } else {
      impl = cached_choice(p);
      if (impl == MatmulImpl::kAuto) {
        htr_sdk::WorkError e = stored_or_tuned(p, args, &impl);
        if (!e.ok()) {
          return e;
        }
        std::lock_guard<std::mutex> cl(cache_mu_);
        choices_[key_of(p)] = impl;
      }
    }
  }
  *out = impl;
  return {};
}

namespace {

// Matmuls below this many multiply-adds run on the calling thread: waking
// the pool costs more than it saves.
constexpr double kSplitMinMacs = 1u << 18;

// How one matmul is shared out: `parts` pieces; piece w covers batch entries
// [batch_lo(w), batch_hi(w)) whole (split_batch), or the given rows/columns
// of every batch entry.
struct Split {
  bool split_batch = false;
  bool split_rows = true;  // else columns
  int64_t extent = 0;      // batch entries, rows or columns being split
  uint32_t parts = 1;
  int64_t lo(uint32_t w) const { return extent * w / parts; }
  int64_t hi(uint32_t w) const { return extent * (w + 1) / parts; }
};

// Piece [lo, hi) of the split dimension of one batch entry `bi` (or of all
// when the batch itself is split) as a batch-free plan plus pointers.
void piece(const MatmulPlan& p, const MatmulArgs& args, const Split& s, int64_t bi, int64_t lo,
           int64_t hi, MatmulPlan* out_plan, MatmulArgs* out_args) {
  const int64_t in_size = static_cast<int64_t>(htr_sdk::dtype_size(p.in_dtype));
  const int64_t out_size = static_cast<int64_t>(htr_sdk::dtype_size(p.out_dtype));
  MatmulPlan q = p;
  q.batch_rank = 0;
  q.batch = 1;
  int64_t ao = batch_offset(p, p.a_bstride, bi);
  int64_t bo = batch_offset(p, p.b_bstride, bi);
  int64_t co = batch_offset(p, p.c_bstride, bi);
  if (!s.split_batch) {
    if (s.split_rows) {  // rows of op(A) and C
      q.m = hi - lo;
      ao += lo * (p.a.col_major ? 1 : p.a.ld);
      co += lo * (p.c.col_major ? 1 : p.c.ld);
    } else {  // columns of op(B) and C
      q.n = hi - lo;
      bo += lo * (p.b.col_major ? p.b.ld : 1);
      co += lo * (p.c.col_major ? p.c.ld : 1);
    }
  }
  out_args->a = static_cast<const char*>(args.a) + ao * in_size;
  out_args->b = static_cast<const char*>(args.b) + bo * in_size;
  out_args->c = static_cast<char*>(args.c) + co * out_size;
  *out_plan = q;
}

}  // namespace

htr_sdk::WorkError MatmulEngine::run_bias(const MatmulPlan& p, const MatmulArgs& args) {
  const int64_t n = p.n;
  std::vector<float> bias(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    bias[static_cast<size_t>(j)] =
        p.bias_dtype == HTR_DTYPE_F32 ? static_cast<const float*>(args.bias)[j]
                                      : htr_sdk::bf16_to_f32(static_cast<const uint16_t*>(args.bias)[j]);
  }
  MatmulPlan q = p;
  q.has_bias = false;
  MatmulArgs qa = args;
  qa.bias = nullptr;
  std::vector<float> scratch;
  if (p.out_dtype != HTR_DTYPE_F32) {
    // The product stays f32 (dense, row-major per batch entry) until the bias is in.
    q.out_dtype = HTR_DTYPE_F32;
    q.c = Mat2D{false, std::max<int64_t>(1, n)};
    int64_t stride = p.m * n;
    for (uint32_t d = p.batch_rank; d-- > 0;) {
      q.c_bstride[d] = stride;
      stride *= p.batch_shape[d];
    }
    scratch.resize(static_cast<size_t>(p.batch * p.m * n));
    if (p.beta != 0.0f) {
      for (int64_t bi = 0; bi < p.batch; ++bi) {
        widen_bf16(static_cast<const uint16_t*>(args.c) + batch_offset(p, p.c_bstride, bi), p.m, n,
                   p.c, scratch.data() + bi * p.m * n);
      }
    }
    qa.c = scratch.data();
  }
  htr_sdk::WorkError e = run(q, qa);
  if (!e.ok()) {
    return e;
  }
  for (int64_t bi = 0; bi < p.batch; ++bi) {
    float* c = static_cast<float*>(qa.c) + batch_offset(q, q.c_bstride, bi);
    for (int64_t i = 0; i < p.m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        c[q.c.col_major ? i + j * q.c.ld : i * q.c.ld + j] += bias[static_cast<size_t>(j)];
      }
    }
    if (!scratch.empty()) {
      narrow_to_bf16(c, p.m, n, p.c,
                     static_cast<uint16_t*>(args.c) + batch_offset(p, p.c_bstride, bi));
    }
  }
  return {};
}

namespace {

// gelu_tanh and its derivative (OPS.md), in f32. With u = sqrt(2/pi) (x + 0.044715 x^3),
// 0.5 (1 + tanh(u)) = s = 1 / (1 + exp(-2u)), and 1 - s = exp(-2u) s: the sigmoid form has no
// cancellation where tanh(u) is near -1 (x below about -2), so the activation of a negative z
// keeps f32's relative precision.
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

inline float gelu_tanh(float x) {
  // exp(-2u) overflowing to inf (x below about -10) gives -0; x^3 overflowing gives x or -0.
  const float u = kGeluC * (x + kGeluA * x * x * x);
  return x / (1.0f + std::exp(-2.0f * u));
}

inline float gelu_tanh_grad(float x) {
  if (std::fabs(x) > 10.0f) {  // saturated: 1 or 0 to f32 precision; keeps exp(-2u) finite
    return x > 0.0f ? 1.0f : 0.0f;
  }
  const float u = kGeluC * (x + kGeluA * x * x * x);
  const float e = std::exp(-2.0f * u);
  const float s = 1.0f / (1.0f + e);
  return s + 2.0f * x * s * (e * s) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

// Element offset of [i, j] in a Mat2D.
inline int64_t at(const Mat2D& m, int64_t i, int64_t j) {
  return m.col_major ? i + j * m.ld : i * m.ld + j;
}

// Epilogue passes below this many elements run on the calling thread.
constexpr int64_t kSplitMinElems = 1 << 15;

}  // namespace

htr_sdk::WorkError MatmulEngine::run_epilogue(const MatmulPlan& p, const MatmulArgs& args) {
  const int64_t m = p.m, n = p.n;
  const bool f32_out = p.out_dtype == HTR_DTYPE_F32;
  std::vector<float> bias;
  if (p.has_bias) {
    bias.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      bias[static_cast<size_t>(j)] =
          p.bias_dtype == HTR_DTYPE_F32
              ? static_cast<const float*>(args.bias)[j]
              : htr_sdk::bf16_to_f32(static_cast<const uint16_t*>(args.bias)[j]);
    }
  }
  // alpha * op(A) op(B) in f32: in place in an f32 C, else into dense scratch.
  MatmulPlan q = p;
  q.epilogue = MatmulEpilogue::kNone;
  q.has_bias = false;
  q.beta = 0.0f;
  MatmulArgs qa = args;
  qa.bias = nullptr;
  qa.pre_out = nullptr;
  qa.pre_in = nullptr;
  std::vector<float> scratch;
  if (!f32_out) {
    q.out_dtype = HTR_DTYPE_F32;
    q.c = Mat2D{false, std::max<int64_t>(1, n)};
    scratch.resize(static_cast<size_t>(m * n));
    qa.c = scratch.data();
  }
  htr_sdk::WorkError e = run(q, qa);
  if (!e.ok()) {
    return e;
  }
  const float* z = static_cast<const float*>(qa.c);
  const Mat2D zl = q.c;
  auto rows = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float v = z[at(zl, i, j)];
        float pre = 0.0f;
        if (p.epilogue == MatmulEpilogue::kGelu) {
          if (p.has_bias) {
            v += bias[static_cast<size_t>(j)];
          }
          pre = v;
          v = gelu_tanh(v);
        } else {
          const int64_t pe = at(p.pre, i, j);
          const float x = f32_out ? static_cast<const float*>(args.pre_in)[pe]
                                  : htr_sdk::bf16_to_f32(static_cast<const uint16_t*>(args.pre_in)[pe]);
          v *= gelu_tanh_grad(x);
        }
        const int64_t ce = at(p.c, i, j);
        if (f32_out) {
          static_cast<float*>(args.c)[ce] = v;
        } else {
          static_cast<uint16_t*>(args.c)[ce] = htr_sdk::f32_to_bf16(v);
        }
        if (p.epilogue == MatmulEpilogue::kGelu) {
          const int64_t pe = at(p.pre, i, j);
          if (f32_out) {
            static_cast<float*>(args.pre_out)[pe] = pre;
          } else {
            static_cast<uint16_t*>(args.pre_out)[pe] = htr_sdk::f32_to_bf16(pre);
          }
        }
      }
    }
  };
  const uint32_t nw = workers();
  if (nw > 1 && m * n >= kSplitMinElems && m >= static_cast<int64_t>(nw)) {
    pool_->parallel_for(nw, [&](size_t begin, size_t end) {
      for (size_t w = begin; w < end; ++w) {
        rows(m * static_cast<int64_t>(w) / nw, m * static_cast<int64_t>(w + 1) / nw);
      }
    });
  } else {
    rows(0, m);
  }
  return {};
}

htr_sdk::WorkError MatmulEngine::run(const MatmulPlan& p, const MatmulArgs& args) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) {
    return {};
  }
  if (p.epilogue != MatmulEpilogue::kNone) {
    return run_epilogue(p, args);
  }
  if (p.has_bias) {
    return run_bias(p, args);
  }
  std::lock_guard<std::mutex> lock(exec_mu_);
  if (p.k == 0) {
    scale_output(p, args.c);
    return {};
  }
  const uint32_t nw = workers();
  const double macs = static_cast<double>(p.m) * static_cast<double>(p.n) *
                      static_cast<double>(p.k) * static_cast<double>(p.batch);
  Split s;
  if (nw > 1 && macs >= kSplitMinMacs) {
    if (p.batch >= nw) {
      s.split_batch = true;
      s.extent = p.batch;
    } else {
      s.split_rows = p.m >= p.n;
      s.extent = s.split_rows ? p.m : p.n;
    }
    // Every piece keeps at least a few rows/columns (or one batch entry).
    const int64_t min_piece = s.split_batch ? 1 : 16;
    s.parts = static_cast<uint32_t>(std::min<int64_t>(nw, s.extent / min_piece));
  }
  if (s.parts <= 1) {
    MatmulImpl impl = MatmulImpl::kAuto;
    htr_sdk::WorkError e = choose(p, args, &impl);
    if (!e.ok()) {
      return e;
    }
    e = run_impl(impl, p, args, nw);
    if (!e.ok() && p.impl == MatmulImpl::kAuto && openblas_ && !onednn_.empty()) {
      // auto never fails where the other backend can run the shape.
      const MatmulImpl other =
          impl == MatmulImpl::kOpenBlas ? MatmulImpl::kOneDnn : MatmulImpl::kOpenBlas;
      host_.log(HTR_LOG_WARN, "matmul %s failed (%s); trying %s", matmul_impl_name(impl),
                e.message.c_str(), matmul_impl_name(other));
      e = run_impl(other, p, args, nw);
    }
    return e;
  }
  // The backend is chosen for the first piece's shape (the others differ by
  // at most one row or column).
  MatmulPlan first;
  MatmulArgs first_args;
  piece(p, args, s, 0, s.lo(0), s.hi(0), &first, &first_args);
  MatmulImpl impl = MatmulImpl::kAuto;
  htr_sdk::WorkError e = choose(first, first_args, &impl);
  if (!e.ok()) {
    return e;
  }
  std::vector<htr_sdk::WorkError> errors(nw);
  const uint32_t parts = s.parts;
  pool_->parallel_for(nw, [&](size_t begin, size_t end) {
    for (size_t w = begin; w < end; ++w) {
      if (w >= parts) {
        continue;
      }
      const uint32_t wi = static_cast<uint32_t>(w);
      try {
        MatmulPlan q;
        MatmulArgs qa;
        if (s.split_batch) {
          for (int64_t bi = s.lo(wi); bi < s.hi(wi) && errors[w].ok(); ++bi) {
            piece(p, args, s, bi, 0, 0, &q, &qa);
            errors[w] = run_impl(impl, q, qa, wi);
          }
        } else {
          for (int64_t bi = 0; bi < p.batch && errors[w].ok(); ++bi) {
            piece(p, args, s, bi, s.lo(wi), s.hi(wi), &q, &qa);
            errors[w] = run_impl(impl, q, qa, wi);
          }
        }
      } catch (const std::bad_alloc&) {
        errors[w] = htr_sdk::WorkError{HTR_STATUS_OUT_OF_MEMORY, "matmul: out of memory"};
      }
    }
  });
  for (const htr_sdk::WorkError& we : errors) {
    if (!we.ok()) {
      return we;
    }
  }
  return {};
}

}  // namespace htr_cpu
