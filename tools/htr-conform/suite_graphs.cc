// suite_graphs.cc — the graph capture/replay entries of plugin ABI 1.2
// (htr_plugin.h): all four or none (matching HTR_CAP_GRAPHS); a capture of a
// device-to-device copy and a fill replayed several times, each replay
// reading what the source holds at that time (so replay really runs the
// work, not a recording of the data); capture_end without begin gives
// FAILED_PRECONDITION. Plugins without graphs SKIP with the reason.
#include <cstring>
#include <string>
#include <vector>

#include "fixture.h"
#include "registry.h"
#include "status_util.h"

namespace conform {
namespace {

void RunGraphs(Context& ctx) {
  const htr_plugin_api_t* api = ctx.api();
  const bool has_fields = HTR_STRUCT_HAS_FIELD(api, htr_plugin_api_t, graph_destroy);
  int set = 0;
  if (has_fields) {
    set = (api->graph_capture_begin != nullptr) + (api->graph_capture_end != nullptr) +
          (api->graph_launch != nullptr) + (api->graph_destroy != nullptr);
  }
  ctx.Run("entries", [&]() -> Outcome {
    CONFORM_REQUIRE(set == 0 || set == 4, std::to_string(set) + " of the 4 graph entries are set (all or none)");
    if (ctx.has_device() && set == 0 && (ctx.props().capabilities & HTR_CAP_GRAPHS))
      return Outcome::Fail("HTR_CAP_GRAPHS advertised without graph entries");
    return Outcome::Pass(set ? "all 4 set" : "none (no graphs)");
  });
  std::string skip;
  if (set != 4) skip = "plugin has no graph entries (plugin ABI 1.2, optional)";
  else if (!ctx.has_device()) skip = ctx.no_device_reason();
  else if (!(ctx.props().capabilities & HTR_CAP_GRAPHS)) skip = "device does not advertise HTR_CAP_GRAPHS";
  if (!skip.empty()) {
    ctx.Record("capture_replay", Outcome::Skip(skip));
    ctx.Record("end_without_begin", Outcome::Skip(skip));
    return;
  }
  ctx.Run("capture_replay", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    const uint64_t n = 1 << 20;
    BufferHandle a(api), b(api), c(api);
    CONFORM_OK(a.Alloc(fx.dev.get(), n));
    CONFORM_OK(b.Alloc(fx.dev.get(), n));
    CONFORM_OK(c.Alloc(fx.dev.get(), n));
    CONFORM_OK(api->graph_capture_begin(fx.stream.get()));
    htr_status_t s1 = api->copy_device_to_device(fx.stream.get(), a.get(), 0, b.get(), 0, n);
    htr_status_t s2 = api->fill(fx.stream.get(), c.get(), 0, n, 0x5a);
    htr_plugin_graph_t* g = nullptr;
    uint64_t nodes = 0;
    htr_status_t s3 = api->graph_capture_end(fx.stream.get(), &g, &nodes);
    CONFORM_OK(s1);
    CONFORM_OK(s2);
    CONFORM_OK(s3);
    CONFORM_REQUIRE(g != nullptr, "graph_capture_end returned OK but no graph");
    std::string err;
    for (uint32_t round = 0; round < 3 && err.empty(); ++round) {
      const auto src = Pattern(n, 77 + round);
      err = fx.Upload(a.get(), 0, src);
      if (!err.empty()) break;
      if (htr_status_t s = api->graph_launch(fx.stream.get(), g)) {
        err = "graph_launch -> " + TakeDescription(s);
        break;
      }
      std::vector<uint8_t> got(n), filled(n);
      err = fx.Download(b.get(), 0, &got);
      if (err.empty()) err = CompareBytes(got.data(), src.data(), n);
      if (err.empty()) err = fx.Download(c.get(), 0, &filled);
      if (err.empty()) {
        std::vector<uint8_t> want(n, 0x5a);
        err = CompareBytes(filled.data(), want.data(), n);
      }
      if (!err.empty()) err = "round " + std::to_string(round) + ": " + err;
    }
    api->graph_destroy(g);
    if (!err.empty()) return Outcome::Fail(err);
    return Outcome::Pass("3 replays, " + std::to_string(nodes) + " node(s)");
  });
  ctx.Run("end_without_begin", [&]() -> Outcome {
    Fixture fx(ctx);
    CONFORM_SETUP(fx);
    htr_plugin_graph_t* g = nullptr;
    CONFORM_EXPECT_CODE(api->graph_capture_end(fx.stream.get(), &g, nullptr), HTR_STATUS_FAILED_PRECONDITION);
    CONFORM_REQUIRE(g == nullptr, "a graph came back from a failed capture_end");
    return Outcome::Pass();
  });
}

}  // namespace

HTR_CONFORM_SUITE(graphs, 90, "graph capture and replay (ABI 1.2)", RunGraphs);

}  // namespace conform
