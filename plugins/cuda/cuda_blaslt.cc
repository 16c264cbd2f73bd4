// matmul through cuBLASLt (see cuda_blaslt.h). Enum values below are from
// CUDA 13.0's cublasLt.h / cublas_api.h / library_types.h (stable since
// cuBLASLt 11).
#include "cuda_blaslt.h"

#include "cuda_device.h"
#include "cuda_memory.h"
#include "cuda_nvrtc.h"
#include "cuda_pool.h"
#include "cuda_stream.h"
#include "htr_sdk_args.h"
#include "htr_sdk_decision.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

namespace htr_cuda {

namespace {

// library_types.h / cublas_api.h / cublasLt.h
constexpr int CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14;
constexpr int CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
constexpr int CUBLAS_OP_N = 0, CUBLAS_OP_T = 1;
constexpr int DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8, DESC_BIAS_DATA_TYPE = 26;
constexpr int DESC_EPILOGUE_AUX_POINTER = 11, DESC_EPILOGUE_AUX_LD = 12;
// cublasLtEpilogue_t: BIAS broadcasts a bias over D's columns; GELU_AUX(_BIAS) applies the tanh
// GELU and stores its input in the aux matrix; DGELU multiplies by the GELU derivative of the aux.
constexpr int32_t EPILOGUE_BIAS = 4, EPILOGUE_GELU_AUX = 160, EPILOGUE_GELU_AUX_BIAS = 164, EPILOGUE_DGELU = 192;
constexpr int LAYOUT_BATCH_COUNT = 5, LAYOUT_STRIDED_BATCH_OFFSET = 6;
constexpr int PREF_MAX_WORKSPACE_BYTES = 1;
constexpr int PREF_MIN_ALIGNMENT_A = 5;  // B, C, D follow
constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;
constexpr int kTuneCandidates = 8;      // heuristic answers timed by tune_plan (HTR_CUDA_MATMUL_TUNE)
constexpr int kMaxTuneCandidates = 32;
constexpr int kTuneReps = 5;        // timed calls per candidate (after one untimed)

struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  uint64_t algo[8];
  size_t workspace_size;
  int state;
  float waves;
  int reserved[4];
};

const htr_sdk::Symbol kSymbols[] = {
    HTR_SDK_SYMBOL(BlasApi, cublasLtCreate, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtDestroy, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtGetVersion, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulDescCreate, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulDescDestroy, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulDescSetAttribute, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatrixLayoutCreate, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatrixLayoutDestroy, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatrixLayoutSetAttribute, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulPreferenceCreate, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulPreferenceDestroy, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulPreferenceSetAttribute, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmulAlgoGetHeuristic, true),
    HTR_SDK_SYMBOL(BlasApi, cublasLtMatmul, true),
};

htr_status_code_t blas_code(int r) {
  switch (r) {
    case 3: return HTR_STATUS_OUT_OF_MEMORY;
    case 7: return HTR_STATUS_INVALID_ARGUMENT;
    case 8: case 15: return HTR_STATUS_UNIMPLEMENTED;
    default: return HTR_STATUS_INTERNAL;
  }
}

// One operand's matrix: the last two dims and how they map to a
// column-major layout; batch count and stride (0: broadcast).
struct Mat {
  int64_t r = 0, c = 0;      // logical tensor dims (last two)
  bool row_major = true;     // inner dim contiguous
  int64_t ld = 0;
  int64_t batch = 1;         // product of batch dims (1 when none)
  int64_t batch_stride = 0;  // elements
  uint32_t batch_rank = 0;
};

bool describe(const htr_plugin_tensor_t& t, Mat* m, std::string* why) {
  if (t.rank < 2) {
    *why = "rank < 2";
    return false;
  }
  const uint32_t n = t.rank;
  m->r = t.shape[n - 2];
  m->c = t.shape[n - 1];
  const int64_t s0 = t.strides[n - 2], s1 = t.strides[n - 1];
  if (s1 == 1 || m->c == 1) {
    m->row_major = true;
    m->ld = m->c == 1 && s1 != 1 ? s1 : s0;
    if (m->r <= 1) m->ld = m->c;
    if (m->ld < m->c) m->ld = m->c;
  } else if (s0 == 1 || m->r == 1) {
    m->row_major = false;
    m->ld = s1 < m->r ? m->r : s1;
  } else {
    *why = "neither of the last two dims has stride 1";
    return false;
  }
  m->batch_rank = n - 2;
  m->batch = 1;
  for (uint32_t i = 0; i < n - 2; ++i) m->batch *= t.shape[i];
  m->batch_stride = 0;
  if (n > 2) {
    // Batch dims must flatten to one stride.
    for (uint32_t i = 0; i + 1 < n - 2; ++i)
      if (t.shape[i] > 1 && t.strides[i] != t.strides[i + 1] * t.shape[i + 1]) {
        *why = "batch dims do not flatten to one stride";
        return false;
      }
    m->batch_stride = t.strides[n - 3];
  }
  return true;
}

int cuda_type(htr_dtype_t d) {
  switch (d) {
    case HTR_DTYPE_F32: return CUDA_R_32F;
    case HTR_DTYPE_F16: return CUDA_R_16F;
    case HTR_DTYPE_BF16: return CUDA_R_16BF;
    default: return -1;
  }
}

struct Problem {
  Mat a, b, c;
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0, batch = 1;
  htr_dtype_t in = HTR_DTYPE_INVALID, out = HTR_DTYPE_INVALID;
  bool tf32 = false;
  float alpha = 1, beta = 0;
  bool bias = false;  // OPS.md's optional third input: [N], C's dtype (CUBLASLT_EPILOGUE_BIAS)
  // OPS.md's `epilogue`: 0 none, 1 gelu (second output `pre`), 2 dgelu (third input `pre`).
  int epilogue = 0;
  int64_t pre_ld = 0;  // pre's row stride: the aux matrix's leading dimension (column-major D = C^T)
};

// Checks `desc` against OPS.md's matmul and what cuBLASLt takes. On
// UNIMPLEMENTED/INVALID_ARGUMENT returns the status.
htr_status_t analyze(const htr_sdk::Host& host, const htr_op_desc_t* desc, Problem* p) {
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_op_desc(host, desc));
  if (std::strcmp(desc->op, "matmul") != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: no library op '%s' (only matmul)", desc->op);
  static const char* const kKnown[] = {"trans_a", "trans_b", "alpha", "beta", "impl", "epilogue"};
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_attr_names(host, desc, kKnown, 6));
  const char* epilogue = "none";
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_string(host, desc, "epilogue", "none", &epilogue));
  if (std::strcmp(epilogue, "gelu") == 0) {
    p->epilogue = 1;
  } else if (std::strcmp(epilogue, "dgelu") == 0) {
    p->epilogue = 2;
  } else if (std::strcmp(epilogue, "none") != 0) {
    return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul epilogue '%s' (known: none, gelu, dgelu)", epilogue);
  }
  const uint32_t want_out = p->epilogue == 1 ? 2 : 1;
  const bool inputs_ok = p->epilogue == 2 ? desc->num_inputs == 3 : desc->num_inputs >= 2 && desc->num_inputs <= 3;
  if (!inputs_ok || desc->num_outputs != want_out)
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cuda: matmul (epilogue %s) takes %s and %u output%s, got %u and %u", epilogue,
                      p->epilogue == 2 ? "A, B and pre" : "2 inputs (3 with a bias)", want_out, want_out > 1 ? "s" : "",
                      desc->num_inputs, desc->num_outputs);
  int64_t ta = 0, tb = 0;
  double alpha = 1, beta = 0;
  const char* impl = "auto";
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_a", 0, &ta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_int(host, desc, "trans_b", 0, &tb));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "alpha", 1.0, &alpha));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_float(host, desc, "beta", 0.0, &beta));
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::attr_string(host, desc, "impl", "auto", &impl));
  p->trans_a = ta != 0;
  p->trans_b = tb != 0;
  p->alpha = static_cast<float>(alpha);
  p->beta = static_cast<float>(beta);
  const htr_plugin_tensor_t& A = desc->inputs[0];
  const htr_plugin_tensor_t& B = desc->inputs[1];
  const htr_plugin_tensor_t& C = desc->outputs[0];
  p->in = A.dtype;
  p->out = C.dtype;
  if (B.dtype != A.dtype || cuda_type(A.dtype) < 0 ||
      !(C.dtype == A.dtype || (A.dtype != HTR_DTYPE_F32 && C.dtype == HTR_DTYPE_F32)))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul dtypes %d x %d -> %d (want f32, bf16 or f16 inputs)",
                      A.dtype, B.dtype, C.dtype);
  if (std::strcmp(impl, "auto") == 0 || std::strcmp(impl, "cublaslt") == 0) {
    p->tf32 = false;
  } else if (std::strcmp(impl, "tf32") == 0) {
    if (A.dtype != HTR_DTYPE_F32)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: impl=tf32 is for f32 inputs");
    p->tf32 = true;
  } else {
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul impl '%s' (known: auto, cublaslt, tf32)", impl);
  }
  std::string why;
  if (!describe(A, &p->a, &why) || !describe(B, &p->b, &why) || !describe(C, &p->c, &why))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul layout: %s", why.c_str());
  if (!p->c.row_major || (C.strides[C.rank - 1] != 1 && p->c.c > 1))
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul output must be row-major");
  p->M = p->trans_a ? p->a.c : p->a.r;
  p->K = p->trans_a ? p->a.r : p->a.c;
  const int64_t kb = p->trans_b ? p->b.c : p->b.r;
  p->N = p->trans_b ? p->b.r : p->b.c;
  if (kb != p->K || p->c.r != p->M || p->c.c != p->N)
    return host.error(HTR_STATUS_INVALID_ARGUMENT,
                      "cuda: matmul shapes: M=%lld K=%lld from A, K=%lld N=%lld from B, C is %lldx%lld",
                      static_cast<long long>(p->M), static_cast<long long>(p->K), static_cast<long long>(kb),
                      static_cast<long long>(p->N), static_cast<long long>(p->c.r), static_cast<long long>(p->c.c));
  p->batch = p->c.batch;
  if (p->epilogue != 0) {
    // pre: a gelu epilogue's second output or a dgelu's third input, C's shape and dtype, row-major;
    // cuBLASLt's aux matrix (column-major D = C^T) with pre's row stride as its leading dimension.
    const htr_plugin_tensor_t& P = p->epilogue == 1 ? desc->outputs[1] : desc->inputs[2];
    if (P.rank != 2 || C.rank != 2 || P.shape[0] != p->M || P.shape[1] != p->N)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul epilogue %s: pre must be [%lld, %lld] like C (rank 2)",
                        epilogue, static_cast<long long>(p->M), static_cast<long long>(p->N));
    if (P.dtype != C.dtype)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul epilogue %s: pre dtype %d is not C's (%d)", epilogue,
                        P.dtype, C.dtype);
    if (p->beta != 0.0f)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul epilogue %s with beta != 0", epilogue);
    if (p->N > 1 && P.strides[1] != 1)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul epilogue %s: pre must be row-major", epilogue);
    p->pre_ld = p->M > 1 ? P.strides[0] : p->N;
    if (p->pre_ld < p->N || p->pre_ld % 8 != 0)
      return host.error(HTR_STATUS_UNIMPLEMENTED,
                        "cuda: matmul epilogue %s: pre's row stride %lld must be >= N and a multiple of 8 (cuBLASLt aux)",
                        epilogue, static_cast<long long>(p->pre_ld));
    if (C.dtype == HTR_DTYPE_F32 && p->in != HTR_DTYPE_F32)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul epilogue %s with an f32 C from lowp operands", epilogue);
  }
  if (desc->num_inputs == 3 && p->epilogue != 2) {
    // Row-major C is cuBLASLt's column-major D = C^T, whose rows are our columns: the bias vector
    // (one value per row of D, broadcast over its columns) is exactly OPS.md's [N] bias.
    const htr_plugin_tensor_t& Bi = desc->inputs[2];
    if (Bi.rank != 1 || Bi.shape[0] != p->N)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul bias must be [%lld]", static_cast<long long>(p->N));
    if (Bi.dtype != C.dtype && Bi.dtype != HTR_DTYPE_F32)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul bias dtype %d is neither C's (%d) nor f32", Bi.dtype,
                        C.dtype);
    if (Bi.dtype != C.dtype)  // cuBLASLt's bias has D's type outside fp8 kernels
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul bias must have C's dtype (cuBLASLt BIAS epilogue)");
    if (Bi.shape[0] > 1 && Bi.strides[0] != 1)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul bias must be contiguous");
    if (p->batch > 1)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul bias with batch dims");
    if (p->K == 0)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul bias with K = 0");
    p->bias = true;
  }
  for (const htr_plugin_tensor_t* t : {&A, &B}) {
    if (t->rank == 2) continue;
    if (t->rank != C.rank)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul batch dims of an input differ from C's");
    for (uint32_t i = 0; i + 2 < C.rank; ++i)
      if (t->shape[i] != C.shape[i])
        return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul batch dim %u: %lld vs C's %lld", i,
                          static_cast<long long>(t->shape[i]), static_cast<long long>(C.shape[i]));
  }
  if (p->M == 0 || p->N == 0 || p->batch == 0 || p->K == 0) return nullptr;  // handled at launch
  if (p->M > INT32_MAX || p->N > INT32_MAX || p->K > INT32_MAX || p->batch > INT32_MAX)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul dims beyond int32");
  return nullptr;
}

// HTR_CUDA_MATMUL_TUNE: how many of the heuristic's answers a plan asks for and times (default
// kTuneCandidates, at most kMaxTuneCandidates); 0 or 1: the heuristic's first answer, untimed.
int tune_candidates(const htr_sdk::Host& host) {
  const char* v = host.config("HTR_CUDA_MATMUL_TUNE");
  if (v == nullptr || *v == '\0') return kTuneCandidates;
  const long n = std::strtol(v, nullptr, 10);
  return n <= 1 ? 1 : n > kMaxTuneCandidates ? kMaxTuneCandidates : static_cast<int>(n);
}

uint32_t alignment_of(uint64_t addr) {
  uint32_t a = 256;
  while (a > 1 && (addr % a) != 0) a >>= 1;
  return a;
}

}  // namespace

struct Plan {
  const BlasApi* api = nullptr;
  void* op = nullptr;
  void* la = nullptr;  // first cuBLASLt operand (from B)
  void* lb = nullptr;  // second (from A)
  void* lc = nullptr;
  std::string key;                        // get_plan's cache key (the tuning decision's name)
  std::vector<HeuristicResult> candidates;  // the heuristic's answers, best-rated first (immutable)
  std::atomic<size_t> chosen{0};          // the candidate every call uses (tune_plan may change it once)
  std::atomic<bool> tuned{false};         // tune_plan ran (or is not to run) for this plan
  std::mutex tune_mu;
  std::mutex bias_mu;  // bias / epilogue plans: the pointer attributes are set on `op` right before each call
  const HeuristicResult& algo() const { return candidates[chosen.load(std::memory_order_acquire)]; }
  ~Plan() {
    if (api == nullptr) return;
    if (op) api->cublasLtMatmulDescDestroy(op);
    for (void* l : {la, lb, lc})
      if (l) api->cublasLtMatrixLayoutDestroy(l);
  }
};

BlasState::~BlasState() {
  for (auto& [k, p] : plans) delete p;
  if (api != nullptr && handle != nullptr) api->cublasLtDestroy(handle);
}

void BlasLib::load(const char* override_name) {
  std::string err;
  const bool opened = override_name != nullptr && *override_name != '\0'
                          ? lib.open({override_name}, &err)
                          : lib.open({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, &err);
  if (!opened) {
    why = "cuBLASLt not found (" + err.substr(0, err.find("; ")) + ")";
    return;
  }
  if (!lib.resolve(kSymbols, sizeof kSymbols / sizeof kSymbols[0], &api, &err)) {
    why = "unusable cuBLASLt: " + err;
    lib.close();
    return;
  }
  ok = true;
}

namespace {

// The device's BlasState (created on first use). NULL with a status in *st.
BlasState* state_of(htr_plugin_device_t* dev, htr_status_t* st) {
  htr_plugin_ctx_t* ctx = dev->ctx;
  std::call_once(ctx->blas.once, [ctx] { ctx->blas.load(ctx->host.config("HTR_CUDA_CUBLASLT")); });
  if (!ctx->blas.ok) {
    *st = dev->host().error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul needs cuBLASLt: %s", ctx->blas.why.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(dev->peer_mu);  // guards creation of dev->blas
  if (dev->blas == nullptr) {
    auto s = std::make_unique<BlasState>();
    s->api = &ctx->blas.api;
    if (int r = s->api->cublasLtCreate(&s->handle)) {
      *st = dev->host().error(blas_code(r), "cuda:%u: cublasLtCreate failed (%d)", dev->index, r);
      s->api = nullptr;
      return nullptr;
    }
    dev->blas = std::move(s);
  }
  return dev->blas.get();
}

// Builds (or finds) the plan for problem `p` with operand alignments.
htr_status_t get_plan(htr_plugin_device_t* dev, BlasState* bs, const Problem& p, const uint32_t align[4],
                      Plan** out) {
  char key[512];
  std::snprintf(key, sizeof key, "%d%d%d%d%d|e%d,%lld|%lld,%lld,%lld,%lld|%d%d|%lld,%lld,%lld|%lld,%lld,%lld|%d%d%d|%u,%u,%u,%u",
                p.in, p.out, p.tf32, p.beta != 0, p.bias, p.epilogue, static_cast<long long>(p.pre_ld),
                static_cast<long long>(p.M), static_cast<long long>(p.N),
                static_cast<long long>(p.K), static_cast<long long>(p.batch), p.trans_a, p.trans_b,
                static_cast<long long>(p.a.ld), static_cast<long long>(p.b.ld), static_cast<long long>(p.c.ld),
                static_cast<long long>(p.a.batch_stride), static_cast<long long>(p.b.batch_stride),
                static_cast<long long>(p.c.batch_stride), p.a.row_major, p.b.row_major, p.c.row_major, align[0],
                align[1], align[2], align[3]);
  std::lock_guard<std::mutex> lock(bs->mu);
  auto it = bs->plans.find(key);
  if (it != bs->plans.end()) {
    *out = it->second;
    return nullptr;
  }
  const BlasApi& api = *bs->api;
  auto plan = std::make_unique<Plan>();
  plan->api = &api;
  const htr_sdk::Host& host = dev->host();
  auto fail = [&](int r, const char* what) {
    return host.error(blas_code(r), "cuda:%u: %s failed (cuBLASLt status %d)", dev->index, what, r);
  };
  const int compute = p.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (int r = api.cublasLtMatmulDescCreate(&plan->op, compute, CUDA_R_32F)) return fail(r, "cublasLtMatmulDescCreate");
  // First operand = op(B)^T, second = op(A)^T (column-major view of
  // row-major C^T = B^T A^T).
  const int32_t opa = p.b.row_major != p.trans_b ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int32_t opb = p.a.row_major != p.trans_a ? CUBLAS_OP_N : CUBLAS_OP_T;
  api.cublasLtMatmulDescSetAttribute(plan->op, DESC_TRANSA, &opa, sizeof opa);
  api.cublasLtMatmulDescSetAttribute(plan->op, DESC_TRANSB, &opb, sizeof opb);
  if (p.bias || p.epilogue != 0) {
    const int32_t epi = p.epilogue == 2   ? EPILOGUE_DGELU
                        : p.epilogue == 1 ? (p.bias ? EPILOGUE_GELU_AUX_BIAS : EPILOGUE_GELU_AUX)
                                          : EPILOGUE_BIAS;
    if (int r = api.cublasLtMatmulDescSetAttribute(plan->op, DESC_EPILOGUE, &epi, sizeof epi))
      return fail(r, "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  }
  if (p.bias) {
    const int32_t bias_type = cuda_type(p.out);
    if (int r = api.cublasLtMatmulDescSetAttribute(plan->op, DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type))
      return fail(r, "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
  }
  if (p.epilogue != 0) {
    const int64_t ld = p.pre_ld;
    if (int r = api.cublasLtMatmulDescSetAttribute(plan->op, DESC_EPILOGUE_AUX_LD, &ld, sizeof ld))
      return fail(r, "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
  }
  auto layout = [&](const Mat& m, int type, void** l) -> int {
    const uint64_t rows = static_cast<uint64_t>(m.row_major ? m.c : m.r);
    const uint64_t cols = static_cast<uint64_t>(m.row_major ? m.r : m.c);
    if (int r = api.cublasLtMatrixLayoutCreate(l, type, rows, cols, m.ld)) return r;
    if (p.batch > 1) {
      const int32_t count = static_cast<int32_t>(p.batch);
      const int64_t stride = m.batch_rank == 0 ? 0 : m.batch_stride;
      api.cublasLtMatrixLayoutSetAttribute(*l, LAYOUT_BATCH_COUNT, &count, sizeof count);
      api.cublasLtMatrixLayoutSetAttribute(*l, LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    }
    return 0;
  };
  if (int r = layout(p.b, cuda_type(p.in), &plan->la)) return fail(r, "cublasLtMatrixLayoutCreate(B)");
  if (int r = layout(p.a, cuda_type(p.in), &plan->lb)) return fail(r, "cublasLtMatrixLayoutCreate(A)");
  if (int r = layout(p.c, cuda_type(p.out), &plan->lc)) return fail(r, "cublasLtMatrixLayoutCreate(C)");
  void* pref = nullptr;
  if (int r = api.cublasLtMatmulPreferenceCreate(&pref)) return fail(r, "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  api.cublasLtMatmulPreferenceSetAttribute(pref, PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  // Operand order of the preference: A, B, C, D of the cuBLASLt call.
  const uint32_t al[4] = {align[1], align[0], align[2], align[2]};
  for (int i = 0; i < 4; ++i)
    api.cublasLtMatmulPreferenceSetAttribute(pref, PREF_MIN_ALIGNMENT_A + i, &al[i], sizeof al[i]);
  int count = 0;
  HeuristicResult results[kMaxTuneCandidates];
  const int want = tune_candidates(host);
  const int r = api.cublasLtMatmulAlgoGetHeuristic(bs->handle, plan->op, plan->la, plan->lb, plan->lc, plan->lc,
                                                   pref, want, results, &count);
  api.cublasLtMatmulPreferenceDestroy(pref);
  if (r != 0 || count < 1)
    return host.error(r != 0 ? blas_code(r) : HTR_STATUS_UNIMPLEMENTED,
                      "cuda:%u: cuBLASLt has no algorithm for this matmul (status %d)", dev->index, r);
  for (int i = 0; i < count && i < want; ++i) {
    if (results[i].state == 0) plan->candidates.push_back(results[i]);
  }
  if (plan->candidates.empty()) plan->candidates.push_back(results[0]);
  plan->key = key;
  *out = plan.get();
  bs->plans.emplace(key, plan.release());
  return nullptr;
}

}  // namespace


// Whether C's bytes [addr[2], addr[2] + span[2]) overlap an input's (A, B, bias, a dgelu's pre):
// timing candidates would then change an input.
bool c_overlaps_inputs(const uint64_t addr[5], const uint64_t span[5], const Problem& p) {
  const int ins[3] = {0, 1, p.bias ? 3 : p.epilogue == 2 ? 4 : -1};
  for (int i : ins) {
    if (i < 0) continue;
    if (addr[i] < addr[2] + span[2] && addr[2] < addr[i] + span[i]) return true;
  }
  return false;
}

// First eager launch of a plan with more than one candidate: the candidate stored for this key
// by an earlier process (htr_sdk_decision.h: every process of the machine then uses the same
// algorithm, so runs reproduce bit for bit), or the fastest of kTuneReps timed calls each, stored.
// Never while the stream is capturing (tried again on a later launch); not with beta != 0 or C
// overlapping an input (the timing calls write C). Failures keep the heuristic's first answer.
// The calls write C (and a gelu epilogue's pre), which the launch's own call then overwrites.
template <typename Call>
void tune_plan(htr_plugin_device_t* dev, htr_plugin_stream_t* stream, const Problem& p, const uint64_t addr[5],
               const uint64_t span[5], Plan* plan, const Call& call_with) {
  std::lock_guard<std::mutex> lock(plan->tune_mu);
  if (plan->tuned.load()) return;
  if (stream->capturing.load()) return;
  const htr_sdk::Host& host = dev->host();
  if (plan->candidates.size() < 2 || p.beta != 0.0f || c_overlaps_inputs(addr, span, p)) {
    plan->tuned.store(true, std::memory_order_release);
    return;
  }
  const std::string dir = cache_dir_of(host) + "/cublaslt-tune";
  char name[256] = "";
  dev->drv().cuDeviceGetName(name, sizeof name - 1, dev->cu_device);
  const std::string key = "cublaslt-v1|" + std::string(name) + "|" +
                          std::to_string(dev->ctx->blas.api.cublasLtGetVersion()) + "|" + plan->key + "|" +
                          std::to_string(plan->candidates.size());
  const std::string path = dir + "/" + htr_sdk::decision_hash(key);
  std::string line;
  auto parse = [&](const std::string& l) -> long {
    char* end = nullptr;
    const long v = std::strtol(l.c_str(), &end, 10);
    return end != l.c_str() && v >= 0 && v < static_cast<long>(plan->candidates.size()) ? v : -1;
  };
  long pick = htr_sdk::decision_read(path, &line) ? parse(line) : -1;
  if (pick < 0) {
    const Driver& d = dev->drv();
    CUevent ev[2] = {nullptr, nullptr};
    bool ok = d.cuEventCreate(&ev[0], CU_EVENT_DEFAULT) == 0 && d.cuEventCreate(&ev[1], CU_EVENT_DEFAULT) == 0;
    float best = std::numeric_limits<float>::infinity();
    std::string times;
    for (size_t i = 0; ok && i < plan->candidates.size(); ++i) {
      const HeuristicResult& a = plan->candidates[i];
      bool run = call_with(a) == 0 && d.cuEventRecord(ev[0], stream->cu_stream) == 0;
      for (int k = 0; run && k < kTuneReps; ++k) run = call_with(a) == 0;
      float ms = 0.0f;
      run = run && d.cuEventRecord(ev[1], stream->cu_stream) == 0 && d.cuEventSynchronize(ev[1]) == 0 &&
            (d.cuEventElapsedTime_v2 != nullptr ? d.cuEventElapsedTime_v2(&ms, ev[0], ev[1])
                                                : d.cuEventElapsedTime(&ms, ev[0], ev[1])) == 0;
      if (!run) ok = d.cuStreamSynchronize(stream->cu_stream) == 0;  // a refused candidate: go on
      times += (i ? "," : "") + (run ? std::to_string(ms * 1e3f / kTuneReps) : std::string("-"));
      if (run && ms < best) best = ms, pick = static_cast<long>(i);
    }
    for (CUevent e : ev)
      if (e != nullptr) d.cuEventDestroy_v2(e);
    if (pick >= 0) {
      const long stored = parse(htr_sdk::decision_settle(dir, path, std::to_string(pick)));
      if (stored >= 0) pick = stored;
    }
    host.log(HTR_LOG_INFO, "cuda:%u: cuBLASLt %lldx%lldx%lld: candidates %s us -> %ld", dev->index,
             static_cast<long long>(p.M), static_cast<long long>(p.N), static_cast<long long>(p.K), times.c_str(),
             pick);
  }
  if (pick >= 0) plan->chosen.store(static_cast<size_t>(pick), std::memory_order_release);
  plan->tuned.store(true, std::memory_order_release);
}

htr_status_t matmul_query(htr_plugin_device_t* device, const htr_op_desc_t* desc, int32_t* out_score) {
  const htr_sdk::Host& host = device->host();
  HTR_SDK_RETURN_IF_ERROR(htr_sdk::check_not_null(host, out_score, "out_score"));
  Problem p;
  HTR_SDK_RETURN_IF_ERROR(analyze(host, desc, &p));
  htr_status_t st = nullptr;
  BlasState* bs = state_of(device, &st);
  if (bs == nullptr) return st;
  // An epilogue desc with buffers: the plan (cuBLASLt's heuristic for this epilogue, layout and
  // the tensors' alignments) is made now, so a combination without an algorithm is refused here,
  // where the host keeps its separate kernels, instead of failing at launch. (The plain matmul's
  // algorithms cover every layout this analysis admits; the epilogues' do not have to.)
  if (p.epilogue != 0 && p.M > 0 && p.N > 0 && p.K > 0 && p.batch > 0) {
    const htr_plugin_tensor_t* ts[3] = {&desc->inputs[0], &desc->inputs[1], &desc->outputs[0]};
    uint32_t align[4] = {0, 0, 0, 0};
    bool have = true;
    for (int i = 0; i < 3; ++i) {
      if (ts[i]->buffer == nullptr) {
        have = false;
        break;
      }
      align[i] = alignment_of(ts[i]->buffer->ptr + ts[i]->offset);
    }
    if (have) {
      HTR_SDK_RETURN_IF_ERROR(make_current(device));
      Plan* plan = nullptr;
      HTR_SDK_RETURN_IF_ERROR(get_plan(device, bs, p, align, &plan));
    }
  }
  *out_score = 100;  // ahead of reference (0) and generated kernels
  return nullptr;
}

htr_status_t matmul_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc) {
  htr_plugin_device_t* dev = stream->device;
  const htr_sdk::Host& host = dev->host();
  Problem p;
  HTR_SDK_RETURN_IF_ERROR(analyze(host, desc, &p));
  // A, B, C, bias, pre (absent ones null).
  const htr_plugin_tensor_t* ts[5] = {&desc->inputs[0], &desc->inputs[1], &desc->outputs[0],
                                       p.bias ? &desc->inputs[2] : nullptr,
                                       p.epilogue == 1 ? &desc->outputs[1] : p.epilogue == 2 ? &desc->inputs[2] : nullptr};
  static const char* const kNames[5] = {"A", "B", "C", "bias", "pre"};
  uint64_t addr[5] = {0, 0, 0, 0, 0}, span[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < 5; ++i) {
    if (ts[i] == nullptr) continue;
    const htr_plugin_tensor_t& t = *ts[i];
    if (t.buffer == nullptr)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul tensor %d has no buffer", i);
    if (t.buffer->device->cu_context != dev->cu_context)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul tensor %d is on cuda:%u, stream on cuda:%u", i,
                        t.buffer->device->index, dev->index);
    uint64_t end = 0;
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::tensor_extent(host, &t, &end, kNames[i]));
    if (end > t.buffer->size)
      return host.error(HTR_STATUS_INVALID_ARGUMENT, "cuda: matmul tensor %d reaches byte %llu of a %llu-byte buffer", i,
                        static_cast<unsigned long long>(end), static_cast<unsigned long long>(t.buffer->size));
    addr[i] = t.buffer->ptr + t.offset;
    span[i] = end - t.offset;
  }
  if (p.epilogue != 0 && addr[4] % 16 != 0)
    return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul epilogue: pre at byte %llu is not 16-byte aligned",
                      static_cast<unsigned long long>(addr[4]));
  HTR_SDK_RETURN_IF_ERROR(make_current(dev));
  if (p.M == 0 || p.N == 0 || p.batch == 0) return nullptr;
  if (p.K == 0) {
    // C = beta * C: with beta 0, zeros (cuBLASLt rejects K = 0).
    if (p.beta != 0.0f)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul with K = 0 and beta != 0");
    if (p.epilogue != 0)
      return host.error(HTR_STATUS_UNIMPLEMENTED, "cuda: matmul epilogue with K = 0");
    const htr_plugin_tensor_t& C = desc->outputs[0];
    uint64_t end = 0;
    HTR_SDK_RETURN_IF_ERROR(htr_sdk::tensor_extent(host, &C, &end, "C"));
    return cu_status(dev, dev->drv().cuMemsetD8Async(addr[2], 0, end - C.offset, stream->cu_stream), "cuMemsetD8Async");
  }
  htr_status_t st = nullptr;
  BlasState* bs = state_of(dev, &st);
  if (bs == nullptr) return st;
  const uint32_t align[4] = {alignment_of(addr[0]), alignment_of(addr[1]), alignment_of(addr[2]), 0};
  Plan* plan = nullptr;
  HTR_SDK_RETURN_IF_ERROR(get_plan(dev, bs, p, align, &plan));
  if (stream->workspace == 0)
    HTR_SDK_RETURN_IF_ERROR(dev->pool->alloc(kWorkspaceBytes, &stream->workspace, &stream->workspace_class));
  auto call_with = [&](const HeuristicResult& algo) {
    return bs->api->cublasLtMatmul(
        bs->handle, plan->op, &p.alpha, reinterpret_cast<const void*>(addr[1]), plan->la,
        reinterpret_cast<const void*>(addr[0]), plan->lb, &p.beta, reinterpret_cast<const void*>(addr[2]), plan->lc,
        reinterpret_cast<void*>(addr[2]), plan->lc, algo.algo, reinterpret_cast<void*>(stream->workspace),
        kWorkspaceBytes, stream->cu_stream);
  };
  auto call = [&] {
    if (!plan->tuned.load(std::memory_order_acquire)) tune_plan(dev, stream, p, addr, span, plan, call_with);
    return call_with(plan->algo());
  };
  int r = 0;
  if (p.bias || p.epilogue != 0) {
    // The descriptor is shared by every launch of this plan: the pointers and the call that reads
    // them happen under the plan's lock (cublasLtMatmul reads the descriptor before it returns).
    std::lock_guard<std::mutex> lock(plan->bias_mu);
    if (p.bias) {
      const void* bias_ptr = reinterpret_cast<const void*>(addr[3]);
      r = bs->api->cublasLtMatmulDescSetAttribute(plan->op, DESC_BIAS_POINTER, &bias_ptr, sizeof bias_ptr);
    }
    if (r == 0 && p.epilogue != 0) {
      const void* aux_ptr = reinterpret_cast<const void*>(addr[4]);
      r = bs->api->cublasLtMatmulDescSetAttribute(plan->op, DESC_EPILOGUE_AUX_POINTER, &aux_ptr, sizeof aux_ptr);
    }
    if (r == 0) r = call();
  } else {
    r = call();
  }
  if (r != 0) return host.error(blas_code(r), "cuda:%u: cublasLtMatmul failed (status %d)", dev->index, r);
  return nullptr;
}

}  // namespace htr_cuda
