// runtime/profiler_trace.cc — a stopped recording as Chrome Trace Event
// JSON (the format Perfetto and chrome://tracing read; tools/htr-prof reads
// the `args` and `otherData` written here).
//
// Layout: pid 1 is the host, one tid per host thread; pid 2+i is device i,
// one tid per stream. Host events are complete events ("X") in recording
// order, which RAII scopes keep strictly nested per thread. Device events are
// the timer intervals of dispatched work; a stream runs its work in order,
// so they are laid end to end (an overlap from clock rounding is clipped).
// Memory is a counter ("C") per device. Times are microseconds with three
// decimals, printed from integer nanoseconds so nesting survives exactly.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/profiler_data.h"

namespace htr::prof {
namespace {

void Escape(std::string* o, const std::string& s) {
  o->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *o += "\\\""; break;
      case '\\': *o += "\\\\"; break;
      case '\n': *o += "\\n"; break;
      case '\t': *o += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *o += buf;
        } else {
          o->push_back(static_cast<char>(c));
        }
    }
  }
  o->push_back('"');
}

std::string Us(int64_t ns) {
  if (ns < 0) ns = 0;
  return fmt::format("{}.{:03}", ns / 1000, ns % 1000);
}

std::string Num(double v) {
  if (!(v == v) || v > 1e300 || v < -1e300) return "0";
  return fmt::format("{}", v);
}

const char* Category(Kind k) {
  switch (k) {
    case Kind::kStep: return "op";
    case Kind::kLibrary: return "library";
    case Kind::kKernel: return "kernel";
    case Kind::kCopy: return "copy";
    case Kind::kFill: return "fill";
    case Kind::kRange: return "range";
    case Kind::kRun: return "run";
    case Kind::kAlloc: return "alloc";
    case Kind::kFree: return "free";
    case Kind::kPoolSample: return "pool";
  }
  return "other";
}

std::string StreamName(const Recording& r, int32_t s) {
  if (s < 0) return "";
  const StreamInfo& si = r.streams[static_cast<size_t>(s)];
  return fmt::format("{}/{}", r.devices[static_cast<size_t>(si.device)].id, si.index);
}

void Args(std::string* o, const Recording& r, const Event& e) {
  const std::string dev = e.device >= 0 ? r.devices[static_cast<size_t>(e.device)].id : "";
  *o += "\"args\":{";
  *o += "\"device\":";
  Escape(o, dev);
  if (e.kind == Kind::kStep || e.kind == Kind::kLibrary || e.kind == Kind::kKernel ||
      e.kind == Kind::kCopy || e.kind == Kind::kFill) {
    const int64_t host = e.t1 - e.t0;
    int64_t device = e.dev_t0 >= 0 ? e.dev_t1 - e.dev_t0 : host;
    bool timed = e.dev_t0 >= 0;
    if (e.kind == Kind::kStep) {
      device = StepDeviceNs(e);
      timed = e.child_timed;
    }
    int64_t dispatch = host - device;
    if (e.kind != Kind::kStep && e.launched >= 0 && timed) dispatch = e.launched - e.t0;
    if (dispatch < 0) dispatch = 0;
    *o += ",\"impl\":";
    Escape(o, e.impl);
    *o += ",\"group\":";
    Escape(o, e.group);
    *o += ",\"shapes\":";
    Escape(o, e.shapes);
    *o += ",\"stream\":";
    Escape(o, StreamName(r, e.stream));
    *o += fmt::format(
        ",\"index\":{},\"flops\":{},\"bytes_read\":{},\"bytes_written\":{},\"host_us\":{},"
        "\"device_us\":{},\"dispatch_us\":{},\"device_timer\":{}",
        e.index, Num(e.flops), e.bytes_read, e.bytes_written, Us(host), Us(device), Us(dispatch),
        timed ? "true" : "false");
  }
  if (e.truncated) *o += ",\"truncated\":true";
  *o += "}";
}

}  // namespace

Status WriteChromeTrace(const Recording& r, const std::string& path) {
  std::string o;
  o.reserve(256 + r.events.size() * 400);
  o += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto begin = [&]() {
    if (!first) o += ",\n";
    first = false;
  };
  // Track names.
  begin();
  o += "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"host\"}}";
  for (int32_t t = 0; t < r.threads; ++t) {
    begin();
    o += fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"host thread {}\"}}}}",
        t + 1, t);
  }
  for (size_t d = 0; d < r.devices.size(); ++d) {
    begin();
    o += fmt::format("{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"tid\":0,\"args\":{{\"name\":", d + 2);
    Escape(&o, r.devices[d].id + " (" + r.devices[d].name + ")");
    o += "}}";
  }
  for (const StreamInfo& s : r.streams) {
    begin();
    o += fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":\"stream {}{}\"}}}}",
        s.device + 2, s.index + 1, s.index, s.is_default ? " (default)" : "");
  }
  // Host events.
  for (const Event& e : r.events) {
    if (e.kind == Kind::kAlloc || e.kind == Kind::kFree || e.kind == Kind::kPoolSample) continue;
    begin();
    o += "{\"name\":";
    Escape(&o, e.name);
    o += fmt::format(",\"cat\":\"{}\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{},\"dur\":{},",
                     Category(e.kind), e.thread + 1, Us(e.t0), Us(e.t1 - e.t0));
    Args(&o, r, e);
    o += "}";
  }
  // Device events, per stream in recording order (= stream order).
  std::vector<int64_t> stream_end(r.streams.size(), 0);
  for (const Event& e : r.events) {
    if (e.dev_t0 < 0 || e.stream < 0) continue;
    int64_t t0 = e.dev_t0, t1 = e.dev_t1;
    int64_t& end = stream_end[static_cast<size_t>(e.stream)];
    if (t0 < end) t0 = end;
    if (t1 < t0) t1 = t0;
    end = t1;
    const StreamInfo& si = r.streams[static_cast<size_t>(e.stream)];
    begin();
    o += "{\"name\":";
    Escape(&o, e.name);
    o += fmt::format(",\"cat\":\"device\",\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},",
                     si.device + 2, si.index + 1, Us(t0), Us(t1 - t0));
    Args(&o, r, e);
    o += "}";
  }
  // Memory counters.
  for (const Event& e : r.events) {
    if (e.kind != Kind::kAlloc && e.kind != Kind::kFree && e.kind != Kind::kPoolSample) continue;
    begin();
    o += fmt::format(
        "{{\"name\":\"memory\",\"cat\":\"memory\",\"ph\":\"C\",\"pid\":{},\"tid\":0,\"ts\":{},"
        "\"args\":{{\"in_use\":{},\"reserved\":{},\"cached\":{}}}}}",
        e.device + 2, Us(e.t0), e.mem_in_use, e.mem_reserved, e.mem_cached);
  }
  o += "\n],\n\"otherData\":{\"htr_trace_version\":1,";
  o += fmt::format("\"duration_us\":{},\"devices\":[", Us(r.duration_ns));
  for (size_t d = 0; d < r.devices.size(); ++d) {
    const DeviceInfo& di = r.devices[d];
    if (d) o += ",";
    o += fmt::format("{{\"pid\":{},\"id\":", d + 2);
    Escape(&o, di.id);
    o += ",\"name\":";
    Escape(&o, di.name);
    o += ",\"kind\":";
    Escape(&o, di.kind);
    o += fmt::format(
        ",\"peaks\":{{\"flops_f32\":{},\"flops_bf16\":{},\"flops_f16\":{},\"memory_bandwidth\":{},"
        "\"source\":\"{}\"}}}}",
        Num(di.peaks.flops_f32), Num(di.peaks.flops_bf16), Num(di.peaks.flops_f16),
        Num(di.peaks.memory_bandwidth), di.peaks.source ? di.peaks.source : "none");
  }
  o += fmt::format(
      "],\"stats\":{{\"events\":{},\"dropped\":{},\"ops\":{},\"device_timed\":{},\"op_flops\":{}}}}}\n}}\n",
      r.stats.events, r.stats.dropped, r.stats.ops, r.stats.device_timed, Num(r.stats.op_flops));

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return rt::Error(HTR_STATUS_INVALID_ARGUMENT, "{}: cannot create: {}", tmp, std::strerror(errno));
  const bool wrote = std::fwrite(o.data(), 1, o.size(), f) == o.size();
  const bool closed = std::fclose(f) == 0;
  if (!wrote || !closed) {
    std::remove(tmp.c_str());
    return rt::Error(HTR_STATUS_INTERNAL, "{}: write failed", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return rt::Error(HTR_STATUS_INTERNAL, "{}: rename to {} failed: {}", tmp, path, std::strerror(errno));
  }
  return Status();
}

}  // namespace htr::prof
