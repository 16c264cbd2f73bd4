// profile.cc — see profile.h. A failed range push/pop never stops training:
// the trace is a diagnostic, so such errors are dropped; a failed start or
// write is reported.
#include "profile.h"

#include <cstdio>

namespace htr_train {
namespace {

std::string Take(htr_status_t s) {
  if (s == nullptr) return "";
  std::string m = htr_status_message(s);
  htr_status_free(s);
  return m.empty() ? "error" : m;
}

}  // namespace

double TrainFlopsPerToken(const ModelShape& m, int64_t seq) {
  return 6.0 * static_cast<double>(m.NumParams()) +
         12.0 * static_cast<double>(m.layers) * static_cast<double>(seq) * static_cast<double>(m.width);
}

ProfileSession::~ProfileSession() {
  if (running_) htr_status_free(htr_profiler_stop());
}

std::string ProfileSession::Start() {
  if (path_.empty()) return "";
  htr_profiler_options_t opt = HTR_STRUCT_INIT(htr_profiler_options_t);
  std::string err = Take(htr_profiler_start(rt_, &opt));
  if (!err.empty()) return "--profile: " + err;
  running_ = true;
  return "";
}

void ProfileSession::StepBegin(int64_t step) {
  if (!running_) return;
  htr_status_free(htr_profiler_range_push(("step " + std::to_string(step)).c_str()));
}

void ProfileSession::StepEnd() {
  if (running_) htr_status_free(htr_profiler_range_pop());
}

std::string ProfileSession::Finish() {
  if (!running_) return "";
  running_ = false;
  std::string err = Take(htr_profiler_stop());
  if (err.empty()) err = Take(htr_profiler_write(path_.c_str()));
  if (!err.empty()) return "--profile " + path_ + ": " + err;
  htr_profiler_stats_t st = HTR_STRUCT_INIT(htr_profiler_stats_t);
  htr_status_free(htr_profiler_stats(&st));
  std::printf("htr-train: profile %s (%llu events, %llu ops; summary: htr-prof %s)\n", path_.c_str(),
              static_cast<unsigned long long>(st.events), static_cast<unsigned long long>(st.ops),
              path_.c_str());
  return "";
}

LiveStats::LiveStats(htr_device_t* device, const ModelShape& m, int64_t seq, htr_executable_t* exe)
    : device_(device), flops_per_token_(TrainFlopsPerToken(m, seq)) {
  std::string precision = "fp32";
  if (exe != nullptr) {
    htr_memory_report_t r = HTR_STRUCT_INIT(htr_memory_report_t);
    if (htr_status_t s = htr_executable_memory_report(exe, &r)) htr_status_free(s);
    else if (r.precision != nullptr) precision = r.precision;
  }
  htr_device_peaks_t p = HTR_STRUCT_INIT(htr_device_peaks_t);
  if (htr_status_t s = htr_device_peaks(device, &p)) {
    htr_status_free(s);
  } else if (precision == "bf16") {
    peak_ = p.flops_bf16;
    peak_dtype_ = "bf16";
  } else if (precision == "fp16") {
    peak_ = p.flops_f16;
    peak_dtype_ = "f16";
  } else {
    peak_ = p.flops_f32;
  }
}

std::string LiveStats::Line(double tokens_per_s) const {
  char buf[160];
  std::string mfu;
  if (peak_ > 0) {
    std::snprintf(buf, sizeof(buf), "MFU %.1f%% of %.3g TFLOP/s %s", 100.0 * flops_per_token_ * tokens_per_s / peak_,
                  peak_ / 1e12, peak_dtype_.c_str());
    mfu = buf;
  } else {
    std::snprintf(buf, sizeof(buf), "%.3g TFLOP/s (no peak: htr-bench peak)", flops_per_token_ * tokens_per_s / 1e12);
    mfu = buf;
  }
  htr_pool_stats_t ps = HTR_STRUCT_INIT(htr_pool_stats_t);
  double mib = -1;
  if (htr_status_t s = htr_device_pool_stats(device_, &ps)) {
    htr_status_free(s);
  } else {
    mib = static_cast<double>(ps.bytes_in_use) / (1024.0 * 1024.0);
  }
  std::snprintf(buf, sizeof(buf), "%s  mem %.1f MiB", mfu.c_str(), mib);
  return buf;
}

}  // namespace htr_train
