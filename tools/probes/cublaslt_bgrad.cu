// tools/probes/cublaslt_bgrad.cu — a probe of cuBLASLt's bias-gradient epilogues in the cuda
// plugin's weight-gradient layout (plugins/cuda/README.md, "Tried and not faster"). Not built by meson:
//   /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 tools/probes/cublaslt_bgrad.cu -o bgrad -lcublasLt && ./bgrad
// (on a machine with an NVIDIA GPU). Prints the heuristic's answer, the bias gradient's NMSE
// against a double column sum, and us per call for each epilogue and shape.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>
#define CK(x) do { auto r_ = (x); if (r_ != 0) { std::printf("ERR %s = %d (line %d)\n", #x, (int)r_, __LINE__); return 1; } } while (0)
int run(cublasLtHandle_t h, int M, int N, int Kin, int biasType, int epi, bool timeit) {
  // dW[Kin,N] = X^T dY; X [M,Kin] bf16, dY [M,N] bf16 (row-major)
  size_t nx = (size_t)M * Kin, ny = (size_t)M * N;
  std::vector<__nv_bfloat16> hx(nx), hy(ny);
  srand(1);
  for (auto& v : hx) v = __float2bfloat16((rand() % 2001 - 1000) / 1000.0f);
  for (auto& v : hy) v = __float2bfloat16((rand() % 2001 - 1000) / 1000.0f);
  __nv_bfloat16 *dx, *dy; float* dw; void* db; void* ws;
  CK(cudaMalloc(&dx, nx * 2)); CK(cudaMalloc(&dy, ny * 2)); CK(cudaMalloc(&dw, (size_t)Kin * N * 4));
  CK(cudaMalloc(&db, N * 4)); CK(cudaMalloc(&ws, 32 << 20));
  CK(cudaMemcpy(dx, hx.data(), nx * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dy, hy.data(), ny * 2, cudaMemcpyHostToDevice));
  cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int32_t opa = CUBLAS_OP_N, opb = CUBLAS_OP_T;
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, 4));
  CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, 4));
  if (epi) {
    int32_t e = epi; CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, 4));
    int32_t bt = biasType; CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, 4));
    CK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &db, sizeof db));
  }
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, N, M, N));      // dY row-major [M,N] = col-major N x M
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, Kin, M, Kin));  // X row-major [M,Kin] = col-major Kin x M, op T
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, Kin, N));     // dW row-major [Kin,N] = col-major N x Kin
  cublasLtMatmulPreference_t pref; CK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t wsb = 32 << 20; CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8));
  cublasLtMatmulHeuristicResult_t res[1]; int cnt = 0;
  int r = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 1, res, &cnt);
  std::printf("M=%d N=%d Kin=%d epi=%d biasType=%d: heuristic status %d count %d\n", M, N, Kin, epi, biasType, r, cnt);
  if (r != 0 || cnt < 1) return 0;
  float alpha = 1, beta = 0;
  CK(cublasLtMatmul(h, op, &alpha, dy, la, dx, lb, &beta, dw, lc, dw, lc, &res[0].algo, ws, wsb, 0));
  CK(cudaDeviceSynchronize());
  if (epi) {
    std::vector<double> ref(N, 0.0);
    for (size_t m = 0; m < (size_t)M; ++m) for (int n = 0; n < N; ++n) ref[n] += __bfloat162float(hy[m * N + n]);
    std::vector<float> got(N);
    if (biasType == CUDA_R_32F) CK(cudaMemcpy(got.data(), db, N * 4, cudaMemcpyDeviceToHost));
    else { std::vector<__nv_bfloat16> g(N); CK(cudaMemcpy(g.data(), db, N * 2, cudaMemcpyDeviceToHost)); for (int n = 0; n < N; ++n) got[n] = __bfloat162float(g[n]); }
    double e = 0, s = 0;
    for (int n = 0; n < N; ++n) { e += (got[n] - ref[n]) * (got[n] - ref[n]); s += ref[n] * ref[n]; }
    std::printf("  bias grad NMSE %.3g (ref[0] %.4f got %.4f)\n", e / s, ref[0], got[0]);
    // also check dW[0,0]
  }
  if (timeit) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    for (int i = 0; i < 5; ++i) cublasLtMatmul(h, op, &alpha, dy, la, dx, lb, &beta, dw, lc, dw, lc, &res[0].algo, ws, wsb, 0);
    cudaEventRecord(a);
    for (int i = 0; i < 50; ++i) cublasLtMatmul(h, op, &alpha, dy, la, dx, lb, &beta, dw, lc, dw, lc, &res[0].algo, ws, wsb, 0);
    cudaEventRecord(b); cudaEventSynchronize(b);
    float ms = 0; cudaEventElapsedTime(&ms, a, b);
    std::printf("  %.2f us per call (%.1f TFLOP/s)\n", ms * 1000 / 50, 2.0 * M * N * Kin / (ms / 50 * 1e-3) / 1e12);
  }
  cudaFree(dx); cudaFree(dy); cudaFree(dw); cudaFree(db); cudaFree(ws);
  return 0;
}
int main() {
  cublasLtHandle_t h; CK(cublasLtCreate(&h));
  int shapes[4][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}};
  for (auto& s : shapes) {
    run(h, 16384, s[0], s[1], CUDA_R_32F, 0, true);
    run(h, 16384, s[0], s[1], CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADA, true);
    run(h, 16384, s[0], s[1], CUDA_R_16BF, CUBLASLT_EPILOGUE_BGRADA, false);
    run(h, 16384, s[0], s[1], CUDA_R_32F, CUBLASLT_EPILOGUE_BGRADB, false);
  }
  return 0;
}
