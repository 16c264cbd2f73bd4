// matmul_peers.h — the libraries htr's cpu matmul is measured against,
// called directly (not through htr): OpenBLAS cblas_sgemm and oneDNN's
// matmul primitive. Row-major f32, C[M,N] = A[M,K] * B[K,N].
#ifndef HTR_TOOLS_HTR_BENCH_MATMUL_PEERS_H_
#define HTR_TOOLS_HTR_BENCH_MATMUL_PEERS_H_

#include <cstdint>
#include <memory>
#include <string>

namespace bench {

// Sets the thread count of both peers (OpenBLAS's pool and the OpenMP
// runtime oneDNN uses). These are process-wide, so a plugin linking the same
// libraries runs with the same count.
void SetPeerThreads(int threads);
// OpenBLAS back to one thread per caller, the cpu plugin's own setting (it
// splits large matmuls over its pinned pool instead).
void SetHtrPluginBlasThreads();

// Synchronous sgemm. Returns "" (it cannot fail on valid sizes).
std::string OpenBlasSgemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
                          int64_t k);

// A oneDNN matmul primitive for one shape, bound to fixed host arrays
// (borrowed; they must outlive the object). Create() builds the primitive
// once; Run() executes and waits.
class OneDnnMatmul {
 public:
  static std::unique_ptr<OneDnnMatmul> Create(const float* a, const float* b, float* c, int64_t m,
                                              int64_t n, int64_t k, std::string* error);
  virtual ~OneDnnMatmul() = default;
  virtual std::string Run() = 0;
};

// "oneDNN 2.6.3" / "OpenBLAS 0.3.21 ..." for the record.
std::string OneDnnVersion();
std::string OpenBlasVersion();

}  // namespace bench

#endif  // HTR_TOOLS_HTR_BENCH_MATMUL_PEERS_H_
