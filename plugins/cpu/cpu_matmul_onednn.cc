// oneDNN backend through the C API (no exceptions to catch). Primitives are
// cached per shape/layout/alpha/beta key; memory objects are created once
// per primitive and re-pointed with set_data_handle on every call.
#include "cpu_matmul_backends.h"

#include "htr_sdk_dtype.h"
#include "htr_sdk_dynlib.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#if HTR_CPU_HAVE_ONEDNN
#include <dnnl.h>
#endif

namespace htr_cpu {

#if HTR_CPU_HAVE_ONEDNN

namespace {

struct PrimKey {
  int64_t dims[3][3];
  int64_t strides[3][3];
  int ndims;
  int in_dt, out_dt;
  float alpha, beta;
  bool operator<(const PrimKey& o) const { return std::memcmp(this, &o, sizeof *this) < 0; }
};

struct Prim {
  dnnl_primitive_t prim = nullptr;
  dnnl_memory_t mem[3] = {nullptr, nullptr, nullptr};
  std::string impl;
};

dnnl_data_type_t dnnl_dt(htr_dtype_t d) {
  return d == HTR_DTYPE_BF16 ? dnnl_bf16 : dnnl_f32;
}

}  // namespace

struct OneDnnMatmul::State {
  uint32_t threads = 1;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<PrimKey, Prim> prims;
  bool bf16_primitive_failed = false;  // cannot build bf16: widen instead
  htr_sdk::DynLib gomp;
  void (*omp_set_num_threads)(int) = nullptr;
  int (*omp_get_max_threads)() = nullptr;

  ~State() {
    clear();
    if (stream != nullptr) {
      dnnl_stream_destroy(stream);
    }
    if (engine != nullptr) {
      dnnl_engine_destroy(engine);
    }
  }
  void clear() {
    for (auto& kv : prims) {
      for (dnnl_memory_t m : kv.second.mem) {
        if (m != nullptr) {
          dnnl_memory_destroy(m);
        }
      }
      if (kv.second.prim != nullptr) {
        dnnl_primitive_destroy(kv.second.prim);
      }
    }
    prims.clear();
  }
  // Build (or find) the primitive for `key`; NULL on failure.
  Prim* get(const PrimKey& key, std::string* why);
};

Prim* OneDnnMatmul::State::get(const PrimKey& key, std::string* why) {
  auto it = prims.find(key);
  if (it != prims.end()) {
    return &it->second;
  }
  if (prims.size() >= 512) {
    clear();  // bounded cache; oneDNN's own primitive cache makes rebuilds cheap
  }
  dnnl_memory_desc_t md[3];
  const dnnl_data_type_t dts[3] = {static_cast<dnnl_data_type_t>(key.in_dt),
                                   static_cast<dnnl_data_type_t>(key.in_dt),
                                   static_cast<dnnl_data_type_t>(key.out_dt)};
  for (int i = 0; i < 3; ++i) {
    if (dnnl_memory_desc_init_by_strides(&md[i], key.ndims, key.dims[i], dts[i],
                                         key.strides[i]) != dnnl_success) {
      *why = "oneDNN rejected a memory descriptor";
      return nullptr;
    }
  }
  dnnl_matmul_desc_t mm;
  if (dnnl_matmul_desc_init(&mm, &md[0], &md[1], nullptr, &md[2]) != dnnl_success) {
    *why = "oneDNN rejected the matmul descriptor";
    return nullptr;
  }
  dnnl_primitive_attr_t attr = nullptr;
  dnnl_post_ops_t po = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  Prim prim;
  bool ok = dnnl_primitive_attr_create(&attr) == dnnl_success;
  if (ok && key.alpha != 1.0f) {
    ok = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key.alpha) == dnnl_success;
  }
  if (ok && key.beta != 0.0f) {
    ok = dnnl_post_ops_create(&po) == dnnl_success &&
         dnnl_post_ops_append_sum(po, key.beta) == dnnl_success &&
         dnnl_primitive_attr_set_post_ops(attr, po) == dnnl_success;
  }
  ok = ok && dnnl_primitive_desc_create(&pd, &mm, attr, engine, nullptr) == dnnl_success;
  ok = ok && dnnl_primitive_create(&prim.prim, pd) == dnnl_success;
  if (ok) {
    const char* info = nullptr;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &info) == dnnl_success &&
        info != nullptr) {
      prim.impl = info;
    }
    for (int i = 0; i < 3 && ok; ++i) {
      ok = dnnl_memory_create(&prim.mem[i], &md[i], engine, DNNL_MEMORY_NONE) == dnnl_success;
    }
  }
  if (pd != nullptr) {
    dnnl_primitive_desc_destroy(pd);
  }
  if (po != nullptr) {
    dnnl_post_ops_destroy(po);
  }
  if (attr != nullptr) {
    dnnl_primitive_attr_destroy(attr);
  }
  if (!ok) {
    for (dnnl_memory_t m : prim.mem) {
      if (m != nullptr) {
        dnnl_memory_destroy(m);
      }
    }
    if (prim.prim != nullptr) {
      dnnl_primitive_destroy(prim.prim);
    }
    *why = "oneDNN could not create a matmul primitive for this shape";
    return nullptr;
  }
  return &prims.emplace(key, prim).first->second;
}

OneDnnMatmul::OneDnnMatmul(uint32_t threads) : s_(std::make_unique<State>()) {
  s_->threads = threads;
  if (dnnl_engine_create(&s_->engine, dnnl_cpu, 0) != dnnl_success) {
    s_->engine = nullptr;
    return;
  }
  if (dnnl_stream_create(&s_->stream, s_->engine, dnnl_stream_default_flags) != dnnl_success) {
    s_->stream = nullptr;
  }
  // oneDNN (Debian build) runs on OpenMP; its team size is a per-thread ICV.
  // run() sets it for the call and puts the caller's value back: matmuls run
  // on stream workers, pool threads and (streams.synchronize runs pending
  // work itself) on the embedder's own threads, whose OpenMP settings are
  // not ours to change. libgomp is already loaded as oneDNN's dependency;
  // this only finds it.
  std::string why;
  if (s_->gomp.open({"libgomp.so.1", "libomp.so", "libiomp5.so"}, &why)) {
    s_->omp_set_num_threads =
        reinterpret_cast<void (*)(int)>(s_->gomp.symbol("omp_set_num_threads"));
    s_->omp_get_max_threads =
        reinterpret_cast<int (*)()>(s_->gomp.symbol("omp_get_max_threads"));
    if (s_->omp_get_max_threads == nullptr) {
      s_->omp_set_num_threads = nullptr;
    }
  }
}

OneDnnMatmul::~OneDnnMatmul() = default;

bool OneDnnMatmul::built() { return true; }

bool OneDnnMatmul::usable() const { return s_->engine != nullptr && s_->stream != nullptr; }

bool OneDnnMatmul::bf16_native() const {
  return dnnl_get_effective_cpu_isa() >= dnnl_cpu_isa_avx512_core_bf16 &&
         dnnl_get_effective_cpu_isa() != dnnl_cpu_isa_avx2_vnni;
}

std::string OneDnnMatmul::description() const {
  const dnnl_version_t* v = dnnl_version();
  std::string s = "onednn " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                  std::to_string(v->patch) + " (omp";
  s += bf16_native() ? ", native bf16)" : ", bf16 emulated)";
  return s;
}

namespace {

// Fill dims/strides of operand `i` for a rows x cols matrix, optionally with
// a leading batch dim (nb entries, stride bs; bs == 0 means broadcast).
void describe(PrimKey* k, int i, bool batched, int64_t nb, int64_t bs, int64_t rows,
              int64_t cols, const Mat2D& m) {
  const int64_t rs = m.col_major ? 1 : m.ld;
  const int64_t cs = m.col_major ? m.ld : 1;
  if (batched) {
    const bool bcast = bs == 0 && nb > 1;
    k->dims[i][0] = bcast ? 1 : nb;
    k->strides[i][0] = bcast ? m.ld * (m.col_major ? cols : rows) : (bs == 0 ? 1 : bs);
    k->dims[i][1] = rows;
    k->dims[i][2] = cols;
    k->strides[i][1] = rs;
    k->strides[i][2] = cs;
  } else {
    k->dims[i][0] = rows;
    k->dims[i][1] = cols;
    k->strides[i][0] = rs;
    k->strides[i][1] = cs;
  }
}

// Sets the calling thread's OpenMP team size for one call, then restores it.
class OmpTeam {
 public:
  OmpTeam(int (*get)(), void (*set)(int), int want) : set_(set) {
    if (set_ != nullptr) {
      prev_ = get();
      if (prev_ == want) {
        set_ = nullptr;
      } else {
        set_(want);
      }
    }
  }
  ~OmpTeam() {
    if (set_ != nullptr) {
      set_(prev_);
    }
  }
  OmpTeam(const OmpTeam&) = delete;
  OmpTeam& operator=(const OmpTeam&) = delete;

 private:
  void (*set_)(int);
  int prev_ = 0;
};

}  // namespace

htr_sdk::WorkError OneDnnMatmul::run(const MatmulPlan& p, const MatmulArgs& args) {
  if (!usable()) {
    return {HTR_STATUS_UNAVAILABLE, "oneDNN engine unavailable"};
  }
  OmpTeam team(s_->omp_get_max_threads, s_->omp_set_num_threads, static_cast<int>(s_->threads));
  // bf16 without a oneDNN bf16 kernel: widen to f32 and run the f32 plan.
  if (p.in_dtype == HTR_DTYPE_BF16 && s_->bf16_primitive_failed) {
    MatmulPlan f = p;
    f.in_dtype = HTR_DTYPE_F32;
    f.a = Mat2D{false, p.k};
    f.b = Mat2D{false, p.n};
    f.batch_rank = 0;
    f.batch = 1;
    std::vector<float> fa(static_cast<size_t>(p.m * p.k)), fb(static_cast<size_t>(p.k * p.n));
    std::vector<float> fc;
    if (p.out_dtype == HTR_DTYPE_BF16) {
      fc.resize(static_cast<size_t>(p.m * p.n));
      f.out_dtype = HTR_DTYPE_F32;
      f.c = Mat2D{false, p.n};
    }
    for (int64_t bi = 0; bi < p.batch; ++bi) {
      widen_bf16(static_cast<const uint16_t*>(args.a) + batch_offset(p, p.a_bstride, bi), p.m,
                 p.k, p.a, fa.data());
      widen_bf16(static_cast<const uint16_t*>(args.b) + batch_offset(p, p.b_bstride, bi), p.k,
                 p.n, p.b, fb.data());
      MatmulArgs fargs{fa.data(), fb.data(), nullptr};
      const int64_t coff = batch_offset(p, p.c_bstride, bi);
      uint16_t* c16 = static_cast<uint16_t*>(args.c) + coff;
      if (p.out_dtype == HTR_DTYPE_F32) {
        fargs.c = static_cast<float*>(args.c) + coff;
      } else {
        if (p.beta != 0.0f) {
          widen_bf16(c16, p.m, p.n, p.c, fc.data());
        }
        fargs.c = fc.data();
      }
      htr_sdk::WorkError e = run(f, fargs);
      if (!e.ok()) {
        return e;
      }
      if (p.out_dtype == HTR_DTYPE_BF16) {
        narrow_to_bf16(fc.data(), p.m, p.n, p.c, c16);
      }
    }
    return {};
  }

  // The innermost batch dim goes into the primitive; outer ones are looped.
  PrimKey key;
  std::memset(&key, 0, sizeof key);
  const bool batched = p.batch_rank > 0;
  const uint32_t last = batched ? p.batch_rank - 1 : 0;
  const int64_t nb = batched ? p.batch_shape[last] : 1;
  key.ndims = batched ? 3 : 2;
  key.in_dt = dnnl_dt(p.in_dtype);
  key.out_dt = dnnl_dt(p.out_dtype);
  key.alpha = p.alpha;
  key.beta = p.beta;
  describe(&key, 0, batched, nb, batched ? p.a_bstride[last] : 0, p.m, p.k, p.a);
  describe(&key, 1, batched, nb, batched ? p.b_bstride[last] : 0, p.k, p.n, p.b);
  describe(&key, 2, batched, nb, batched ? p.c_bstride[last] : 0, p.m, p.n, p.c);
  std::string why;
  Prim* prim = s_->get(key, &why);
  if (prim == nullptr) {
    if (p.in_dtype == HTR_DTYPE_BF16 && !s_->bf16_primitive_failed) {
      s_->bf16_primitive_failed = true;
      return run(p, args);
    }
    return {HTR_STATUS_INTERNAL, why};
  }
  const size_t in_size = htr_sdk::dtype_size(p.in_dtype);
  const size_t out_size = htr_sdk::dtype_size(p.out_dtype);
  const int64_t outer = p.batch / nb;
  for (int64_t o = 0; o < outer; ++o) {
    const int64_t lin = o * nb;  // linear index of the first entry of this slab
    const char* a = static_cast<const char*>(args.a) +
                    batch_offset(p, p.a_bstride, lin) * static_cast<int64_t>(in_size);
    const char* b = static_cast<const char*>(args.b) +
                    batch_offset(p, p.b_bstride, lin) * static_cast<int64_t>(in_size);
    char* c = static_cast<char*>(args.c) +
              batch_offset(p, p.c_bstride, lin) * static_cast<int64_t>(out_size);
    if (dnnl_memory_set_data_handle(prim->mem[0], const_cast<char*>(a)) != dnnl_success ||
        dnnl_memory_set_data_handle(prim->mem[1], const_cast<char*>(b)) != dnnl_success ||
        dnnl_memory_set_data_handle(prim->mem[2], c) != dnnl_success) {
      return {HTR_STATUS_INTERNAL, "oneDNN set_data_handle failed"};
    }
    dnnl_exec_arg_t exec_args[3] = {{DNNL_ARG_SRC, prim->mem[0]},
                                    {DNNL_ARG_WEIGHTS, prim->mem[1]},
                                    {DNNL_ARG_DST, prim->mem[2]}};
    if (dnnl_primitive_execute(prim->prim, s_->stream, 3, exec_args) != dnnl_success ||
        dnnl_stream_wait(s_->stream) != dnnl_success) {
      return {HTR_STATUS_INTERNAL, "oneDNN matmul execution failed (" + prim->impl + ")"};
    }
  }
  return {};
}

#else  // !HTR_CPU_HAVE_ONEDNN

struct OneDnnMatmul::State {};
OneDnnMatmul::OneDnnMatmul(uint32_t) {}
OneDnnMatmul::~OneDnnMatmul() = default;
bool OneDnnMatmul::built() { return false; }
bool OneDnnMatmul::usable() const { return false; }
bool OneDnnMatmul::bf16_native() const { return false; }
std::string OneDnnMatmul::description() const { return "onednn (not built)"; }
htr_sdk::WorkError OneDnnMatmul::run(const MatmulPlan&, const MatmulArgs&) {
  return {HTR_STATUS_UNIMPLEMENTED, "cpu plugin built without oneDNN"};
}

#endif

}  // namespace htr_cpu
