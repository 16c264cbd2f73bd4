/*
 * cuda_blaslt.h — cuBLASLt, loaded with dlopen (libcublasLt.so.13, .so.12,
 * .so; HTR_CUDA_CUBLASLT names another), and the `matmul` library op on it
 * (abi/OPS.md).
 *
 * Contract:
 *   - BlasLib::load is called once per plugin context, lazily, on the first
 *     op_query/op_launch; a missing library makes every matmul query
 *     UNIMPLEMENTED with the reason (the device then runs matmul elsewhere).
 *   - matmul_query/matmul_launch implement OPS.md's matmul: A [...,M,K]
 *     (trans_a: [...,K,M]), B [...,K,N] (trans_b: [...,N,K]), C [...,M,N];
 *     dtypes f32 -> f32, bf16 -> bf16|f32, f16 -> f16|f32 (f16 is beyond
 *     OPS.md's list; f32 accumulation everywhere). Batch dims equal or absent
 *     on one side (a strided batch with stride 0 broadcasts). Each matrix's
 *     inner dim must be contiguous (or the transposed view); C must be
 *     row-major contiguous per matrix. `impl`: auto | cublaslt (f32 in full
 *     fp32) | tf32 (f32 through TF32 tensor cores) — anything else is
 *     UNIMPLEMENTED.
 *   - Row-major C = op(A) op(B) is computed as column-major C^T = op(B)^T
 *     op(A)^T, so no operand is copied.
 *   - Plans (descriptors + up to 8 of the heuristic's algorithms,
 *     HTR_CUDA_MATMUL_TUNE=N asks for N, 0/1 for the first only) are cached
 *     per shape/dtype/layout/alignment key in the device's BlasState. A
 *     plan's first launch outside stream capture (beta 0, C overlapping no
 *     input) times each candidate (one untimed and 5 timed calls) and keeps
 *     the fastest; the choice is stored with htr_sdk_decision.h in
 *     cublaslt-tune/ of the plugin's cache directory (cuda_nvrtc.h
 *     cache_dir_of: $HTR_CACHE_DIR/cuda, ...), keyed by the
 *     GPU name, the cuBLASLt version and the plan key, and every later
 *     process reads it, so runs on one machine use the same algorithm and
 *     reproduce bit for bit. (H200 gpt2 bf16 step: the matmuls 9.75 -> 9.45
 *     ms, matmul_dgelu 2.00 -> 1.85 ms.) The workspace (32 MiB) is per
 *     stream (from the device pool), so streams never share one.
 *   - Bias (OPS.md's optional third input, [N]): CUBLASLT_EPILOGUE_BIAS. Our
 *     row-major C is cuBLASLt's column-major D = C^T, whose rows are our
 *     columns, so the bias vector (one value per row of D) is the [N] bias,
 *     added to the f32 accumulator before D's one rounding. Bias dtype must
 *     equal C's (cuBLASLt's rule outside fp8), contiguous, no batch dims,
 *     K > 0; otherwise UNIMPLEMENTED, so the host adds the bias itself. The
 *     bias pointer is a descriptor attribute: set under the plan's lock right
 *     before each cublasLtMatmul. The bias gradient (BGRADA: its A is our
 *     dY^T, reduced over k) is not wired yet.
 *   - `epilogue` (OPS.md): gelu -> CUBLASLT_EPILOGUE_GELU_AUX (GELU_AUX_BIAS
 *     with a bias), C = gelu_tanh(z) and the aux matrix = pre = z (the second
 *     output); dgelu -> CUBLASLT_EPILOGUE_DGELU, C = acc * gelu_tanh'(pre)
 *     (pre the third input). pre: C's shape and dtype, row-major, its row
 *     stride the aux leading dimension (>= N, a multiple of 8), 16-byte
 *     aligned; rank 2 only, beta 0, C's dtype that of the operands (no f32
 *     result from lowp operands); else UNIMPLEMENTED / INVALID_ARGUMENT. The
 *     aux pointer is set under the plan's lock like the bias's; op_query of
 *     an epilogue desc with buffers already makes its plan (the heuristic),
 *     so a combination without an algorithm is refused there. (H200 probe,
 *     tools/probes/cublaslt_gelu.cu: GELU_AUX_BIAS 160 us vs 124 for BIAS at
 *     16384x3072x768 bf16; DGELU 167 vs 121; both within 0.6 bf16 ulp of a
 *     double tanh-GELU reference.)
 */
#ifndef HTR_CUDA_BLASLT_H_
#define HTR_CUDA_BLASLT_H_

#include <htr/htr_plugin.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "htr_sdk_dynlib.h"

namespace htr_cuda {

struct BlasApi {
  using Handle = void*;
  int (*cublasLtCreate)(Handle* h);
  int (*cublasLtDestroy)(Handle h);
  size_t (*cublasLtGetVersion)(void);
  int (*cublasLtMatmulDescCreate)(void** desc, int compute_type, int scale_type);
  int (*cublasLtMatmulDescDestroy)(void* desc);
  int (*cublasLtMatmulDescSetAttribute)(void* desc, int attr, const void* buf, size_t size);
  int (*cublasLtMatrixLayoutCreate)(void** layout, int type, uint64_t rows, uint64_t cols,
                                    int64_t ld);
  int (*cublasLtMatrixLayoutDestroy)(void* layout);
  int (*cublasLtMatrixLayoutSetAttribute)(void* layout, int attr, const void* buf, size_t size);
  int (*cublasLtMatmulPreferenceCreate)(void** pref);
  int (*cublasLtMatmulPreferenceDestroy)(void* pref);
  int (*cublasLtMatmulPreferenceSetAttribute)(void* pref, int attr, const void* buf, size_t size);
  int (*cublasLtMatmulAlgoGetHeuristic)(Handle h, void* op, void* a, void* b, void* c, void* d,
                                        void* pref, int requested, void* results, int* count);
  int (*cublasLtMatmul)(Handle h, void* op, const void* alpha, const void* a, void* adesc,
                        const void* b, void* bdesc, const void* beta, const void* c, void* cdesc,
                        void* d, void* ddesc, const void* algo, void* workspace,
                        size_t workspace_bytes, void* stream);
};

// Per plugin context: the library (loaded once).
struct BlasLib {
  std::once_flag once;
  htr_sdk::DynLib lib;
  BlasApi api{};
  bool ok = false;
  std::string why;  // when !ok
  void load(const char* override_name);
};

struct Plan;  // cached descriptors + algorithm (cuda_blaslt.cc)

// Per device: the handle and the plan cache.
struct BlasState {
  const BlasApi* api = nullptr;
  BlasApi::Handle handle = nullptr;
  std::mutex mu;
  std::map<std::string, Plan*> plans;
  ~BlasState();
};

htr_status_t matmul_query(htr_plugin_device_t* device, const htr_op_desc_t* desc,
                          int32_t* out_score);
htr_status_t matmul_launch(htr_plugin_stream_t* stream, const htr_op_desc_t* desc);

}  // namespace htr_cuda

#endif  // HTR_CUDA_BLASLT_H_
