// tools/probes/cublaslt_gelu.cu — probe of cuBLASLt's GELU epilogues at gpt2's MLP shapes in the
// cuda plugin's layout (row-major operands mapped to column-major by swapping A and B). Not built
// by meson:
//   /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 tools/probes/cublaslt_gelu.cu -o gelu -lcublasLt && ./gelu
// (on a machine with an NVIDIA GPU). For each case: the heuristic's answer, us per call (median of
// 20 after 5 warm-ups), and the worst error of 64 sampled rows against a double reference, in
// bf16 ulps of the reference, for the tanh and the erf forms of GELU.
//   fwd   Y[M,N] = gelu(X[M,K] W[K,N] + b), pre = X W + b: BIAS (plain), GELU_AUX_BIAS
//   bwd   dU[M,N] = (dY[M,K] Wp[N,K]^T) * gelu'(pre): DEFAULT (plain), DGELU, DGELU_BGRAD (bias
//         gradient sum_m dU[m, n], f32 and bf16)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                              \
  do {                                                                     \
    auto r_ = (x);                                                         \
    if (r_ != 0) {                                                         \
      std::printf("ERR %s = %d (line %d)\n", #x, (int)r_, __LINE__);      \
      return 1;                                                            \
    }                                                                      \
  } while (0)

using bf = __nv_bfloat16;

double gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double gelu_erf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double dgelu_tanh(double x) {
  const double c = 0.7978845608028654, a = 0.044715;
  const double t = std::tanh(c * (x + a * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * a * x * x);
}
double dgelu_erf(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double ulp_bf16(double v) {
  const double a = std::max(std::fabs(v), 1e-3);
  return std::ldexp(1.0, std::ilogb(a) - 7);
}
float f(bf v) { return __bfloat162float(v); }

struct Dev {
  void* p = nullptr;
  ~Dev() { cudaFree(p); }
};

std::vector<bf> rnd(size_t n, float scale, unsigned seed) {
  std::vector<bf> v(n);
  srand(seed);
  for (auto& x : v) x = __float2bfloat16(scale * ((rand() % 2001 - 1000) / 1000.0f));
  return v;
}

// One matmul D (col-major rows x cols, ld rows) = op(A) op(B) with epilogue `epi`.
int matmul(cublasLtHandle_t h, int epi, int rows, int cols, int k, const void* a, int opa, int lda, const void* b,
           int opb, int ldb, void* d, void* bias, int bias_type, void* aux, void* ws, size_t wsb, double* us,
           const char* label) {
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, 4));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, 4));
  int32_t e = epi;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, 4));
  if (bias) {
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    int32_t bt = bias_type;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4));
  }
  if (aux) {
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    int64_t ld = rows;
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, 8));
  }
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, opa == CUBLAS_OP_N ? rows : k, opa == CUBLAS_OP_N ? k : rows, lda));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, opb == CUBLAS_OP_N ? k : cols, opb == CUBLAS_OP_N ? cols : k, ldb));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, rows, cols, rows));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t w = wsb;
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &w, 8));
  cublasLtMatmulHeuristicResult_t res[1];
  int cnt = 0;
  int r = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, res, &cnt);
  if (r != 0 || cnt < 1) {
    std::printf("%-34s heuristic status %d count %d\n", label, r, cnt);
    *us = -1;
    return 0;
  }
  float alpha = 1, beta = 0;
  std::vector<float> t;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int i = 0; i < 25; ++i) {
    cudaEventRecord(e0);
    CK(cublasLtMatmul(h, op, &alpha, a, la, b, lb, &beta, d, lc, d, lc, &res[0].algo, ws, wsb, 0));
    cudaEventRecord(e1);
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (i >= 5) t.push_back(ms * 1000);
  }
  std::sort(t.begin(), t.end());
  *us = t[t.size() / 2];
  const double tf = 2.0 * rows * cols * k / (*us * 1e-6) / 1e12;
  std::printf("%-34s %8.1f us  %6.0f TFLOP/s\n", label, *us, tf);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return 0;
}

int main() {
  const int M = 16384, K = 768, N = 3072;
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  const size_t wsb = 32u << 20;
  Dev ws, dx, dw, db, dy_, dwp, out, aux, bg;
  CK(cudaMalloc(&ws.p, wsb));
  auto hx = rnd((size_t)M * K, 1.0f, 1), hw = rnd((size_t)K * N, 0.06f, 2), hb = rnd(N, 0.5f, 3);
  auto hdy = rnd((size_t)M * K, 1.0f, 4), hwp = rnd((size_t)N * K, 0.06f, 5);
  CK(cudaMalloc(&dx.p, hx.size() * 2));
  CK(cudaMalloc(&dw.p, hw.size() * 2));
  CK(cudaMalloc(&db.p, N * 2));
  CK(cudaMalloc(&dy_.p, hdy.size() * 2));
  CK(cudaMalloc(&dwp.p, hwp.size() * 2));
  CK(cudaMalloc(&out.p, (size_t)M * N * 2));
  CK(cudaMalloc(&aux.p, (size_t)M * N * 2));
  CK(cudaMalloc(&bg.p, N * 4));
  CK(cudaMemcpy(dx.p, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw.p, hw.data(), hw.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db.p, hb.data(), N * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dy_.p, hdy.data(), hdy.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dwp.p, hwp.data(), hwp.size() * 2, cudaMemcpyHostToDevice));
  // Row-major Y[M,N] = X[M,K] W[K,N] is column-major Y^T (N x M) = W^T (N x K, W's memory, ld N) X^T (K x M, ld K).
  double us = 0;
  std::printf("fwd M=%d N=%d K=%d (bf16, f32 accumulation)\n", M, N, K);
  if (matmul(h, CUBLASLT_EPILOGUE_BIAS, N, M, K, dw.p, CUBLAS_OP_N, N, dx.p, CUBLAS_OP_N, K, out.p, db.p, CUDA_R_16BF,
             nullptr, ws.p, wsb, &us, "BIAS (plain)"))
    return 1;
  if (matmul(h, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, N, M, K, dw.p, CUBLAS_OP_N, N, dx.p, CUBLAS_OP_N, K, out.p, db.p,
             CUDA_R_16BF, aux.p, ws.p, wsb, &us, "GELU_AUX_BIAS"))
    return 1;
  std::vector<bf> hy((size_t)M * N), hpre((size_t)M * N);
  CK(cudaMemcpy(hy.data(), out.p, hy.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hpre.data(), aux.p, hpre.size() * 2, cudaMemcpyDeviceToHost));
  double wt = 0, we = 0, wp = 0, wg = 0;  // worst ulps: gelu (tanh, erf), pre, gelu of the rounded pre
  for (int s = 0; s < 64; ++s) {
    const size_t m = (size_t)s * (M / 64) + s;
    for (int n = 0; n < N; ++n) {
      double acc = f(hb[n]);
      for (int k = 0; k < K; ++k) acc += (double)f(hx[m * K + k]) * f(hw[(size_t)k * N + n]);
      const double y = f(hy[m * N + n]), p = f(hpre[m * N + n]);
      wt = std::max(wt, std::fabs(y - gelu_tanh(acc)) / ulp_bf16(gelu_tanh(acc)));
      we = std::max(we, std::fabs(y - gelu_erf(acc)) / ulp_bf16(gelu_erf(acc)));
      wp = std::max(wp, std::fabs(p - acc) / ulp_bf16(acc));
      wg = std::max(wg, std::fabs(y - gelu_tanh(p)) / ulp_bf16(gelu_tanh(p)));
    }
  }
  std::printf("  worst ulps: y vs gelu_tanh(acc) %.2f, vs gelu_erf(acc) %.2f; pre vs acc %.2f; y vs gelu_tanh(pre) %.2f\n",
              wt, we, wp, wg);
  // Backward: dU[M,N] = dY[M,K] Wp[N,K]^T: column-major dU^T (N x M) = Wp (N x K: Wp's memory is K x N col-major,
  // op T) dY^T (K x M, ld K).
  std::printf("bwd M=%d N=%d K=%d\n", M, N, K);
  if (matmul(h, CUBLASLT_EPILOGUE_DEFAULT, N, M, K, dwp.p, CUBLAS_OP_T, K, dy_.p, CUBLAS_OP_N, K, out.p, nullptr, 0,
             nullptr, ws.p, wsb, &us, "DEFAULT (plain)"))
    return 1;
  if (matmul(h, CUBLASLT_EPILOGUE_DGELU, N, M, K, dwp.p, CUBLAS_OP_T, K, dy_.p, CUBLAS_OP_N, K, out.p, nullptr, 0,
             aux.p, ws.p, wsb, &us, "DGELU"))
    return 1;
  std::vector<bf> hdu((size_t)M * N);
  CK(cudaMemcpy(hdu.data(), out.p, hdu.size() * 2, cudaMemcpyDeviceToHost));
  double bt = 0, be = 0;
  for (int s = 0; s < 64; ++s) {
    const size_t m = (size_t)s * (M / 64) + s;
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k) acc += (double)f(hdy[m * K + k]) * f(hwp[(size_t)n * K + k]);
      const double p = f(hpre[m * N + n]), g = f(hdu[m * N + n]);
      const double rt = acc * dgelu_tanh(p), re = acc * dgelu_erf(p);
      bt = std::max(bt, std::fabs(g - rt) / ulp_bf16(rt));
      be = std::max(be, std::fabs(g - re) / ulp_bf16(re));
    }
  }
  std::printf("  worst ulps: dU vs acc*gelu_tanh'(pre) %.2f, vs acc*gelu_erf'(pre) %.2f\n", bt, be);
  for (int bty : {CUDA_R_32F, CUDA_R_16BF}) {
    if (matmul(h, CUBLASLT_EPILOGUE_DGELU_BGRAD, N, M, K, dwp.p, CUBLAS_OP_T, K, dy_.p, CUBLAS_OP_N, K, out.p, bg.p,
               bty, aux.p, ws.p, wsb, &us, bty == CUDA_R_32F ? "DGELU_BGRAD (f32 bias grad)" : "DGELU_BGRAD (bf16 bias grad)"))
      return 1;
    if (us < 0) continue;
    CK(cudaMemcpy(hdu.data(), out.p, hdu.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<double> ref(N, 0.0);
    for (size_t m = 0; m < (size_t)M; ++m)
      for (int n = 0; n < N; ++n) ref[n] += f(hdu[m * N + n]);
    std::vector<float> got(N);
    if (bty == CUDA_R_32F) {
      CK(cudaMemcpy(got.data(), bg.p, N * 4, cudaMemcpyDeviceToHost));
    } else {
      std::vector<bf> g(N);
      CK(cudaMemcpy(g.data(), bg.p, N * 2, cudaMemcpyDeviceToHost));
      for (int n = 0; n < N; ++n) got[n] = f(g[n]);
    }
    double e = 0, s2 = 0;
    for (int n = 0; n < N; ++n) e += (got[n] - ref[n]) * (got[n] - ref[n]), s2 += ref[n] * ref[n];
    std::printf("  bias grad NMSE vs double sum of the stored dU: %.3g\n", e / s2);
  }
  cublasLtDestroy(h);
  return 0;
}
