// matmul_peers.cc — OpenBLAS and oneDNN called the way a user would, with
// plain row-major layouts (the same layouts htr is given), so the comparison
// is like for like. oneDNN's C++ API throws dnnl::error; it is caught here.
#include "matmul_peers.h"

#include <cblas.h>
#include <omp.h>

#include <dnnl.hpp>
#include <string>

namespace bench {

void SetPeerThreads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
}

void SetHtrPluginBlasThreads() { openblas_set_num_threads(1); }

std::string OpenBlasSgemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
                          int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a, static_cast<blasint>(k), b,
              static_cast<blasint>(n), 0.0f, c, static_cast<blasint>(n));
  return {};
}

namespace {

class OneDnnImpl : public OneDnnMatmul {
 public:
  OneDnnImpl(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k)
      : eng_(dnnl::engine::kind::cpu, 0), stream_(eng_) {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    dnnl::memory::desc a_md({m, k}, dt::f32, tag::ab);
    dnnl::memory::desc b_md({k, n}, dt::f32, tag::ab);
    dnnl::memory::desc c_md({m, n}, dt::f32, tag::ab);
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng_);
    prim_ = dnnl::matmul(pd);
    a_ = dnnl::memory(a_md, eng_, const_cast<float*>(a));
    b_ = dnnl::memory(b_md, eng_, const_cast<float*>(b));
    c_ = dnnl::memory(c_md, eng_, c);
  }

  std::string Run() override {
    try {
      prim_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, c_}});
      stream_.wait();
    } catch (const dnnl::error& e) {
      return std::string("oneDNN: ") + e.what();
    }
    return {};
  }

 private:
  dnnl::engine eng_;
  dnnl::stream stream_;
  dnnl::matmul prim_;
  dnnl::memory a_, b_, c_;
};

}  // namespace

std::unique_ptr<OneDnnMatmul> OneDnnMatmul::Create(const float* a, const float* b, float* c,
                                                   int64_t m, int64_t n, int64_t k,
                                                   std::string* error) {
  try {
    return std::make_unique<OneDnnImpl>(a, b, c, m, n, k);
  } catch (const dnnl::error& e) {
    *error = std::string("oneDNN: ") + e.what();
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return nullptr;
}

std::string OneDnnVersion() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

std::string OpenBlasVersion() {
  const char* c = openblas_get_config();
  return c ? std::string(c) : "OpenBLAS";
}

}  // namespace bench
