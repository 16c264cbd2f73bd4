// tools/probes/colsum_gemv.cu — a probe: how fast can the bias gradients of gpt2's step
// (db[N] = sum over M rows of a bf16 dY[M,N], f32 result) run on this GPU? Not built by meson:
//   /usr/local/cuda/bin/nvcc -O3 -arch=sm_90 tools/probes/colsum_gemv.cu -o colsum -lcublasLt && ./colsum
// Times, for M = 16384 and N = 768, 2304, 3072 (the proj/fc2, qkv and fc1 biases):
//  - cuBLASLt: db[1,N] = ones[1,M] x dY[M,N] (bf16 in, f32 out), every algorithm the heuristic
//    offers (up to 16), best and heuristic-first;
//  - a plain CUDA two-kernel column sum (16-byte loads, f32 partials per row slice, fixed-order
//    finish) as a bandwidth reference.
// Each result is checked against a double column sum (NMSE). us per call from CUDA events over
// 50 calls after 5 warm-ups; GB/s counts the bytes of dY read once.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                     \
  do {                                                                            \
    auto r_ = (x);                                                                \
    if (r_ != 0) {                                                                \
      std::printf("ERR %s = %d (line %d)\n", #x, static_cast<int>(r_), __LINE__); \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

// Stage 1: block (32 x 8 threads) sums rows [slice*R, slice*R+R) of 256 columns (8 per thread
// from one 16-byte load), partials[slice][col].
__global__ void colsum_stage1(const __nv_bfloat16* __restrict__ y, float* __restrict__ part, int M, int N, int R) {
  const int c0 = (blockIdx.x * 32 + threadIdx.x) * 8;
  const int slice = blockIdx.y;
  const int r0 = slice * R;
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (c0 < N) {
    for (int r = r0 + threadIdx.y; r < r0 + R && r < M; r += 8) {
      const uint4 v = *reinterpret_cast<const uint4*>(y + (size_t)r * N + c0);
      const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&v);
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += __bfloat162float(h[e]);
    }
  }
  __shared__ float sm[8][32 * 8 + 1];
#pragma unroll
  for (int e = 0; e < 8; ++e) sm[threadIdx.y][threadIdx.x * 8 + e] = acc[e];
  __syncthreads();
  const int t = threadIdx.y * 32 + threadIdx.x;  // 256 threads, 256 columns
  float s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += sm[k][t];
  const int c = blockIdx.x * 256 + t;
  if (c < N) part[(size_t)slice * N + c] = s;
}

__global__ void colsum_finish(const float* __restrict__ part, float* __restrict__ out, int N, int S) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= N) return;
  float s = 0;
  for (int k = 0; k < S; ++k) s += part[(size_t)k * N + c];
  out[c] = s;
}

// us per call of `launch` over 50 calls after 5 warm-ups, from CUDA events a and b.
template <class F>
double TimeUs(F launch, cudaEvent_t a, cudaEvent_t b) {
  for (int k = 0; k < 5; ++k) launch();
  cudaEventRecord(a);
  for (int k = 0; k < 50; ++k) launch();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1000 / 50;
}

double Nmse(const std::vector<float>& got, const std::vector<double>& ref) {
  double e = 0, s = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    s += ref[i] * ref[i];
  }
  return e / s;
}

int Run(cublasLtHandle_t h, int M, int N) {
  const size_t ny = static_cast<size_t>(M) * N;
  std::vector<__nv_bfloat16> hy(ny), h1(M, __float2bfloat16(1.0f));
  srand(1);
  for (auto& v : hy) v = __float2bfloat16((rand() % 2001 - 1000) / 1000.0f);
  std::vector<double> ref(N, 0.0);
  for (size_t m = 0; m < static_cast<size_t>(M); ++m)
    for (int n = 0; n < N; ++n) ref[n] += __bfloat162float(hy[m * N + n]);
  __nv_bfloat16 *dy, *d1;
  float *db, *part;
  void* ws;
  const uint64_t wsb = 32ull << 20;
  CK(cudaMalloc(&dy, ny * 2));
  CK(cudaMalloc(&d1, static_cast<size_t>(M) * 2));
  CK(cudaMalloc(&db, N * 4));
  CK(cudaMalloc(&part, static_cast<size_t>(N) * 1024 * 4));
  CK(cudaMalloc(&ws, wsb));
  CK(cudaMemcpy(dy, hy.data(), ny * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d1, h1.data(), static_cast<size_t>(M) * 2, cudaMemcpyHostToDevice));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  const double gb = ny * 2.0 / 1e9;
  std::vector<float> got(N);

  // cuBLASLt, column-major view: D^T[N,1] = dY^T[N,M] (dY row-major = col-major N x M, op N) x ones[M,1].
  cublasLtMatmulDesc_t op;
  CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasLtMatrixLayout_t la, lb, lc;
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, N, M, N));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, M, 1, M));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, N, 1, N));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, 8));
  cublasLtMatmulHeuristicResult_t res[16];
  int cnt = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 16, res, &cnt));
  float alpha = 1, beta = 0;
  double best = 1e30;
  int besti = -1;
  for (int i = 0; i < cnt; ++i) {
    if (cublasLtMatmul(h, op, &alpha, dy, la, d1, lb, &beta, db, lc, db, lc, &res[i].algo, ws, wsb, 0) != 0) continue;
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got.data(), db, N * 4, cudaMemcpyDeviceToHost));
    const double e = Nmse(got, ref);
    const double us = TimeUs(
        [&] { cublasLtMatmul(h, op, &alpha, dy, la, d1, lb, &beta, db, lc, db, lc, &res[i].algo, ws, wsb, 0); }, a, b);
    std::printf("M=%d N=%d cublaslt algo %d: %.2f us (%.0f GB/s) NMSE %.3g\n", M, N, i, us, gb / (us * 1e-6), e);
    if (us < best) {
      best = us;
      besti = i;
    }
  }
  std::printf("M=%d N=%d cublaslt best: algo %d of %d, %.2f us (%.0f GB/s)\n", M, N, besti, cnt, best,
              gb / (best * 1e-6));

  // Plain CUDA two-kernel sum for a few slice counts.
  for (int S : {64, 128, 256, 512}) {
    const int R = (M + S - 1) / S;
    dim3 g1((N + 255) / 256, S), b1(32, 8);
    auto launch = [&] {
      colsum_stage1<<<g1, b1>>>(dy, part, M, N, R);
      colsum_finish<<<(N + 127) / 128, 128>>>(part, db, N, S);
    };
    launch();
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got.data(), db, N * 4, cudaMemcpyDeviceToHost));
    const double e = Nmse(got, ref);
    const double us = TimeUs(launch, a, b);
    std::printf("M=%d N=%d cuda two-kernel S=%d: %.2f us (%.0f GB/s) NMSE %.3g\n", M, N, S, us, gb / (us * 1e-6), e);
  }
  cudaFree(dy);
  cudaFree(d1);
  cudaFree(db);
  cudaFree(part);
  cudaFree(ws);
  return 0;
}

int main() {
  cublasLtHandle_t h;
  CK(cublasLtCreate(&h));
  for (int n : {768, 2304, 3072}) Run(h, 16384, n);
  return 0;
}
