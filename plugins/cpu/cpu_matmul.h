/*
 * cpu_matmul.h — the `matmul` library op of the CPU plugin (abi/OPS.md):
 *   C = alpha * op(A) * op(B) + beta * C (+ bias), batched, f32 and bf16.
 *   The optional bias ([N], f32 or C's dtype; OPS.md) is added to the f32
 *   product before C's one rounding: an f32 C gets the bias added in place
 *   after the GEMM, a bf16 C is computed into f32 scratch, the bias added,
 *   then rounded once into C.
 *
 * The `epilogue` attribute (OPS.md, "The `epilogue` attribute"): "gelu"
 * (outputs C and pre; optional bias) and "dgelu" (third input pre) are
 * rank-2 only with beta 0. The product (+ bias) is computed into dense f32
 * scratch with the same engine, then one pass per element writes
 * pre = round(z), C = round(gelu_tanh(z)) (gelu) or
 * C = round(z * gelu_tanh'(pre)) (dgelu), in C's dtype (f32 or bf16). C and
 * the gelu output pre must be row-major (last stride 1, any row stride >= N);
 * dgelu's input pre likewise, read with its own row stride.
 *
 * matmul_plan() turns an op desc into a MatmulPlan (everything the kernels
 * need, copied out of the borrowed desc) or a status:
 *   INVALID_ARGUMENT  wrong tensor/attr counts, unknown attrs, shapes that do
 *                     not agree, unknown `impl` or `epilogue` name; with an
 *                     epilogue: beta != 0, a pre of the wrong shape/dtype;
 *   UNIMPLEMENTED     dtype combination, layout (neither of the last two
 *                     strides is 1), negative strides, dims beyond int32,
 *                     C batch strides of 0, or a forced impl not built in;
 *                     with an epilogue: batch dims, a C or pre that is not
 *                     row-major.
 *
 * MatmulEngine runs plans (one per plugin context). run() is called on a
 * stream worker thread with pointers to element [0,...,0] of A, B and C. It
 * serializes matmuls of all streams, and with impl `auto` it picks the
 * faster backend per (M, N, K, layouts, dtypes) key of the piece one thread
 * runs: the first call with a new key times both backends a few times on
 * the real inputs (writing into scratch memory, never into C) and caches the
 * winner for the life of the context. Thread-safe.
 *
 * Threads: one scheme for the whole plugin. Both libraries run
 * single-threaded (OpenBLAS's global thread count is set to 1; each calling
 * thread's OpenMP team size to 1), and a matmul big enough to share is split
 * over the plugin's pinned pool: batch entries when there are at least as
 * many as workers, else rows (or columns) of C. Library threads therefore
 * never exist, so none busy-wait (libgomp spin, OpenBLAS sched_yield loops)
 * against the host's reference kernels between matmuls; the pool's workers
 * sleep on a condition variable. Each worker has its own oneDNN state
 * (primitive cache, memory objects), so no primitive is shared between
 * threads.
 */
#ifndef HTR_CPU_MATMUL_H_
#define HTR_CPU_MATMUL_H_

#include "htr_sdk_queue.h"
#include "htr_sdk_status.h"

#include <htr/htr_plugin.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace htr_cpu {

enum class MatmulImpl { kAuto = 0, kOpenBlas = 1, kOneDnn = 2 };
const char* matmul_impl_name(MatmulImpl impl);
/* false for "auto" too; parses "auto" | "openblas" | "onednn". */
bool matmul_impl_parse(const char* name, MatmulImpl* out);
bool matmul_impl_built(MatmulImpl impl);  // kAuto: any backend built

/* A logical rows x cols matrix in column- or row-major storage, `ld` elements
 * between consecutive columns (col-major) or rows (row-major); ld >= the
 * inner extent, >= 1. */
struct Mat2D {
  bool col_major = false;
  int64_t ld = 1;
};

/* The `epilogue` attribute (OPS.md). */
enum class MatmulEpilogue { kNone = 0, kGelu = 1, kDgelu = 2 };

struct MatmulPlan {
  htr_dtype_t in_dtype = HTR_DTYPE_F32;   // A and B
  htr_dtype_t out_dtype = HTR_DTYPE_F32;  // C
  int64_t m = 0, n = 0, k = 0;
  Mat2D a, b, c;  // a: op(A) m x k, b: op(B) k x n, c: m x n
  uint32_t batch_rank = 0;  // batch dims of C
  int64_t batch_shape[HTR_MAX_RANK] = {};
  int64_t a_bstride[HTR_MAX_RANK] = {};  // elements; 0 = broadcast
  int64_t b_bstride[HTR_MAX_RANK] = {};
  int64_t c_bstride[HTR_MAX_RANK] = {};
  int64_t batch = 1;  // product of batch_shape
  float alpha = 1.0f, beta = 0.0f;
  MatmulImpl impl = MatmulImpl::kAuto;
  bool has_bias = false;                     // third input [n]
  htr_dtype_t bias_dtype = HTR_DTYPE_F32;    // f32 or out_dtype
  MatmulEpilogue epilogue = MatmulEpilogue::kNone;  // kNone: batch and beta as above
  Mat2D pre;  // with an epilogue: pre's layout (row-major, out_dtype, m x n)
};

/* Pointers to element [0,...,0] of each tensor. */
struct MatmulArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;  // [n], plan.bias_dtype; when plan.has_bias
  void* pre_out = nullptr;       // gelu: the second output, plan.pre
  const void* pre_in = nullptr;  // dgelu: the third input, plan.pre
};

/* `default_impl` applies when the desc has no `impl` attribute or "auto"
 * is overridden by HTR_CPU_MATMUL_IMPL (the context passes it). */
htr_status_t matmul_plan(const htr_sdk::Host& host, const htr_op_desc_t* desc,
                         MatmulImpl default_impl, MatmulPlan* out);

/* Element offset of batch index `linear` for an operand's batch strides. */
int64_t batch_offset(const MatmulPlan& p, const int64_t* bstride, int64_t linear);

class OpenBlasMatmul;
class OneDnnMatmul;

class ThreadPool;

class MatmulEngine {
 public:
  /* `host` and `pool` outlive the engine; `pool` may be NULL (everything
   * runs on the calling thread). `tune_dir`: where `auto`'s per-shape choices
   * are stored for every later process of the machine (htr_sdk_decision.h:
   * the first process to measure a shape decides it, so runs reproduce each
   * other bit for bit); empty keeps them in this engine only. */
  MatmulEngine(const htr_sdk::Host& host, ThreadPool* pool, std::string tune_dir = std::string());
  ~MatmulEngine();
  MatmulEngine(const MatmulEngine&) = delete;
  MatmulEngine& operator=(const MatmulEngine&) = delete;

  htr_sdk::WorkError run(const MatmulPlan& plan, const MatmulArgs& args);
  /* The backend `auto` uses for the plan's key; kAuto if not yet tuned. */
  MatmulImpl cached_choice(const MatmulPlan& plan) const;
  /* e.g. "openblas 0.3.21 (pthread, 2 threads), onednn 2.6.3 (omp, avx512_core_bf16)" */
  std::string backends_description() const;
  bool bf16_native() const;

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int, int, int, int>;
  static Key key_of(const MatmulPlan& p);
  /* `slot`: the oneDNN state to use (a pool worker index, or workers() for
   * the calling thread). */
  /* run() for a plan with a bias (see the top comment). */
  htr_sdk::WorkError run_bias(const MatmulPlan& plan, const MatmulArgs& args);
  /* run() for a plan with an epilogue (see the top comment). */
  htr_sdk::WorkError run_epilogue(const MatmulPlan& plan, const MatmulArgs& args);
  htr_sdk::WorkError run_impl(MatmulImpl impl, const MatmulPlan& p, const MatmulArgs& args,
                              uint32_t slot);
  htr_sdk::WorkError tune(const MatmulPlan& p, const MatmulArgs& args, MatmulImpl* out);
  /* The stored decision for the plan's key, or tune() and store it. */
  htr_sdk::WorkError stored_or_tuned(const MatmulPlan& p, const MatmulArgs& args, MatmulImpl* out);
  /* Resolves `auto` for plan `p` (tuning on first use). */
  htr_sdk::WorkError choose(const MatmulPlan& p, const MatmulArgs& args, MatmulImpl* out);
  uint32_t workers() const;

  const htr_sdk::Host& host_;
  ThreadPool* pool_;
  std::unique_ptr<OpenBlasMatmul> openblas_;
  std::vector<std::unique_ptr<OneDnnMatmul>> onednn_;  // per pool worker, then the caller
  std::mutex exec_mu_;          // one matmul at a time
  mutable std::mutex cache_mu_;  // guards choices_
  std::map<Key, MatmulImpl> choices_;
  std::string tune_dir_;
};

}  // namespace htr_cpu

#endif  // HTR_CPU_MATMUL_H_
