/*
 * cpu_matmul_backends.h — the two matmul backends behind MatmulEngine.
 * Each runs a whole MatmulPlan (all batch entries) on the calling thread,
 * which is a stream worker; the engine serializes calls, so a backend needs
 * no locking of its own. Neither throws except std::bad_alloc for scratch
 * memory (the work queue turns it into OUT_OF_MEMORY).
 *
 * OpenBlasMatmul: cblas_sgemm per batch entry. bf16 inputs are widened to
 *   f32 scratch (exact), multiplied in f32, and rounded to bf16 (nearest
 *   even) when C is bf16. OpenBLAS's own pthread pool is sized once with
 *   openblas_set_num_threads(threads).
 * OneDnnMatmul: a oneDNN matmul primitive (C API, no exceptions) per plan
 *   shape, cached; alpha as output scale, beta as a sum post-op; the last
 *   batch dim inside the primitive (3D), outer batch dims looped. bf16 runs
 *   natively where oneDNN has a bf16 kernel; where it cannot create a bf16
 *   primitive it widens to f32 like the OpenBLAS path. oneDNN's OpenMP team
 *   size is set to `threads` on each calling thread.
 *
 * When the library was not found at build time, built() is false and run()
 * returns UNIMPLEMENTED.
 */
#ifndef HTR_CPU_MATMUL_BACKENDS_H_
#define HTR_CPU_MATMUL_BACKENDS_H_

#include "cpu_matmul.h"

#include <memory>
#include <string>

namespace htr_cpu {

class OpenBlasMatmul {
 public:
  explicit OpenBlasMatmul(uint32_t threads);
  static bool built();
  std::string description() const;
  htr_sdk::WorkError run(const MatmulPlan& p, const MatmulArgs& args);

 private:
  uint32_t threads_;
};

class OneDnnMatmul {
 public:
  explicit OneDnnMatmul(uint32_t threads);
  ~OneDnnMatmul();
  static bool built();
  bool usable() const;  // engine and stream were created
  bool bf16_native() const;
  std::string description() const;
  htr_sdk::WorkError run(const MatmulPlan& p, const MatmulArgs& args);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

/* Shared by both backends: widen a strided bf16 matrix (rows x cols, layout
 * m) into dense row-major f32 `out` (rows*cols floats). */
void widen_bf16(const uint16_t* src, int64_t rows, int64_t cols, const Mat2D& m, float* out);
/* Round dense row-major f32 (rows x cols) into a strided bf16 matrix. */
void narrow_to_bf16(const float* src, int64_t rows, int64_t cols, const Mat2D& m,
                    uint16_t* out);

}  // namespace htr_cpu

#endif  // HTR_CPU_MATMUL_BACKENDS_H_
