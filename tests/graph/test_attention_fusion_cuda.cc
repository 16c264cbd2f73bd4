// The attention rewrite's launches (scheduler/attention_fusion.h) for a bf16 GPT-2 attention block
// through the CUDA lowering, no GPU needed: the block on [B*T, C] activations (qkv projection,
// slices, heads split and merged, the qkv gradient's concat; samples/htr-train/model.cc) goes
// through the mixed-precision pass (bf16, native matmuls) and the fusion pass; the plan has no
// transpose, slice or concat left, the fused kernels bind q, k, v as column blocks of the qkv
// projection (element offsets 0, C, 2C), and every launch of the two fused steps, rendered with
// its specializations as the cuda plugin renders it, takes the tensor-core warp-row lowering
// (htr_sdk_render_cuda_attn.cc, "block-attn") and compiles with NVRTC for sm_90 (skipped without
// libnvrtc). Set HTR_CUDA_TEST_DUMP to a folder to keep the rendered sources.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "htr_sdk_ir.h"
#include "htr_sdk_render_cuda.h"
#include "nvrtc_check.h"
#include "scheduler/autodiff.h"
#include "scheduler/fusion.h"
#include "scheduler/graph.h"
#include "scheduler/host_engine.h"
#include "scheduler/precision.h"
#include "skip.h"

namespace {

namespace ir = htr_sdk::ir;
using htr::ops::Attrs;
using htr::sched::FusedArg;
using htr::sched::Graph;
using htr::sched::ValueId;

#define CUDA_REQUIRE_OK(expr)     \
  do {                            \
    ::htr::ops::Status st_ = (expr); \
    INFO(st_.message);            \
    REQUIRE(st_.ok());            \
  } while (0)

ValueId Op(Graph& g, const std::string& op, const std::vector<ValueId>& in, const Attrs& at = Attrs()) {
  std::vector<ValueId> out;
  const htr::ops::Status st = g.AddOp(op, in, at, &out);
  INFO(op << ": " << st.message);
  REQUIRE(st.ok());
  return out[0];
}

// f32 GPT-2 attention block with its backward (the precision pass makes it bf16).
void Block(Graph* g, int64_t B, int64_t H, int64_t T, int64_t D) {
  const int64_t C = H * D;
  ValueId x, wqkv, wp, w;
  CUDA_REQUIRE_OK(g->AddInput("x", HTR_DTYPE_F32, {B * T, C}, &x));
  CUDA_REQUIRE_OK(g->AddState("wqkv", HTR_DTYPE_F32, {C, 3 * C}, &wqkv));
  CUDA_REQUIRE_OK(g->AddState("wp", HTR_DTYPE_F32, {C, C}, &wp));
  CUDA_REQUIRE_OK(g->AddState("w", HTR_DTYPE_F32, {B * T, C}, &w));
  const ValueId qkv = Op(*g, "matmul", {x, wqkv});
  auto heads = [&](int64_t part) {
    const ValueId s = Op(*g, "slice", {qkv}, Attrs().Int("axis", 1).Int("start", part * C).Int("end", (part + 1) * C));
    return Op(*g, "transpose", {Op(*g, "reshape", {s}, Attrs().Ints("shape", {B, T, H, D}))},
              Attrs().Ints("perm", {0, 2, 1, 3}));
  };
  ValueId y = Op(*g, "scaled_dot_product_attention", {heads(0), heads(1), heads(2)}, Attrs().Int("causal", 1));
  y = Op(*g, "reshape", {Op(*g, "transpose", {y}, Attrs().Ints("perm", {0, 2, 1, 3}))}, Attrs().Ints("shape", {B * T, C}));
  const ValueId loss = Op(*g, "sum", {Op(*g, "mul", {Op(*g, "matmul", {y, wp}), w})});
  CUDA_REQUIRE_OK(g->AddOutput("loss", loss));
  std::vector<ValueId> grads;
  CUDA_REQUIRE_OK(htr::sched::Gradients(g, loss, {x, wqkv, wp}, &grads));
  CUDA_REQUIRE_OK(g->AddOutput("dx", grads[0]));
  CUDA_REQUIRE_OK(g->AddOutput("dwqkv", grads[1]));
  CUDA_REQUIRE_OK(g->AddOutput("dwp", grads[2]));
}

// Reads and verifies launch `l`'s kernel and renders it as the cuda plugin does: its specialized
// args baked in (cuda_kernel.cc check_spec: argument index = launch position), 227 KiB of shared
// memory, rows of 256 threads.
void RenderLaunch(const htr::sched::FusedLaunch& l, ir::Kernel* kern, ir::Rendered* r, ir::CudaLaunch* launch) {
  ir::Analysis an;
  REQUIRE(ir::read(l.ir.data(), l.ir.size(), kern).ok());
  REQUIRE(ir::verify(*kern, &an).ok());
  REQUIRE(kern->args.size() == l.args.size());
  std::vector<ir::Specialization> spec(kern->args.size());
  for (size_t i = 0; i < l.args.size(); ++i) {
    const FusedArg& a = l.args[i];
    if (!a.specialize || a.kind != FusedArg::Kind::kInt) continue;
    spec[i].set = true;
    spec[i].i = a.i;
  }
  ir::CudaTarget target;
  target.smem_bytes = 227 * 1024;
  target.row_threads = 256;
  REQUIRE(ir::render_cuda(*kern, an, spec, target, r, launch).ok());
}

}  // namespace

TEST_CASE("bf16 GPT-2 block: the attention launches bind the qkv layout and take the CUDA tensor-core lowering",
          "[graph][attention][cuda]") {
  const int64_t B = 2, H = 2, T = 128, D = 64, C = H * D;
  Graph f32;
  Block(&f32, B, H, T, D);
  Graph g;
  htr::sched::PrecisionStats ps;
  CUDA_REQUIRE_OK(htr::sched::ApplyPrecision(f32, htr::sched::Precision::kBF16, true, &g, &ps));
  htr::sched::Fuser fuser;
  std::unique_ptr<htr::sched::HostEngine> e;
  CUDA_REQUIRE_OK(htr::sched::HostEngine::Create(g, true, 1, &e, &fuser));
  const htr::sched::Program& p = e->program();
  std::string plan;
  for (const auto& s : p.steps) plan += (s.fused >= 0 ? "fused:" + p.fused[static_cast<size_t>(s.fused)].name : s.def->name) + "\n";
  INFO(plan);
  for (const auto& s : p.steps) {
    if (s.fused >= 0) continue;
    CHECK(s.def->name != "transpose");
    CHECK(s.def->name != "slice");
    CHECK(s.def->name != "concat");
  }
  std::vector<const htr::sched::FusedGroup*> groups;
  for (const auto& grp : p.fused) {
    if (grp.name == "attention" || grp.name == "attention_grad") groups.push_back(&grp);
  }
  REQUIRE(groups.size() == 2);
  const auto& fwd = groups[0]->members[0];
  REQUIRE(fwd.inputs.size() == 3);
  CHECK(p.values[fwd.inputs[1]].info.shape == htr::ops::Shape{B * T, 3 * C});
  CHECK(p.values[fwd.inputs[1]].info.dtype == HTR_DTYPE_BF16);
  CHECK(fwd.attrs.GetInts("view_v") == std::vector<int64_t>{2, 2 * C, T * 3 * C, D, 3 * C, 1});
  CHECK(groups[1]->launches.size() == 2);  // bf16: the dQ and the dK/dV kernels

  const htr_test_cuda::Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  for (const auto* grp : groups) {
    for (const auto& l : grp->launches) {
      ir::Kernel kern;
      ir::Rendered r;
      ir::CudaLaunch launch;
      RenderLaunch(l, &kern, &r, &launch);
      INFO(kern.name << ": " << launch.lowering);
      CHECK(launch.lowering.rfind("block-attn", 0) == 0);
      bool offsets = false;  // the kernels with element offsets (AttentionConfig::offsets)
      for (const ir::Arg& a : kern.args) offsets = offsets || a.name == "offset_k";
      CHECK(offsets);
      htr_test_cuda::DumpSource("layout_" + kern.name + ".cu", r.source);
      std::string text;
      const int rc = nv.compile(r.source, &text);
      INFO(text);
      CHECK(rc == 0);
    }
  }
}

TEST_CASE("bf16 GPT-2 block, one-pass backward: prep, dkdvq (tensor cores, atomic dQ) and dq_finish launches",
          "[graph][attention][cuda]") {
  const int64_t B = 2, H = 2, T = 128, D = 64;
  Graph f32;
  Block(&f32, B, H, T, D);
  Graph g;
  htr::sched::PrecisionStats ps;
  CUDA_REQUIRE_OK(htr::sched::ApplyPrecision(f32, htr::sched::Precision::kBF16, true, &g, &ps));
  // The device mode with the one-pass backward offered first (the cuda plugin's default).
  htr::sched::Fuser fuser(nullptr, /*device_mode=*/true, /*tile_rows=*/false, /*one_pass_attention=*/true);
  std::unique_ptr<htr::sched::HostEngine> e;
  CUDA_REQUIRE_OK(htr::sched::HostEngine::Create(g, true, 1, &e, &fuser));
  const htr::sched::Program& p = e->program();
  const htr::sched::FusedGroup* grad = nullptr;
  for (const auto& grp : p.fused)
    if (grp.name == "attention_grad") grad = &grp;
  REQUIRE(grad != nullptr);
  REQUIRE(grad->launches.size() == 3);
  REQUIRE(grad->scratch_bytes.size() == 2);
  CHECK(grad->scratch_bytes[1] == static_cast<uint64_t>(B * H * T * D) * 4);  // the f32 dQ accumulator
  const htr_test_cuda::Nvrtc nv;
  if (!nv.ok()) {
    HTR_CUDA_TEST_SKIP("libnvrtc not found");
    return;
  }
  const char* const names[3] = {"attention_backward_prep", "attention_backward_dkdvq", "attention_backward_dq_finish"};
  for (size_t li = 0; li < 3; ++li) {
    ir::Kernel kern;
    ir::Rendered r;
    ir::CudaLaunch launch;
    RenderLaunch(grad->launches[li], &kern, &r, &launch);
    CHECK(kern.name == names[li]);
    INFO(kern.name << ": " << launch.lowering);
    CHECK(launch.lowering.rfind(li == 1 ? "block-attn" : "row", 0) == 0);
    htr_test_cuda::DumpSource("layout_" + kern.name + ".cu", r.source);
    std::string text;
    const int rc = nv.compile(r.source, &text);
    INFO(text);
    CHECK(rc == 0);
  }
}
