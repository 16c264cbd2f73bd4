// comm_test.cc — run as 2+ ranks under mpirun (tests/comm/mpi_run.py): the
// world (rank, size, broadcast, all-reduce, barrier) and every collective of
// htr_comm.h through communicators from htr_world_comm_create, twice: every
// rank on cpu:0 (the cpu plugin's collectives over MPI), then rank 1 on the
// null plugin (ranks on different plugins: the runtime stages through host
// memory over MPI for every rank). Prints one line per check; exit 0 when
// all pass, 1 at the first failure (the job is aborted so no rank waits).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "htr/htr.h"
#include "htr/htr_comm.h"
#include "htr/htr_world.h"

namespace {

htr_world_t* g_world = nullptr;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "comm_test: rank %u: FAIL: %s\n", htr_world_rank(g_world), what.c_str());
  htr_world_abort(g_world, 1);
  std::abort();
}

void Ok(htr_status_t s, const std::string& what) {
  if (s == nullptr) return;
  std::string m = htr_status_message(s);
  htr_status_free(s);
  Die(what + ": " + m);
}

htr_tensor_t* Make(htr_device_t* d, int64_t n, const std::vector<float>& v) {
  htr_tensor_t* t = nullptr;
  Ok(htr_tensor_create(d, HTR_DTYPE_F32, 1, &n, &t), "tensor_create");
  if (!v.empty()) Ok(htr_tensor_copy_from_host(t, v.data(), v.size() * 4, nullptr), "copy_from_host");
  return t;
}

std::vector<float> Read(htr_tensor_t* t, size_t n) {
  std::vector<float> v(n);
  Ok(htr_tensor_copy_to_host(t, v.data(), n * 4, nullptr), "copy_to_host");
  return v;
}

void Expect(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (std::fabs(got[i] - want[i]) > 1e-5f * std::fabs(want[i]) + 1e-6f)
      Die(what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", want " +
          std::to_string(want[i]));
}

// Every collective on `comm` (world size n, this rank r), on `stream`.
void Collectives(htr_device_t* d, htr_stream_t* stream, htr_comm_t* comm, const std::string& tag) {
  const uint32_t n = htr_comm_size(comm), r = htr_comm_rank(comm);
  const int64_t m = 1000;  // per-rank slice
  std::vector<float> mine(static_cast<size_t>(m * n)), want(static_cast<size_t>(m * n));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(r + 1) * 0.5f + static_cast<float>(i % 7);
  // all-reduce SUM out of place, MAX and AVG in place
  {
    htr_tensor_t* a = Make(d, m * n, mine);
    htr_tensor_t* b = Make(d, m * n, {});
    Ok(htr_comm_all_reduce(stream, comm, a, b, HTR_REDUCE_SUM), "all_reduce");
    Ok(htr_stream_synchronize(stream), "sync");
    for (size_t i = 0; i < want.size(); ++i) {
      double s = 0;
      for (uint32_t q = 0; q < n; ++q) s += (q + 1) * 0.5 + static_cast<double>(i % 7);
      want[i] = static_cast<float>(s);
    }
    Expect(Read(b, want.size()), want, tag + " all_reduce sum");
    Ok(htr_comm_all_reduce(stream, comm, a, a, HTR_REDUCE_MAX), "all_reduce max");
    Ok(htr_stream_synchronize(stream), "sync");
    for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<float>(n) * 0.5f + static_cast<float>(i % 7);
    Expect(Read(a, want.size()), want, tag + " all_reduce max in place");
    Ok(htr_comm_all_reduce(stream, comm, b, b, HTR_REDUCE_AVG), "all_reduce avg");
    Ok(htr_stream_synchronize(stream), "sync");
    for (size_t i = 0; i < want.size(); ++i) {
      double s = 0;
      for (uint32_t q = 0; q < n; ++q) s += (q + 1) * 0.5 + static_cast<double>(i % 7);
      want[i] = static_cast<float>(s);  // avg over ranks of an already-summed (equal) vector
    }
    Expect(Read(b, want.size()), want, tag + " all_reduce avg in place");
    htr_tensor_release(a);
    htr_tensor_release(b);
  }
  // reduce-scatter: this rank's slice of the sum
  {
    htr_tensor_t* a = Make(d, m * n, mine);
    htr_tensor_t* b = Make(d, m, {});
    Ok(htr_comm_reduce_scatter(stream, comm, a, b, HTR_REDUCE_SUM), "reduce_scatter");
    Ok(htr_stream_synchronize(stream), "sync");
    std::vector<float> w(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) {
      const size_t gi = static_cast<size_t>(r * m + i);
      double s = 0;
      for (uint32_t q = 0; q < n; ++q) s += (q + 1) * 0.5 + static_cast<double>(gi % 7);
      w[static_cast<size_t>(i)] = static_cast<float>(s);
    }
    Expect(Read(b, w.size()), w, tag + " reduce_scatter");
    htr_tensor_release(a);
    htr_tensor_release(b);
  }
  // all-gather: slice q is rank q's values
  {
    std::vector<float> part(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) part[static_cast<size_t>(i)] = static_cast<float>(r * 100 + i);
    htr_tensor_t* a = Make(d, m, part);
    htr_tensor_t* b = Make(d, m * n, {});
    Ok(htr_comm_all_gather(stream, comm, a, b), "all_gather");
    Ok(htr_stream_synchronize(stream), "sync");
    std::vector<float> w(static_cast<size_t>(m * n));
    for (uint32_t q = 0; q < n; ++q)
      for (int64_t i = 0; i < m; ++i) w[static_cast<size_t>(q * m + i)] = static_cast<float>(q * 100 + i);
    Expect(Read(b, w.size()), w, tag + " all_gather");
    htr_tensor_release(a);
    htr_tensor_release(b);
  }
  // broadcast from the last rank; send/recv between ranks 0 and 1
  {
    const uint32_t root = n - 1;
    std::vector<float> v(static_cast<size_t>(m), static_cast<float>(r) + 0.25f);
    htr_tensor_t* a = Make(d, m, v);
    Ok(htr_comm_broadcast(stream, comm, a, a, root), "broadcast");
    Ok(htr_stream_synchronize(stream), "sync");
    Expect(Read(a, v.size()), std::vector<float>(v.size(), static_cast<float>(root) + 0.25f), tag + " broadcast");
    if (r == 0) Ok(htr_comm_send(stream, comm, a, 1), "send");
    if (r == 1) {
      htr_tensor_t* got = Make(d, m, {});
      Ok(htr_comm_recv(stream, comm, got, 0), "recv");
      Ok(htr_stream_synchronize(stream), "sync");
      Expect(Read(got, v.size()), std::vector<float>(v.size(), static_cast<float>(root) + 0.25f), tag + " recv");
      htr_tensor_release(got);
    }
    Ok(htr_stream_synchronize(stream), "sync");
    htr_tensor_release(a);
  }
  // Bad arguments are errors, not crashes.
  {
    htr_tensor_t* a = Make(d, m, {});
    htr_tensor_t* b = Make(d, m + 1, {});
    htr_status_t s = htr_comm_all_reduce(stream, comm, a, b, HTR_REDUCE_SUM);
    if (s == nullptr || htr_status_code(s) != HTR_STATUS_INVALID_ARGUMENT) Die(tag + ": mismatched all_reduce accepted");
    htr_status_free(s);
    htr_tensor_release(a);
    htr_tensor_release(b);
  }
  if (r == 0) std::printf("%s: all_reduce (sum, max, avg), reduce_scatter, all_gather, broadcast, send/recv: ok\n", tag.c_str());
}

void Round(htr_runtime_t* rt, const char* device_id, const std::string& tag) {
  htr_device_t* d = nullptr;
  Ok(htr_runtime_find_device(rt, device_id, &d), std::string("device ") + device_id);
  htr_stream_t* stream = nullptr;
  Ok(htr_stream_create(d, &stream), "stream");
  htr_comm_t* comm = nullptr;
  Ok(htr_world_comm_create(g_world, d, &comm), tag + ": world_comm_create");
  if (htr_comm_rank(comm) != htr_world_rank(g_world) || htr_comm_size(comm) != htr_world_size(g_world))
    Die(tag + ": communicator rank/size differ from the world's");
  Collectives(d, stream, comm, tag);
  htr_comm_destroy(comm);
  htr_stream_destroy(stream);
}

}  // namespace

int main() {
  Ok(htr_world_open(&g_world), "world_open");
  const uint32_t n = htr_world_size(g_world), r = htr_world_rank(g_world);
  if (n < 2) Die("run under mpirun with >= 2 ranks (world size is 1)");
  htr_world_t* second = nullptr;
  htr_status_t s2 = htr_world_open(&second);
  if (s2 == nullptr || htr_status_code(s2) != HTR_STATUS_FAILED_PRECONDITION) Die("a second world_open was accepted");
  htr_status_free(s2);
  // World collectives.
  char msg[32] = {0};
  if (r == 0) std::snprintf(msg, sizeof msg, "hello from 0");
  Ok(htr_world_broadcast(g_world, msg, sizeof msg, 0), "world_broadcast");
  if (std::strcmp(msg, "hello from 0") != 0) Die("world_broadcast delivered '" + std::string(msg) + "'");
  double v[2] = {static_cast<double>(r), 1.0};
  Ok(htr_world_all_reduce_f64(g_world, v, 2, HTR_REDUCE_SUM), "world_all_reduce_f64");
  if (v[0] != n * (n - 1) / 2.0 || v[1] != n) Die("world_all_reduce_f64 gave " + std::to_string(v[0]));
  for (int i = 0; i < 3; ++i) Ok(htr_world_barrier(g_world, 30000), "world_barrier");
  if (r == 0) std::printf("world: %u ranks; broadcast, all_reduce_f64, barrier: ok\n", n);

  htr_runtime_t* rt = nullptr;
  Ok(htr_runtime_create(nullptr, &rt), "runtime_create");
  Round(rt, "cpu:0", "cpu plugin (every rank cpu:0)");
  htr_device_t* probe = nullptr;
  htr_status_t ps = htr_runtime_find_device(rt, "null:0", &probe);
  double have_null = ps == nullptr ? 1.0 : 0.0;
  htr_status_free(ps);
  Ok(htr_world_all_reduce_f64(g_world, &have_null, 1, HTR_REDUCE_MIN), "all_reduce_f64");
  if (have_null > 0) {
    Round(rt, r == 1 ? "null:0" : "cpu:0", "runtime staging (rank 1 on null:0, others cpu:0)");
  } else if (r == 0) {
    std::printf("runtime staging: skipped (no null:0 device)\n");
  }
  htr_runtime_destroy(rt);
  htr_world_close(g_world);
  if (r == 0) std::printf("PASS\n");
  return 0;
}
