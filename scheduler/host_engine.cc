#include "host_engine.h"

#include <cstring>

namespace htr::sched {

Status HostEngine::Create(const Graph& graph, bool reuse, uint32_t threads, std::unique_ptr<HostEngine>* out,
                          StepRewriter* rewriter) {
  std::unique_ptr<HostEngine> e(new HostEngine());
  HTR_OPS_RETURN_IF_ERROR(Compile(graph, reuse, threads, &e->program_, rewriter));
  const Program& p = e->program_;
  for (const Port& in : p.inputs) e->inputs_.emplace_back(p.slots[in.value].bytes, 0);
  for (const Port& st : p.states) e->states_.emplace_back(p.slots[st.value].bytes, 0);
  e->outputs_.resize(p.outputs.size());
  e->arena_.assign(p.plan.peak_bytes + Program::kAlignment, 0);
  *out = std::move(e);
  return Status::Ok();
}

static int FindPort(const std::vector<Port>& ports, const std::string& name) {
  for (size_t i = 0; i < ports.size(); ++i) {
    if (ports[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

Status HostEngine::SetInput(const std::string& name, const void* data, size_t bytes) {
  int i = FindPort(program_.inputs, name);
  if (i < 0) return ops::Error(HTR_STATUS_NOT_FOUND, "no input named '" + name + "'");
  auto& buf = inputs_[static_cast<size_t>(i)];
  if (bytes != buf.size())
    return ops::Invalid("input '" + name + "': " + std::to_string(bytes) + " bytes given, " +
                        std::to_string(buf.size()) + " expected");
  if (bytes) std::memcpy(buf.data(), data, bytes);
  return Status::Ok();
}

Status HostEngine::SetState(const std::string& name, const void* data, size_t bytes) {
  int i = FindPort(program_.states, name);
  if (i < 0) return ops::Error(HTR_STATUS_NOT_FOUND, "no state named '" + name + "'");
  auto& buf = states_[static_cast<size_t>(i)];
  if (bytes != buf.size())
    return ops::Invalid("state '" + name + "': " + std::to_string(bytes) + " bytes given, " +
                        std::to_string(buf.size()) + " expected");
  if (bytes) std::memcpy(buf.data(), data, bytes);
  return Status::Ok();
}

void* HostEngine::StateData(const std::string& name) {
  int i = FindPort(program_.states, name);
  return i < 0 ? nullptr : states_[static_cast<size_t>(i)].data();
}

void* HostEngine::InputData(const std::string& name) {
  int i = FindPort(program_.inputs, name);
  return i < 0 ? nullptr : inputs_[static_cast<size_t>(i)].data();
}

Status HostEngine::Run() {
  Program& p = program_;
  uintptr_t base = reinterpret_cast<uintptr_t>(arena_.data());
  base = (base + Program::kAlignment - 1) & ~static_cast<uintptr_t>(Program::kAlignment - 1);
  std::vector<void*> ptrs(p.values.size(), nullptr);
  for (size_t v = 0; v < p.values.size(); ++v) {
    const Slot& s = p.slots[v];
    switch (s.kind) {
      case SlotKind::kInput: ptrs[v] = inputs_[s.index].data(); break;
      case SlotKind::kState: ptrs[v] = states_[s.index].data(); break;
      case SlotKind::kConstant: ptrs[v] = const_cast<uint8_t*>(p.values[v].data.data()); break;
      case SlotKind::kArena: ptrs[v] = reinterpret_cast<void*>(base + s.offset); break;
      case SlotKind::kNone: break;
    }
  }
  HTR_OPS_RETURN_IF_ERROR(Execute(&p, ptrs, nullptr));
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    ValueId v = p.outputs[i].value;
    const uint8_t* src = static_cast<const uint8_t*>(ptrs[v]);
    outputs_[i].assign(src, src + p.slots[v].bytes);
  }
  std::vector<void*> sp;
  for (auto& s : states_) sp.push_back(s.data());
  ApplyAssigns(p, ptrs, sp);
  ran_ = true;
  return Status::Ok();
}

const void* HostEngine::OutputData(const std::string& name, size_t* bytes) const {
  if (!ran_) return nullptr;
  int i = FindPort(program_.outputs, name);
  if (i < 0) return nullptr;
  if (bytes) *bytes = outputs_[static_cast<size_t>(i)].size();
  return outputs_[static_cast<size_t>(i)].data();
}

}  // namespace htr::sched
