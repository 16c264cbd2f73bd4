// progress.cc — output formats. The JSON log is written with a fixed format
// (%.9g keeps a float32 loss exact) and flushed each step, so a killed run
// leaves every completed step on disk.
#include "progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

namespace htr_train {

std::string History::Serialize() const {
  std::string s;
  char line[128];
  for (const StepRecord& r : r_) {
    std::snprintf(line, sizeof(line), "%lld %.9g %.9g %.9g\n", static_cast<long long>(r.step),
                  r.loss, r.lr, r.val_loss);
    s += line;
  }
  return s;
}

bool History::Parse(const std::string& text) {
  std::vector<StepRecord> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    StepRecord r;
    long long step = 0;
    if (std::sscanf(line.c_str(), "%lld %lf %lf %lf", &step, &r.loss, &r.lr, &r.val_loss) != 4)
      return false;
    r.step = step;
    out.push_back(r);
  }
  r_ = std::move(out);
  return true;
}

std::string History::WriteCsv(const std::string& path) const {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return path + ": " + std::strerror(errno);
  std::fprintf(f, "step,loss,lr,val_loss\n");
  for (const StepRecord& r : r_) {
    std::fprintf(f, "%lld,%.9g,%.9g,", static_cast<long long>(r.step), r.loss, r.lr);
    if (r.val_loss >= 0) std::fprintf(f, "%.9g", r.val_loss);
    std::fprintf(f, "\n");
  }
  bool bad = std::fclose(f) != 0;
  return bad ? path + ": write failed" : "";
}

std::string History::WriteSvg(const std::string& path, double reference_nats) const {
  const double W = 800, H = 480, L = 70, R = 20, T = 30, B = 50;
  double max_step = 1, lo = 1e300, hi = -1e300;
  for (const StepRecord& r : r_) {
    max_step = std::max(max_step, static_cast<double>(r.step));
    for (double v : {r.loss, r.val_loss})
      if (v >= 0 && std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  if (reference_nats > 0) lo = std::min(lo, reference_nats), hi = std::max(hi, reference_nats);
  if (!(lo < hi)) lo = 0, hi = 1;
  const double pad = (hi - lo) * 0.05;
  lo -= pad;
  hi += pad;
  auto X = [&](double s) { return L + (W - L - R) * s / max_step; };
  auto Y = [&](double v) { return T + (H - T - B) * (hi - v) / (hi - lo); };
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) return path + ": " + std::strerror(errno);
  std::fprintf(f,
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%g\" y=\"18\">htr-train loss (nats/token)</text>\n",
               W, H, L);
  std::fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, H - B,
               W - R, H - B);
  std::fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", L, T, L,
               H - B);
  for (int i = 0; i <= 5; ++i) {
    double v = lo + (hi - lo) * i / 5.0, s = max_step * i / 5.0;
    std::fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.2f</text>\n", L - 6, Y(v) + 4, v);
    std::fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%.0f</text>\n", X(s), H - B + 18,
                 s);
  }
  std::fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2,
               H - 10);
  auto polyline = [&](bool val, const char* color) {
    std::string pts;
    char buf[64];
    for (const StepRecord& r : r_) {
      double v = val ? r.val_loss : r.loss;
      if (v < 0 || !std::isfinite(v)) continue;
      std::snprintf(buf, sizeof(buf), "%.1f,%.1f ", X(static_cast<double>(r.step)), Y(v));
      pts += buf;
    }
    if (!pts.empty())
      std::fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%s\"/>\n",
                   color, pts.c_str());
  };
  polyline(false, "#1f77b4");
  polyline(true, "#d62728");
  if (reference_nats > 0)
    std::fprintf(f,
                 "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"gray\" "
                 "stroke-dasharray=\"4 4\"/>\n<text x=\"%g\" y=\"%.1f\" fill=\"gray\" "
                 "text-anchor=\"end\">unigram entropy %.3f</text>\n",
                 L, Y(reference_nats), W - R, Y(reference_nats), W - R - 4, Y(reference_nats) - 4,
                 reference_nats);
  std::fprintf(f,
               "<text x=\"%g\" y=\"%g\" fill=\"#1f77b4\">train</text>\n"
               "<text x=\"%g\" y=\"%g\" fill=\"#d62728\">validation</text>\n</svg>\n",
               W - R - 150, T + 14, W - R - 100, T + 14);
  bool bad = std::fclose(f) != 0;
  return bad ? path + ": write failed" : "";
}

Progress::Progress(int bar, int64_t total_steps, int64_t print_every)
    : bar_(bar < 0 ? isatty(STDERR_FILENO) != 0 : bar == 1),
      total_(total_steps),
      print_every_(print_every) {}

Progress::~Progress() {
  Finish();
  if (json_) std::fclose(json_);
}

std::string Progress::OpenJsonLog(const std::string& path, int64_t keep_before) {
  json_path_ = path;
  if (keep_before >= 0) {
    if (FILE* in = std::fopen(path.c_str(), "r")) {
      std::string kept, line;
      bool dropped = false;
      for (int ch; (ch = std::fgetc(in)) != EOF;) {
        line.push_back(static_cast<char>(ch));
        if (ch != '\n') continue;
        long long step = -1;
        if (std::sscanf(line.c_str(), "{\"step\": %lld", &step) == 1 && step >= keep_before)
          dropped = true;
        else
          kept += line;
        line.clear();
      }
      const bool bad = std::ferror(in) != 0;
      std::fclose(in);
      if (bad) return path + ": read error";
      if (dropped) {  // rewrite through a temporary file and rename
        const std::string tmp = path + ".tmp";
        FILE* out = std::fopen(tmp.c_str(), "w");
        if (!out) return tmp + ": " + std::strerror(errno);
        const bool ok = std::fwrite(kept.data(), 1, kept.size(), out) == kept.size();
        if (std::fclose(out) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
          std::remove(tmp.c_str());
          return path + ": rewriting the log failed: " + std::strerror(errno);
        }
      }
    }
  }
  json_ = std::fopen(path.c_str(), "a");
  if (!json_) return path + ": " + std::strerror(errno);
  return "";
}

static std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  long long t = static_cast<long long>(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", t / 3600, (t / 60) % 60);
  else
    std::snprintf(buf, sizeof(buf), "%lldm%02llds", t / 60, t % 60);
  return buf;
}

void Progress::Step(int64_t step, double loss, double lr, double tokens_per_s, double grad_norm,
                    double elapsed_s, int64_t steps_done_this_run) {
  if (json_) {
    const int n = std::fprintf(json_,
                               "{\"step\": %lld, \"loss\": %.9g, \"lr\": %.9g, \"tokens_per_s\": %.6g, "
                               "\"grad_norm\": %.9g}\n",
                               static_cast<long long>(step), loss, lr, tokens_per_s, grad_norm);
    if ((n < 0 || std::fflush(json_) != 0) && json_error_.empty())
      json_error_ = json_path_ + ": write failed: " + std::strerror(errno);
  }
  const double eta = steps_done_this_run > 0
                         ? elapsed_s / static_cast<double>(steps_done_this_run) *
                               static_cast<double>(total_ - step - 1)
                         : -1;
  if (bar_) {
    const int width = 30;
    const double frac = total_ > 0 ? static_cast<double>(step + 1) / static_cast<double>(total_) : 1;
    const int filled = static_cast<int>(frac * width);
    std::string b(static_cast<size_t>(filled), '#');
    b.append(static_cast<size_t>(width - filled), '.');
    std::fprintf(stderr, "\r[%s] step %lld/%lld  loss %.4f  %.0f tok/s  %s  ETA %s   ", b.c_str(),
                 static_cast<long long>(step + 1), static_cast<long long>(total_), loss,
                 tokens_per_s, live_.c_str(), Duration(eta).c_str());
    std::fflush(stderr);
    bar_open_ = true;
  } else if (step % print_every_ == 0 || step + 1 == total_) {
    std::printf("step %lld/%lld  loss %.4f  lr %.3g  %.0f tok/s  %s  ETA %s\n",
                static_cast<long long>(step + 1), static_cast<long long>(total_), loss, lr,
                tokens_per_s, live_.c_str(), Duration(eta).c_str());
    std::fflush(stdout);
  }
}

void Progress::Eval(int64_t step, double val_loss) {
  if (bar_open_) {
    std::fprintf(stderr, "\n");
    bar_open_ = false;
  }
  std::printf("step %lld  validation loss %.4f\n", static_cast<long long>(step + 1), val_loss);
  std::fflush(stdout);
}

void Progress::Finish() {
  if (bar_open_) {
    std::fprintf(stderr, "\n");
    bar_open_ = false;
  }
}

}  // namespace htr_train
