// Many threads allocating, copying, viewing and freeing at once.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

#include "test_util.h"

TEST_CASE("concurrent alloc/free/copy across devices and plugins", "[stress]") {
  htr::Runtime rt = tu::MakeRuntime({tu::RtestPath(), tu::Rtest2Path()});
  REQUIRE(rt);
  std::vector<htr::Device> devs = rt.devices();
  REQUIRE(devs.size() == 4);
  std::atomic<int> failures{0};
  const int kThreads = 8, kIters = 150;
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937 rng(static_cast<unsigned>(w) * 7919u + 1u);
      auto stream = devs[static_cast<size_t>(w) % devs.size()].create_stream();
      if (!stream.ok()) {
        ++failures;
        return;
      }
      for (int it = 0; it < kIters; ++it) {
        htr::Device a = devs[rng() % devs.size()];
        htr::Device b = devs[rng() % devs.size()];
        const int64_t rows = 1 + static_cast<int64_t>(rng() % 64);
        const int64_t cols = 1 + static_cast<int64_t>(rng() % 300);
        auto x = htr::Tensor::Create(a, HTR_DTYPE_F32, {rows, cols});
        auto y = htr::Tensor::Create(b, HTR_DTYPE_F32, {cols, rows});
        if (!x.ok() || !y.ok()) {
          ++failures;
          continue;
        }
        std::vector<float> data = tu::Iota(static_cast<size_t>(rows * cols), static_cast<float>(it));
        bool ok = x->copy_from(data).ok();
        auto yt = y->view({rows, cols}, {1, rows});  // transposed view of y
        ok = ok && yt.ok() && yt->copy_from(*x).ok();
        auto back = yt.ok() ? yt->to_vector<float>() : htr::StatusOr<std::vector<float>>(htr::Status(HTR_STATUS_INTERNAL, "no view"));
        ok = ok && back.ok() && *back == data;
        // Async on the thread's own stream when it matches x's device.
        if (ok && stream->device() == a) {
          std::vector<float> out(data.size());
          ok = x->copy_to_host(out.data(), out.size() * 4, &*stream).ok() &&
               stream->synchronize().ok() && out == data;
        }
        if (!ok) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures.load() == 0);
  for (htr::Device d : devs) {
    auto s = d.pool_stats();
    REQUIRE(s.ok());
    CHECK(s->bytes_in_use == 0);
    CHECK(s->num_allocs == s->num_frees);
    CHECK(s->bytes_reserved == s->bytes_cached);
  }
}
