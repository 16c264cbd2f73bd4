// Liveness is recomputed here from the compiled steps (rather than kept from Compile) so the report
// sees exactly what runs: fused groups, aliases and recomputed clones included.
#include "memory_report.h"

#include <algorithm>
#include <cstdio>

#include "api_util.h"
#include "htr/htr_graph.h"

namespace htr::sched {

namespace {

bool IsGradOp(const std::string& n) {
  return n == "pad_slice" || (n.size() > 5 && n.compare(n.size() - 5, 5, "_grad") == 0);
}

bool StepIsGradOp(const Program& p, const Step& s) {
  if (s.fused >= 0) {
    for (const Step& m : p.fused[static_cast<size_t>(s.fused)].members) {
      if (IsGradOp(m.def->name)) return true;
    }
    return false;
  }
  return IsGradOp(s.def->name);
}

std::string StepName(const Program& p, const Step& s) {
  return s.fused >= 0 ? p.fused[static_cast<size_t>(s.fused)].name : s.def->name;
}

std::string Mb(uint64_t b) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(b) / 1e6);
  return buf;
}

}  // namespace

Status ApplyMemoryPasses(const Graph& in, const MemoryPassOptions& opt, PassedGraph* out, MemoryReport* report) {
  out->result = &in;
  Precision prec = Precision::kF32;
  HTR_OPS_RETURN_IF_ERROR(ParsePrecision(opt.precision, opt.dtype_mask, &prec));
  if (!opt.low_precision_ok) prec = Precision::kF32;
  report->precision = PrecisionName(prec);
  report->precision_stats.precision = prec;
  if (prec != Precision::kF32) {
    const bool native = opt.device == nullptr ||
                        ProbeLowpMatmul(opt.device, prec == Precision::kBF16 ? HTR_DTYPE_BF16 : HTR_DTYPE_F16);
    HTR_OPS_RETURN_IF_ERROR(ApplyPrecision(*out->result, prec, native, &out->precision, &report->precision_stats));
    out->result = &out->precision;
  }
  report->recompute = opt.recompute;
  if (opt.recompute) {
    HTR_OPS_RETURN_IF_ERROR(ApplyRecompute(*out->result, opt.memory_budget, &out->recompute, &report->recompute_stats));
    out->result = &out->recompute;
  }
  return Status::Ok();
}

namespace {

bool InPlaceSafe(const std::string& n) {
  static const char* const kOps[] = {"add", "sub", "mul", "div", "maximum", "minimum", "add_scalar", "mul_scalar",
                                     "pow_scalar", "clamp", "neg", "exp", "log", "tanh", "sqrt", "rsqrt", "abs",
                                     "sigmoid", "relu", "gelu", "unary_grad"};
  for (const char* k : kOps) {
    if (n == k) return true;
  }
  return false;
}

}  // namespace

uint32_t ApplyInPlace(Program* p) {
  const size_t nv = p->values.size(), ns = p->steps.size();
  const uint32_t end = static_cast<uint32_t>(ns);
  std::vector<ValueId> root(nv);
  for (ValueId v = 0; v < nv; ++v) root[v] = v;
  auto find = [&](ValueId v) {
    while (root[v] != v) v = root[v];
    return v;
  };
  std::vector<uint32_t> first(nv, 0), last(nv, 0);
  std::vector<bool> produced(nv, false), pinned(nv, false);
  for (uint32_t i = 0; i < ns; ++i) {
    for (ValueId v : p->steps[i].outputs) {
      first[v] = last[v] = i;
      produced[v] = true;
    }
    for (ValueId v : p->steps[i].inputs) last[v] = std::max(last[v], i);
  }
  for (const Port& o : p->outputs) last[o.value] = end, pinned[o.value] = true;
  for (const Port& s : p->states) {
    if (s.assigned != kNoValue) last[s.assigned] = end, pinned[s.assigned] = true;
  }
  for (const Step& s : p->steps) {
    if (s.alias) root[s.outputs[0]] = s.inputs[0];
  }
  // Root lifetimes: the latest read of any member.
  std::vector<uint32_t> root_last(nv, 0);
  for (ValueId v = 0; v < nv; ++v) {
    if (p->slots[v].kind == SlotKind::kArena) root_last[find(v)] = std::max(root_last[find(v)], last[v]);
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < ns; ++i) {
    Step& s = p->steps[i];
    // A fused group of one elementwise op is a generated kernel that loads each tile before storing
    // it at the same indices: as safe in place as the reference loop.
    const bool single_fused = s.fused >= 0 && p->fused[static_cast<size_t>(s.fused)].members.size() == 1 &&
                              InPlaceSafe(p->fused[static_cast<size_t>(s.fused)].members[0].def->name);
    if (s.alias || (s.fused >= 0 && !single_fused) || s.outputs.size() != 1 || !InPlaceSafe(s.def->name)) continue;
    const ValueId out = s.outputs[0];
    if (p->slots[out].kind != SlotKind::kArena || find(out) != out) continue;
    const ValueInfo& oi = p->values[out].info;
    for (ValueId in : s.inputs) {
      if (p->slots[in].kind != SlotKind::kArena) continue;
      const ValueId r = find(in);
      const ValueInfo& ii = p->values[in].info;
      bool pinned_member = false;
      for (ValueId v = 0; v < nv && !pinned_member; ++v) pinned_member = pinned[v] && find(v) == r;
      if (ii.dtype != oi.dtype || ii.shape != oi.shape || root_last[r] != i || pinned_member) continue;
      root[out] = r;
      root_last[r] = std::max(root_last[r], root_last[out]);
      ++n;
      break;
    }
  }
  if (n == 0) return 0;
  // Plan again over the roots.
  std::vector<BufferLife> lives;
  std::vector<ValueId> roots;
  for (ValueId v = 0; v < nv; ++v) {
    if (p->slots[v].kind != SlotKind::kArena || !produced[v] || find(v) != v) continue;
    lives.push_back(BufferLife{p->slots[v].bytes, first[v], std::max(root_last[v], first[v])});
    roots.push_back(v);
  }
  const uint64_t naive = p->plan.naive_bytes;
  p->plan = PlanMemory(lives, Program::kAlignment, true);
  p->plan.naive_bytes = naive;  // still "every intermediate in its own buffer"
  std::vector<uint64_t> offset(nv, 0);
  for (size_t k = 0; k < roots.size(); ++k) offset[roots[k]] = p->plan.offsets[k];
  for (ValueId v = 0; v < nv; ++v) {
    if (p->slots[v].kind == SlotKind::kArena && produced[v]) p->slots[v].offset = offset[find(v)];
  }
  p->num_materialized = static_cast<uint32_t>(roots.size());
  return n;
}

void BuildMemoryReport(const Program& p, const std::vector<std::string>& impl, MemoryReport* r) {
  const size_t nv = p.values.size(), ns = p.steps.size();
  const uint32_t end = static_cast<uint32_t>(ns);
  // Step classes.
  std::vector<bool> back_value(nv, false), back(ns, false);
  std::vector<int64_t> producer(nv, -1);
  for (size_t i = 0; i < ns; ++i) {
    const Step& s = p.steps[i];
    bool b = StepIsGradOp(p, s);
    for (ValueId v : s.inputs) b = b || back_value[v];
    back[i] = b;
    for (ValueId v : s.outputs) {
      back_value[v] = b;
      producer[v] = static_cast<int64_t>(i);
    }
  }
  // States.
  enum Cat { kWeights, kGradients, kOptimizer, kActivations, kWorkspace, kNumCats };
  static const char* const kCatNames[] = {"weights", "gradients", "optimizer", "activations", "workspace"};
  std::vector<int> state_cat(p.states.size(), kWeights);
  std::vector<ops::Shape> weight_shapes;
  for (size_t i = 0; i < p.states.size(); ++i) {
    if (p.states[i].assigned != kNoValue) state_cat[i] = kGradients;  // until an optimizer claims it
  }
  for (const Step& s : p.steps) {
    const std::string& n = s.def->name;
    if (s.fused >= 0 || (n != "adamw_update" && n != "sgd_momentum_update")) continue;
    auto mark = [&](size_t k, int cat) {
      if (k >= s.inputs.size()) return;
      const ValueId v = s.inputs[k];
      if (p.values[v].kind != ValueKind::kState) return;
      state_cat[p.values[v].port] = cat;
      if (cat == kWeights) weight_shapes.push_back(p.values[v].info.shape);
    };
    mark(0, kWeights);
    mark(2, n == "adamw_update" ? kOptimizer : kOptimizer);
    if (n == "adamw_update") mark(3, kOptimizer);
  }
  std::vector<MemoryTensor> all;
  uint64_t cat_state[kNumCats] = {0, 0, 0, 0, 0};
  r->state_bytes = 0;
  for (size_t i = 0; i < p.states.size(); ++i) {
    const Value& v = p.values[p.states[i].value];
    const uint64_t b = p.slots[p.states[i].value].bytes;
    r->state_bytes += b;
    cat_state[state_cat[i]] += b;
    all.push_back(MemoryTensor{p.states[i].name, kCatNames[state_cat[i]], b, v.info.dtype, v.info.shape, 0, end});
  }
  // Arena values: roots (aliases fold into their input), lifetimes, categories.
  std::vector<ValueId> root(nv);
  for (ValueId v = 0; v < nv; ++v) root[v] = v;
  for (const Step& s : p.steps) {
    if (s.alias && !s.inputs.empty() && !s.outputs.empty()) root[s.outputs[0]] = root[s.inputs[0]];
  }
  std::vector<uint32_t> first(nv, 0), last(nv, 0);
  std::vector<bool> arena(nv, false);
  for (uint32_t i = 0; i < ns; ++i) {
    for (ValueId v : p.steps[i].outputs) {
      if (p.slots[v].kind != SlotKind::kArena) continue;
      const ValueId rt = root[v];
      if (rt == v) {
        arena[v] = true;
        first[v] = last[v] = i;
      }
    }
    for (ValueId v : p.steps[i].inputs) {
      if (p.slots[v].kind == SlotKind::kArena) last[root[v]] = std::max(last[root[v]], i);
    }
  }
  for (const Port& o : p.outputs) {
    if (p.slots[o.value].kind == SlotKind::kArena) last[root[o.value]] = end;
  }
  for (const Port& s : p.states) {
    if (s.assigned != kNoValue && p.slots[s.assigned].kind == SlotKind::kArena) last[root[s.assigned]] = end;
  }
  std::vector<int> cat(nv, kWorkspace);
  std::vector<std::vector<int64_t>> delta(kNumCats, std::vector<int64_t>(ns + 2, 0));
  for (ValueId v = 0; v < nv; ++v) {
    if (!arena[v] || producer[v] < 0) continue;
    const size_t step = static_cast<size_t>(producer[v]);
    if (!back[step]) {
      cat[v] = kActivations;
    } else if (std::find(weight_shapes.begin(), weight_shapes.end(), p.values[v].info.shape) != weight_shapes.end()) {
      cat[v] = kGradients;
    }
    const uint64_t b = p.slots[v].bytes;
    delta[static_cast<size_t>(cat[v])][first[v]] += static_cast<int64_t>(b);
    delta[static_cast<size_t>(cat[v])][std::min<size_t>(last[v], ns) + 1] -= static_cast<int64_t>(b);
    const Step& s = p.steps[step];
    std::string name = StepName(p, s) + "@" + std::to_string(step);
    for (size_t k = 1; k < s.outputs.size(); ++k) {
      if (s.outputs[k] == v) name += ":" + std::to_string(k);
    }
    all.push_back(MemoryTensor{name, kCatNames[cat[v]], b, p.values[v].info.dtype, p.values[v].info.shape, first[v], last[v]});
  }
  // Peak over steps.
  int64_t run[kNumCats] = {0, 0, 0, 0, 0};
  uint64_t best = 0;
  uint64_t at_best[kNumCats] = {0, 0, 0, 0, 0};
  r->peak_activation_bytes = 0;
  r->peak_step = 0;
  for (size_t i = 0; i <= ns; ++i) {
    uint64_t live = 0;
    for (int c = 0; c < kNumCats; ++c) {
      run[c] += delta[static_cast<size_t>(c)][i];
      live += static_cast<uint64_t>(run[c]);
    }
    r->peak_activation_bytes = std::max(r->peak_activation_bytes, static_cast<uint64_t>(run[kActivations]));
    if (live > best || i == 0) {
      best = live;
      r->peak_step = static_cast<uint32_t>(std::min(i, ns > 0 ? ns - 1 : 0));
      for (int c = 0; c < kNumCats; ++c) at_best[c] = static_cast<uint64_t>(run[c]);
    }
  }
  if (r->peak_step < ns) r->peak_op = StepName(p, p.steps[r->peak_step]);
  r->weights_bytes = cat_state[kWeights] + at_best[kWeights];
  r->gradients_bytes = cat_state[kGradients] + at_best[kGradients];
  r->optimizer_bytes = cat_state[kOptimizer] + at_best[kOptimizer];
  r->activations_bytes = cat_state[kActivations] + at_best[kActivations];
  r->workspace_bytes = cat_state[kWorkspace] + at_best[kWorkspace];
  r->peak_live_bytes = r->state_bytes + best;
  r->planned_peak_bytes = r->state_bytes + p.plan.peak_bytes;
  r->naive_peak_bytes = r->state_bytes + p.plan.naive_bytes;
  // Low-precision matmuls left on the reference kernel.
  r->precision_stats.fallback_ops = r->precision_stats.f32_matmuls;
  for (size_t i = 0; i < ns && i < impl.size(); ++i) {
    const Step& s = p.steps[i];
    if (s.fused >= 0 || s.def->name != "matmul" || s.args.in.empty()) continue;
    const htr_dtype_t d = s.args.in[0].dtype;  // lowp operands (a lowp or an f32 result)
    // "reference", or "reference:staged" (device mode off the host)
    if ((d == HTR_DTYPE_BF16 || d == HTR_DTYPE_F16) && impl[i].rfind("reference", 0) == 0) ++r->precision_stats.fallback_ops;
  }
  std::stable_sort(all.begin(), all.end(), [](const MemoryTensor& a, const MemoryTensor& b) { return a.bytes > b.bytes; });
  if (all.size() > MemoryReport::kLargest) all.resize(MemoryReport::kLargest);
  r->largest = std::move(all);
}

std::string FormatMemoryReport(const MemoryReport& r) {
  std::string s;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                "memory report (precision %s%s)\n"
                "  planned peak   %s (states + arena with buffer reuse)\n"
                "  naive peak     %s (no reuse; planned/naive %.3f)\n"
                "  at the peak (step %u, %s; %s live):\n"
                "    weights          %s\n    gradients        %s\n    optimizer state  %s\n"
                "    activations      %s\n    workspace        %s\n"
                "  peak activation memory %s\n",
                r.precision.c_str(), r.recompute ? ", recompute" : "", Mb(r.planned_peak_bytes).c_str(),
                Mb(r.naive_peak_bytes).c_str(),
                r.naive_peak_bytes ? static_cast<double>(r.planned_peak_bytes) / static_cast<double>(r.naive_peak_bytes) : 0.0,
                r.peak_step, r.peak_op.c_str(), Mb(r.peak_live_bytes).c_str(), Mb(r.weights_bytes).c_str(), Mb(r.gradients_bytes).c_str(),
                Mb(r.optimizer_bytes).c_str(), Mb(r.activations_bytes).c_str(), Mb(r.workspace_bytes).c_str(),
                Mb(r.peak_activation_bytes).c_str());
  s += buf;
  if (r.precision != "fp32") {
    std::snprintf(buf, sizeof(buf),
                  "  low precision: %u matmuls (%u as f32 library matmuls on rounded operands, %u on the reference "
                  "kernel), %u values stored in %s, %u casts%s\n",
                  r.precision_stats.lowp_matmuls, r.precision_stats.f32_matmuls,
                  r.precision_stats.fallback_ops - r.precision_stats.f32_matmuls, r.precision_stats.lowp_values,
                  r.precision.c_str(), r.precision_stats.casts,
                  r.precision_stats.shared_state_casts ? " (one per weight and step)" : "");
    s += buf;
  }
  if (r.recompute) {
    std::snprintf(buf, sizeof(buf), "  recompute: %u of %u segments, %u ops recomputed; saved activations %s -> %s (estimate)\n",
                  r.recompute_stats.recomputed, r.recompute_stats.segments, r.recompute_stats.cloned_ops,
                  Mb(r.recompute_stats.saved_bytes).c_str(), Mb(r.recompute_stats.kept_bytes).c_str());
    s += buf;
  }
  s += "  largest tensors:\n";
  for (const MemoryTensor& t : r.largest) {
    std::snprintf(buf, sizeof(buf), "    %-36s %-11s %-5s %-18s %10s  steps %u-%u\n", t.name.c_str(), t.category.c_str(),
                  ops::DtypeName(t.dtype), ops::ShapeStr(t.shape).c_str(), Mb(t.bytes).c_str(), t.first_step, t.last_step);
    s += buf;
  }
  return s;
}

}  // namespace htr::sched

// ------------------------------------------------------------------------------- C API

namespace {

htr_status_t ReportArg(const char* fn, const char* what) {
  return htr_status_new(HTR_STATUS_INVALID_ARGUMENT, (std::string(fn) + ": " + what).c_str());
}

}  // namespace

extern "C" {

HTR_API htr_status_t htr_executable_memory_report(const htr_executable_t* e, htr_memory_report_t* out) {
  if (!e) return ReportArg("htr_executable_memory_report", "executable is NULL");
  if (!out) return ReportArg("htr_executable_memory_report", "out_report is NULL");
  if (!HTR_STRUCT_HAS_FIELD(out, htr_memory_report_t, precision))
    return ReportArg("htr_executable_memory_report", "struct_size too small");
  const htr::sched::MemoryReport& r = *htr::sched::ExecutableMemoryReport(e);
  out->planned_peak_bytes = r.planned_peak_bytes;
  out->naive_peak_bytes = r.naive_peak_bytes;
  out->state_bytes = r.state_bytes;
  out->weights_bytes = r.weights_bytes;
  out->gradients_bytes = r.gradients_bytes;
  out->optimizer_bytes = r.optimizer_bytes;
  out->activations_bytes = r.activations_bytes;
  out->workspace_bytes = r.workspace_bytes;
  out->peak_live_bytes = r.peak_live_bytes;
  out->peak_activation_bytes = r.peak_activation_bytes;
  out->peak_step = r.peak_step;
  out->num_low_precision_matmuls = r.precision_stats.lowp_matmuls;
  out->num_fallback_ops = r.precision_stats.fallback_ops;
  out->num_segments = r.recompute_stats.segments;
  out->num_recomputed_segments = r.recompute_stats.recomputed;
  out->precision = r.precision.c_str();
  return nullptr;
}

HTR_API uint32_t htr_executable_memory_tensor_count(const htr_executable_t* e) {
  return e ? static_cast<uint32_t>(htr::sched::ExecutableMemoryReport(e)->largest.size()) : 0;
}

HTR_API htr_status_t htr_executable_memory_tensor(const htr_executable_t* e, uint32_t index,
                                                  htr_memory_tensor_info_t* out) {
  if (!e) return ReportArg("htr_executable_memory_tensor", "executable is NULL");
  if (!out) return ReportArg("htr_executable_memory_tensor", "out_info is NULL");
  if (!HTR_STRUCT_HAS_FIELD(out, htr_memory_tensor_info_t, last_step))
    return ReportArg("htr_executable_memory_tensor", "struct_size too small");
  const auto& l = htr::sched::ExecutableMemoryReport(e)->largest;
  if (index >= l.size())
    return htr_status_new(HTR_STATUS_OUT_OF_RANGE, "htr_executable_memory_tensor: index out of range");
  const htr::sched::MemoryTensor& t = l[index];
  out->name = t.name.c_str();
  out->category = t.category.c_str();
  out->bytes = t.bytes;
  out->dtype = t.dtype;
  out->rank = static_cast<uint32_t>(t.shape.size());
  for (size_t i = 0; i < HTR_MAX_RANK; ++i) out->shape[i] = i < t.shape.size() ? t.shape[i] : 0;
  out->first_step = t.first_step;
  out->last_step = t.last_step;
  return nullptr;
}

HTR_API htr_status_t htr_executable_memory_report_text(const htr_executable_t* e, char* buffer, size_t capacity,
                                                       size_t* out_length) {
  if (!e) return ReportArg("htr_executable_memory_report_text", "executable is NULL");
  HTR_SCHED_API_BEGIN
  const std::string s = htr::sched::FormatMemoryReport(*htr::sched::ExecutableMemoryReport(e));
  if (out_length) *out_length = s.size();
  if (buffer && capacity > 0) {
    const size_t n = std::min(capacity - 1, s.size());
    std::copy(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(n), buffer);
    buffer[n] = '\0';
  }
  return nullptr;
  HTR_SCHED_API_END
}

}  // extern "C"
