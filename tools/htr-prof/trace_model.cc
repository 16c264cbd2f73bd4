// trace_model.cc — reading an htr trace and aggregating ops. Op rows come
// from the host "op" events (one per executable step), keyed by (op,
// implementation, device): their device time is the plugin timers' where the
// step dispatched timed work, else host time (args.device_us says which).
#include "trace_model.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace htrprof {

using nlohmann::json;

double Device::PeakFlops(const std::string& dtype) const {
  if (dtype == "bf16" && flops_bf16 > 0) return flops_bf16;
  if (dtype == "f16" && flops_f16 > 0) return flops_f16;
  return flops_f32;
}

const Device* Model::FindDevice(const std::string& id) const {
  for (const Device& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

namespace {

double Num(const json& j, const char* key, double def = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// First dtype named in a shapes string ("f32[64,128],f32[128] -> f32[64]").
std::string FirstDtype(const std::string& shapes) {
  size_t b = shapes.find('[');
  if (b == std::string::npos) return "";
  return shapes.substr(0, b);
}

}  // namespace

std::string Load(const std::string& path, Model* out, const LoadOptions& opt) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot open";
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return path + ": not a JSON object";
  auto te = j.find("traceEvents");
  if (te == j.end() || !te->is_array()) return path + ": no traceEvents array";
  Model m;
  if (auto od = j.find("otherData"); od != j.end() && od->is_object()) {
    m.duration_us = Num(*od, "duration_us");
    if (auto ds = od->find("devices"); ds != od->end() && ds->is_array()) {
      for (const json& d : *ds) {
        if (!d.is_object()) continue;
        Device dev;
        dev.pid = static_cast<int>(Num(d, "pid"));
        dev.id = Str(d, "id");
        dev.name = Str(d, "name");
        dev.kind = Str(d, "kind");
        if (auto pk = d.find("peaks"); pk != d.end() && pk->is_object()) {
          dev.flops_f32 = Num(*pk, "flops_f32");
          dev.flops_bf16 = Num(*pk, "flops_bf16");
          dev.flops_f16 = Num(*pk, "flops_f16");
          dev.bandwidth = Num(*pk, "memory_bandwidth");
          dev.peak_source = Str(*pk, "source");
        }
        m.devices.push_back(dev);
      }
    }
  }
  // Step ranges first (the op events of a step may come before its range in the file).
  std::vector<std::pair<double, double>> step_ranges;  // (start, end), microseconds
  for (const json& e : *te) {
    if (!e.is_object() || Str(e, "ph") != "X" || Num(e, "pid") != 1 || Str(e, "cat") != "range") continue;
    if (Str(e, "name").rfind("step", 0) != 0) continue;
    step_ranges.emplace_back(Num(e, "ts"), Num(e, "ts") + Num(e, "dur"));
  }
  std::sort(step_ranges.begin(), step_ranges.end());
  bool window = false;
  double w0 = 0, w1 = 0;
  if (opt.step != 0) {
    const int64_t n = static_cast<int64_t>(step_ranges.size());
    const int64_t k = opt.step < 0 ? n : opt.step;
    if (opt.step < -1 || k < 1 || k > n)
      return path + ": step " + (opt.step < 0 ? std::string("last") : std::to_string(opt.step)) +
             " asked for, the trace has " + std::to_string(n) + " training steps";
    window = true;
    w0 = step_ranges[k - 1].first;
    w1 = step_ranges[k - 1].second;
    m.step_selected = k;
  }
  std::map<std::string, size_t> row_index;
  double run_us = 0;
  for (const json& e : *te) {
    if (!e.is_object()) continue;
    const std::string ph = Str(e, "ph");
    const int pid = static_cast<int>(Num(e, "pid")), tid = static_cast<int>(Num(e, "tid"));
    static const json kEmpty = json::object();
    auto ait = e.find("args");
    const json& args = ait != e.end() && ait->is_object() ? *ait : kEmpty;
    if (ph == "M") {
      if (Str(e, "name") == "thread_name") m.track_names[{pid, tid}] = Str(args, "name");
      if (Str(e, "name") == "process_name") m.process_names[pid] = Str(args, "name");
      continue;
    }
    if (ph == "C") {
      if (Str(e, "name") == "memory")
        m.memory.push_back(MemorySample{pid, Num(e, "ts"), Num(args, "in_use"), Num(args, "reserved")});
      continue;
    }
    if (ph != "X") continue;
    Span s;
    s.pid = pid;
    s.tid = tid;
    s.ts = Num(e, "ts");
    s.dur = Num(e, "dur");
    s.name = Str(e, "name");
    s.cat = Str(e, "cat");
    m.spans.push_back(s);
    if (pid == 1 && s.cat == "range" && s.name.rfind("step", 0) == 0) {
      m.step_us += s.dur;
      m.steps++;
    }
    if (pid == 1 && s.cat == "run") run_us += s.dur;
    if (pid != 1 || s.cat != "op") continue;
    if (window && (s.ts < w0 || s.ts > w1)) continue;
    const std::string impl = Str(args, "impl"), device = Str(args, "device");
    const std::string key = s.name + '\x1f' + impl + '\x1f' + device;
    auto it = row_index.find(key);
    if (it == row_index.end()) {
      it = row_index.emplace(key, m.ops.size()).first;
      OpRow r;
      r.op = s.name;
      r.impl = impl;
      r.device = device;
      r.group = Str(args, "group");
      r.dtype = FirstDtype(Str(args, "shapes"));
      m.ops.push_back(r);
    }
    OpRow& r = m.ops[it->second];
    r.calls++;
    r.device_us += Num(args, "device_us", s.dur);
    r.host_us += Num(args, "host_us", s.dur);
    r.dispatch_us += Num(args, "dispatch_us");
    r.flops += Num(args, "flops");
    r.bytes += Num(args, "bytes_read") + Num(args, "bytes_written");
    auto dt = args.find("device_timer");
    if (dt != args.end() && dt->is_boolean() && dt->get<bool>()) r.device_timer = true;
  }
  if (m.steps == 0) m.step_us = run_us;
  if (window) m.step_us = w1 - w0;
  for (OpRow& r : m.ops) {
    m.total_op_us += r.device_us;
    const double secs = r.device_us * 1e-6;
    if (secs > 0) {
      r.flops_per_s = r.flops / secs;
      r.bytes_per_s = r.bytes / secs;
    }
    r.intensity = r.bytes > 0 ? r.flops / r.bytes : 0;
    const Device* d = m.FindDevice(r.device);
    if (d == nullptr) continue;
    const double pf = d->PeakFlops(r.dtype), bw = d->bandwidth;
    if (pf > 0 && bw > 0) {
      const double ridge = pf / bw;
      r.compute_bound = r.flops > 0 && r.intensity >= ridge;
      r.peak_fraction = r.compute_bound ? r.flops_per_s / pf : r.bytes_per_s / bw;
    } else if (bw > 0) {
      r.peak_fraction = r.bytes_per_s / bw;
    }
  }
  if (m.step_us <= 0) m.step_us = m.total_op_us;
  std::sort(m.ops.begin(), m.ops.end(),
            [](const OpRow& a, const OpRow& b) { return a.device_us > b.device_us; });
  // Nesting depth per track (events sorted by start, longest first).
  std::vector<size_t> order(m.spans.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Span &x = m.spans[a], &y = m.spans[b];
    if (x.pid != y.pid) return x.pid < y.pid;
    if (x.tid != y.tid) return x.tid < y.tid;
    if (x.ts != y.ts) return x.ts < y.ts;
    return x.dur > y.dur;
  });
  std::vector<double> ends;
  int cur_pid = -1, cur_tid = -1;
  for (size_t i : order) {
    Span& s = m.spans[i];
    if (s.pid != cur_pid || s.tid != cur_tid) {
      ends.clear();
      cur_pid = s.pid;
      cur_tid = s.tid;
    }
    while (!ends.empty() && ends.back() <= s.ts) ends.pop_back();
    s.depth = static_cast<int>(ends.size());
    ends.push_back(s.ts + s.dur);
  }
  if (m.duration_us <= 0)
    for (const Span& s : m.spans) m.duration_us = std::max(m.duration_us, s.ts + s.dur);
  *out = std::move(m);
  return "";
}

}  // namespace htrprof
