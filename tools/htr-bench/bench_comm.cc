// bench_comm.cc — `htr-bench comm`: bus bandwidth of all-reduce,
// reduce-scatter and all-gather through htr's communicators (htr_comm.h,
// made by htr_world_comm_create), next to the same MPI call made directly on
// host memory in the same run. Run it under mpirun:
//
//   mpirun -np 2 htr-bench comm [--device cpu:0] [--sizes 1K,1M,64M] [--ops all_reduce,...]
//
// Sizes are the collective's whole buffer in bytes (nccl-tests' convention:
// the all-reduce's vector, the reduce-scatter's input, the all-gather's
// output), f32. Per op and size: the median over repetitions of the slowest
// rank's time (each repetition starts at a barrier); algbw = size / time;
// busbw = algbw x 2(n-1)/n for all-reduce and x (n-1)/n for the others.
// Rank 0 prints JSON lines: metric busbw (impl htr, and impl mpi for the
// direct call) and a ratio line htr / mpi (peer "MPI_<call>").
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "emit.h"
#include "htr/htr.h"
#include "htr/htr_comm.h"
#include "htr/htr_world.h"
#include "registry.h"

namespace {

std::string Take(htr_status_t s) {
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m;
}

bool ParseSize(const std::string& t, uint64_t* out) {
  if (t.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  uint64_t mul = 1;
  if (end && *end) {
    const std::string suf(end);
    if (suf == "K" || suf == "KB") mul = 1ull << 10;
    else if (suf == "M" || suf == "MB") mul = 1ull << 20;
    else if (suf == "G" || suf == "GB") mul = 1ull << 30;
    else return false;
  }
  if (!(v > 0)) return false;
  *out = static_cast<uint64_t>(v * static_cast<double>(mul));
  return *out > 0;
}

std::string SizeName(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) std::snprintf(buf, sizeof buf, "%lluG", static_cast<unsigned long long>(b >> 30));
  else if (b >= (1ull << 20) && b % (1ull << 20) == 0) std::snprintf(buf, sizeof buf, "%lluM", static_cast<unsigned long long>(b >> 20));
  else if (b >= 1024 && b % 1024 == 0) std::snprintf(buf, sizeof buf, "%lluK", static_cast<unsigned long long>(b >> 10));
  else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(b));
  return buf;
}

// The MPI calls made directly (Open MPI's libmpi.so.40, loaded already by the world).
struct DirectMpi {
  int (*Allreduce)(const void*, void*, int, void*, void*, void*) = nullptr;
  int (*Reduce_scatter_block)(const void*, void*, int, void*, void*, void*) = nullptr;
  int (*Allgather)(const void*, int, void*, void*, int, void*, void*) = nullptr;
  void *world = nullptr, *f32 = nullptr, *sum = nullptr;
  bool Load() {
    void* h = dlopen("libmpi.so.40", RTLD_NOW | RTLD_NOLOAD);
    if (h == nullptr) return false;
    Allreduce = reinterpret_cast<decltype(Allreduce)>(dlsym(h, "MPI_Allreduce"));
    Reduce_scatter_block = reinterpret_cast<decltype(Reduce_scatter_block)>(dlsym(h, "MPI_Reduce_scatter_block"));
    Allgather = reinterpret_cast<decltype(Allgather)>(dlsym(h, "MPI_Allgather"));
    world = dlsym(h, "ompi_mpi_comm_world");
    f32 = dlsym(h, "ompi_mpi_float");
    sum = dlsym(h, "ompi_mpi_op_sum");
    return Allreduce && Reduce_scatter_block && Allgather && world && f32 && sum;
  }
};

struct Ctx {
  htr_world_t* world = nullptr;
  uint32_t n = 1, rank = 0;
  double min_time_s = 0.3;  // per (op, size, impl)
  int max_reps = 200;
};

// Median over repetitions of the slowest rank's time of `fn` ("" or an error).
template <typename F>
std::string TimeSlowest(const Ctx& c, F&& fn, double* out_s, int* out_reps) {
  using Clock = std::chrono::steady_clock;
  std::string err = fn();  // warmup
  if (err.empty()) err = fn();
  std::vector<double> samples;
  double total = 0;
  while (err.empty() && (total < c.min_time_s || samples.size() < 3) && static_cast<int>(samples.size()) < c.max_reps) {
    htr_status_t s = htr_world_barrier(c.world, 0);
    if (s) return "barrier: " + Take(s);
    const auto t0 = Clock::now();
    err = fn();
    double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    s = htr_world_all_reduce_f64(c.world, &dt, 1, HTR_REDUCE_MAX);
    if (s) return "time all-reduce: " + Take(s);
    // Every rank decides alike (the slowest time).
    samples.push_back(dt);
    total += dt;
  }
  if (!err.empty()) return err;
  std::sort(samples.begin(), samples.end());
  *out_s = samples[samples.size() / 2];
  *out_reps = static_cast<int>(samples.size());
  return "";
}

int RunComm(const bench::Args& a) {
  std::string device_id = "cpu:0", sizes_text = "1K,16K,256K,1M,4M,16M,64M", ops_text = "all_reduce,reduce_scatter,all_gather";
  Ctx c;
  for (size_t i = 0; i < a.items.size(); i += 2) {
    if (i + 1 >= a.items.size()) {
      std::fprintf(stderr, "htr-bench comm: option %s needs a value\n", a.items[i].c_str());
      return 2;
    }
    const std::string& k = a.items[i];
    const std::string& v = a.items[i + 1];
    if (k == "--device") device_id = v;
    else if (k == "--sizes") sizes_text = v;
    else if (k == "--ops") ops_text = v;
    else if (k == "--min-time") c.min_time_s = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "htr-bench comm: unknown option %s (--device, --sizes, --ops, --min-time)\n", k.c_str());
      return 2;
    }
  }
  std::vector<uint64_t> sizes;
  {
    std::stringstream ss(sizes_text);
    for (std::string t; std::getline(ss, t, ',');) {
      uint64_t b = 0;
      if (!ParseSize(t, &b) || b % 4 != 0) {
        std::fprintf(stderr, "htr-bench comm: size '%s' is not a multiple of 4 bytes (1K, 4M, 1G...)\n", t.c_str());
        return 2;
      }
      sizes.push_back(b);
    }
  }
  std::vector<std::string> ops;
  {
    std::stringstream ss(ops_text);
    for (std::string t; std::getline(ss, t, ',');) {
      if (t != "all_reduce" && t != "reduce_scatter" && t != "all_gather") {
        std::fprintf(stderr, "htr-bench comm: unknown op '%s' (all_reduce, reduce_scatter, all_gather)\n", t.c_str());
        return 2;
      }
      ops.push_back(t);
    }
  }
  htr_status_t s = htr_world_open(&c.world);
  if (s) {
    std::fprintf(stderr, "htr-bench comm: world: %s\n", Take(s).c_str());
    return 1;
  }
  c.n = htr_world_size(c.world);
  c.rank = htr_world_rank(c.world);
  htr_runtime_t* rt = nullptr;
  htr_device_t* dev = nullptr;
  htr_stream_t* stream = nullptr;
  htr_comm_t* comm = nullptr;
  int rc = 0;
  auto fail = [&](const std::string& m) {
    std::fprintf(stderr, "htr-bench comm: rank %u: %s\n", c.rank, m.c_str());
    rc = 1;
  };
  s = htr_runtime_create(nullptr, &rt);
  if (!s) s = htr_runtime_find_device(rt, device_id.c_str(), &dev);
  if (!s) s = htr_stream_create(dev, &stream);
  if (!s) s = htr_world_comm_create(c.world, dev, &comm);
  if (s) fail(Take(s));
  DirectMpi mpi;
  const bool have_mpi = rc == 0 && c.n > 1 && mpi.Load();
  for (size_t oi = 0; rc == 0 && oi < ops.size(); ++oi) {
    const std::string& op = ops[oi];
    for (uint64_t bytes : sizes) {
      if (rc != 0) break;
      const uint64_t total = bytes / 4;                  // elements of the whole buffer
      const uint64_t part = total / c.n;                 // one rank's slice (reduce-scatter, all-gather)
      if (op != "all_reduce" && part == 0) continue;
      const uint64_t in_elems = op == "all_gather" ? part : op == "reduce_scatter" ? part * c.n : total;
      const uint64_t out_elems = op == "reduce_scatter" ? part : op == "all_gather" ? part * c.n : total;
      const uint64_t used = (op == "all_reduce" ? total : part * c.n) * 4;  // bytes the collective moves
      htr_tensor_t *src = nullptr, *dst = nullptr;
      int64_t shp_in = static_cast<int64_t>(in_elems), shp_out = static_cast<int64_t>(out_elems);
      s = htr_tensor_create(dev, HTR_DTYPE_F32, 1, &shp_in, &src);
      if (!s) s = htr_tensor_create(dev, HTR_DTYPE_F32, 1, &shp_out, &dst);
      std::vector<float> host_in(in_elems, 1.0f + static_cast<float>(c.rank)), host_out(out_elems, 0.0f);
      if (!s) s = htr_tensor_copy_from_host(src, host_in.data(), in_elems * 4, nullptr);
      if (s) {
        fail(Take(s));
        htr_tensor_release(src);
        htr_tensor_release(dst);
        break;
      }
      auto htr_call = [&]() -> std::string {
        htr_status_t st = op == "all_reduce"       ? htr_comm_all_reduce(stream, comm, src, dst, HTR_REDUCE_SUM)
                          : op == "reduce_scatter" ? htr_comm_reduce_scatter(stream, comm, src, dst, HTR_REDUCE_SUM)
                                                   : htr_comm_all_gather(stream, comm, src, dst);
        if (!st) st = htr_stream_synchronize(stream);
        return st ? Take(st) : "";
      };
      auto mpi_call = [&]() -> std::string {
        int r = op == "all_reduce"
                    ? mpi.Allreduce(host_in.data(), host_out.data(), static_cast<int>(total), mpi.f32, mpi.sum, mpi.world)
                : op == "reduce_scatter"
                    ? mpi.Reduce_scatter_block(host_in.data(), host_out.data(), static_cast<int>(part), mpi.f32, mpi.sum,
                                               mpi.world)
                    : mpi.Allgather(host_in.data(), static_cast<int>(part), mpi.f32, host_out.data(),
                                    static_cast<int>(part), mpi.f32, mpi.world);
        return r == 0 ? "" : "MPI error " + std::to_string(r);
      };
      const double factor = c.n > 1 ? (op == "all_reduce" ? 2.0 : 1.0) * (c.n - 1) / c.n : 1.0;
      double t_htr = 0, t_mpi = 0;
      int reps_htr = 0, reps_mpi = 0;
      std::string err = TimeSlowest(c, htr_call, &t_htr, &reps_htr);
      // Check the result once: sum over ranks of (1 + rank), or the gathered slices.
      if (err.empty()) {
        s = htr_tensor_copy_to_host(dst, host_out.data(), out_elems * 4, nullptr);
        if (s) err = Take(s);
      }
      if (err.empty()) {
        for (uint64_t i = 0; i < out_elems && err.empty(); i += std::max<uint64_t>(1, out_elems / 64)) {
          // Warmups and repetitions all wrote the same values (out of place).
          const float want = op == "all_gather" ? 1.0f + static_cast<float>(i / part)
                                                : static_cast<float>(c.n) * (c.n + 1) / 2.0f;
          if (host_out[i] != want)
            err = "wrong result at element " + std::to_string(i) + ": " + std::to_string(host_out[i]) + ", want " +
                  std::to_string(want);
        }
      }
      if (err.empty() && have_mpi) err = TimeSlowest(c, mpi_call, &t_mpi, &reps_mpi);
      htr_tensor_release(src);
      htr_tensor_release(dst);
      if (!err.empty()) {
        fail(op + " " + SizeName(bytes) + ": " + err);
        break;
      }
      if (c.rank != 0) continue;
      const double bus_htr = static_cast<double>(used) / t_htr * factor / 1e9;
      bench::Line l;
      l.bench = "comm";
      l.device = device_id;
      l.shape = op + " " + SizeName(bytes);
      l.metric = "busbw";
      l.unit = "GB/s";
      l.extra = {{"op", op}, {"bytes", used}, {"ranks", c.n}, {"time_us", t_htr * 1e6},
                 {"algbw_gbs", static_cast<double>(used) / t_htr / 1e9}};
      l.impl = "htr";
      l.value = bus_htr;
      l.reps = reps_htr;
      bench::Emit(l);
      if (have_mpi) {
        const double bus_mpi = static_cast<double>(used) / t_mpi * factor / 1e9;
        const char* peer = op == "all_reduce" ? "MPI_Allreduce" : op == "reduce_scatter" ? "MPI_Reduce_scatter_block" : "MPI_Allgather";
        l.impl = "mpi";
        l.value = bus_mpi;
        l.reps = reps_mpi;
        l.extra["time_us"] = t_mpi * 1e6;
        l.extra["algbw_gbs"] = static_cast<double>(used) / t_mpi / 1e9;
        l.extra["call"] = peer;
        bench::Emit(l);
        bench::Line r;
        r.bench = "comm";
        r.impl = "htr";
        r.device = device_id;
        r.shape = l.shape;
        r.metric = "ratio";
        r.unit = "x";
        r.value = bus_htr / bus_mpi;
        r.reps = reps_htr;
        r.peer = peer;
        r.extra = {{"op", op}, {"bytes", used}, {"ranks", c.n}};
        bench::Emit(r);
      }
    }
  }
  htr_comm_destroy(comm);
  if (stream) htr_stream_destroy(stream);
  htr_runtime_destroy(rt);
  if (rc != 0 && c.n > 1) htr_world_abort(c.world, rc);
  htr_world_close(c.world);
  return rc;
}

}  // namespace

HTR_BENCH(comm, "all-reduce / reduce-scatter / all-gather bus bandwidth vs MPI called directly (under mpirun)", RunComm);
