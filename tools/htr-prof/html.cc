// html.cc — one self-contained HTML page: every chart is inline SVG drawn
// here, the small script only adds zoom and a status line (it loads nothing;
// the page works without it). Sections: summary, timeline (one lane group
// per host thread and device stream, nesting as rows), op table, roofline
// (log-log: arithmetic intensity vs achieved FLOP/s under each device's
// roofs), memory in use over time per device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "report.h"

namespace htrprof {
namespace {

std::string Esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '"': o += "&quot;"; break;
      default: o.push_back(c);
    }
  }
  return o;
}

std::string F(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

const char* Color(const std::string& cat) {
  if (cat == "op") return "#4e79a7";
  if (cat == "library") return "#f28e2b";
  if (cat == "kernel") return "#e15759";
  if (cat == "copy" || cat == "fill") return "#76b7b2";
  if (cat == "range") return "#bab0ac";
  if (cat == "run") return "#d4c9a8";
  if (cat == "device") return "#59a14f";
  return "#9c755f";
}

std::string Timeline(const Model& m) {
  const double W = 1200, L = 170, lane = 14;
  const double dur = std::max(m.duration_us, 1.0);
  // Tracks in order: host threads, then device streams; rows = max depth + 1 (capped).
  std::map<std::pair<int, int>, int> rows;
  for (const Span& s : m.spans) {
    int& r = rows[{s.pid, s.tid}];
    r = std::max(r, std::min(s.depth, 7) + 1);
  }
  std::map<std::pair<int, int>, double> top;
  double y = 20;
  std::string labels;
  for (const auto& [key, n] : rows) {
    top[key] = y;
    std::string name = m.process_names.count(key.first) ? m.process_names.at(key.first) : "";
    auto tn = m.track_names.find(key);
    name += " / " + (tn != m.track_names.end() ? tn->second : "track " + std::to_string(key.second));
    labels += "<text x=\"4\" y=\"" + F("%.1f", y + 11) + "\">" + Esc(name) + "</text>\n";
    y += n * lane + 8;
  }
  const double H = y + 20;
  std::string o = "<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + F("%.0f", W) +
                  "\" height=\"" + F("%.0f", H) + "\" font-family=\"sans-serif\" font-size=\"10\">\n";
  o += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + labels;
  for (int i = 0; i <= 10; ++i) {
    const double x = L + (W - L - 10) * i / 10.0;
    o += "<line x1=\"" + F("%.1f", x) + "\" y1=\"12\" x2=\"" + F("%.1f", x) + "\" y2=\"" + F("%.0f", H - 10) +
         "\" stroke=\"#eee\"/><text x=\"" + F("%.1f", x) + "\" y=\"10\" text-anchor=\"middle\">" +
         F("%.2f ms", dur * i / 10.0 / 1e3) + "</text>\n";
  }
  // Longest spans first when there are too many to draw.
  std::vector<const Span*> spans;
  for (const Span& s : m.spans) spans.push_back(&s);
  const size_t kMax = 40000;
  if (spans.size() > kMax) {
    std::partial_sort(spans.begin(), spans.begin() + kMax, spans.end(),
                      [](const Span* a, const Span* b) { return a->dur > b->dur; });
    spans.resize(kMax);
  }
  o += "<g id=\"lanes\">\n";
  for (const Span* s : spans) {
    const double x = L + (W - L - 10) * s->ts / dur;
    const double w = std::max(0.5, (W - L - 10) * s->dur / dur);
    const double yy = top[{s->pid, s->tid}] + std::min(s->depth, 7) * lane;
    o += "<rect class=\"ev\" x=\"" + F("%.2f", x) + "\" y=\"" + F("%.1f", yy) + "\" width=\"" + F("%.2f", w) +
         "\" height=\"" + F("%.0f", lane - 2) + "\" fill=\"" + Color(s->cat) + "\"><title>" + Esc(s->name) +
         " (" + Esc(s->cat) + ") " + F("%.3f us at %.3f us", s->dur, s->ts) + "</title></rect>\n";
  }
  o += "</g>\n</svg>\n";
  return o;
}

std::string Table(const Model& m) {
  std::string o =
      "<table id=\"ops\"><tr><th>op</th><th>impl</th><th>device</th><th>calls</th><th>total ms</th>"
      "<th>mean us</th><th>% step</th><th>FLOP/s</th><th>B/s</th><th>% peak</th><th>bound</th>"
      "<th>dispatch us</th><th>timer</th></tr>\n";
  for (const OpRow& r : m.ops) {
    o += "<tr><td>" + Esc(r.op) + "</td><td>" + Esc(r.impl) + "</td><td>" + Esc(r.device) + "</td><td>" +
         std::to_string(r.calls) + "</td><td>" + F("%.3f", r.device_us / 1e3) + "</td><td>" +
         F("%.1f", r.device_us / static_cast<double>(r.calls)) + "</td><td>" +
         F("%.1f", m.step_us > 0 ? 100 * r.device_us / m.step_us : 0) + "</td><td>" + Si(r.flops_per_s) +
         "</td><td>" + Si(r.bytes_per_s) + "</td><td>" +
         (r.peak_fraction >= 0 ? F("%.1f", 100 * r.peak_fraction) : std::string("-")) + "</td><td>" +
         (r.compute_bound ? "compute" : "memory") + "</td><td>" + F("%.1f", r.dispatch_us) + "</td><td>" +
         (r.device_timer ? "device" : "host") + "</td></tr>\n";
  }
  return o + "</table>\n";
}

std::string Roofline(const Model& m) {
  const double W = 640, H = 420, L = 70, R = 20, T = 20, B = 50;
  const double xlo = -3, xhi = 3;  // log10 FLOP/byte
  double ymax = 0;
  for (const Device& d : m.devices) ymax = std::max({ymax, d.flops_f32, d.flops_bf16, d.flops_f16});
  for (const OpRow& r : m.ops) ymax = std::max(ymax, r.flops_per_s);
  if (ymax <= 0) ymax = 1e9;
  const double yhi = std::ceil(std::log10(ymax) + 0.3), ylo = yhi - 6;
  auto X = [&](double v) { return L + (W - L - R) * (std::log10(std::max(v, 1e-12)) - xlo) / (xhi - xlo); };
  auto Y = [&](double v) { return T + (H - T - B) * (yhi - std::log10(std::max(v, 1e-12))) / (yhi - ylo); };
  std::string o = "<svg id=\"roofline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + F("%.0f", W) +
                  "\" height=\"" + F("%.0f", H) + "\" font-family=\"sans-serif\" font-size=\"11\">\n"
                  "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<clipPath id=\"plot\"><rect x=\"" +
                  F("%.0f", L) + "\" y=\"" + F("%.0f", T) + "\" width=\"" + F("%.0f", W - L - R) +
                  "\" height=\"" + F("%.0f", H - T - B) + "\"/></clipPath>\n";
  for (int e = static_cast<int>(xlo); e <= static_cast<int>(xhi); ++e) {
    const double x = X(std::pow(10.0, e));
    o += "<line x1=\"" + F("%.1f", x) + "\" y1=\"" + F("%.0f", T) + "\" x2=\"" + F("%.1f", x) + "\" y2=\"" +
         F("%.0f", H - B) + "\" stroke=\"#eee\"/><text x=\"" + F("%.1f", x) + "\" y=\"" + F("%.0f", H - B + 15) +
         "\" text-anchor=\"middle\">1e" + std::to_string(e) + "</text>\n";
  }
  for (int e = static_cast<int>(ylo); e <= static_cast<int>(yhi); ++e) {
    const double yy = Y(std::pow(10.0, e));
    o += "<line x1=\"" + F("%.0f", L) + "\" y1=\"" + F("%.1f", yy) + "\" x2=\"" + F("%.0f", W - R) + "\" y2=\"" +
         F("%.1f", yy) + "\" stroke=\"#eee\"/><text x=\"" + F("%.0f", L - 4) + "\" y=\"" + F("%.1f", yy + 4) +
         "\" text-anchor=\"end\">" + Si(std::pow(10.0, e)) + "</text>\n";
  }
  o += "<text x=\"" + F("%.0f", (L + W - R) / 2) + "\" y=\"" + F("%.0f", H - 12) +
       "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text>\n<text x=\"14\" y=\"" + F("%.0f", T + 150) +
       "\" transform=\"rotate(-90 14 " + F("%.0f", T + 150) + ")\">achieved FLOP/s</text>\n<g clip-path=\"url(#plot)\">\n";
  for (const Device& d : m.devices) {
    if (d.flops_f32 <= 0 || d.bandwidth <= 0) continue;
    std::string pts;
    for (int i = 0; i <= 60; ++i) {
      const double in = std::pow(10.0, xlo + (xhi - xlo) * i / 60.0);
      pts += F("%.1f,%.1f ", X(in), Y(std::min(d.flops_f32, in * d.bandwidth)));
    }
    o += "<polyline class=\"roof\" fill=\"none\" stroke=\"black\" stroke-width=\"1.5\" points=\"" + pts +
         "\"><title>" + Esc(d.id) + " f32 roof</title></polyline>\n";
  }
  int skipped = 0;
  for (const OpRow& r : m.ops) {
    if (r.flops <= 0 || r.intensity <= 0) {
      ++skipped;
      continue;
    }
    o += "<circle class=\"op\" cx=\"" + F("%.1f", X(r.intensity)) + "\" cy=\"" + F("%.1f", Y(r.flops_per_s)) +
         "\" r=\"4\" fill=\"" + (r.compute_bound ? "#e15759" : "#4e79a7") + "\"><title>" + Esc(r.op) + " [" +
         Esc(r.impl) + "] " + Si(r.flops_per_s) + "FLOP/s, " + F("%.3g", r.intensity) + " FLOP/B</title></circle>\n";
  }
  o += "</g>\n<text x=\"" + F("%.0f", L + 6) + "\" y=\"" + F("%.0f", T + 14) + "\">" + std::to_string(skipped) +
       " ops without FLOPs (data movement) not shown</text>\n</svg>\n";
  return o;
}

std::string MemoryCurve(const Model& m) {
  const double W = 900, H = 260, L = 80, R = 20, T = 20, B = 40;
  double ymax = 1;
  for (const MemorySample& s : m.memory) ymax = std::max({ymax, s.in_use, s.reserved});
  const double dur = std::max(m.duration_us, 1.0);
  auto X = [&](double t) { return L + (W - L - R) * t / dur; };
  auto Y = [&](double v) { return T + (H - T - B) * (1 - v / ymax); };
  std::string o = "<svg id=\"memory\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + F("%.0f", W) +
                  "\" height=\"" + F("%.0f", H) + "\" font-family=\"sans-serif\" font-size=\"11\">\n"
                  "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double v = ymax * i / 4;
    o += "<text x=\"" + F("%.0f", L - 4) + "\" y=\"" + F("%.1f", Y(v) + 4) + "\" text-anchor=\"end\">" + Si(v) +
         "B</text><line x1=\"" + F("%.0f", L) + "\" y1=\"" + F("%.1f", Y(v)) + "\" x2=\"" + F("%.0f", W - R) +
         "\" y2=\"" + F("%.1f", Y(v)) + "\" stroke=\"#eee\"/>\n";
  }
  o += "<text x=\"" + F("%.0f", (L + W - R) / 2) + "\" y=\"" + F("%.0f", H - 8) + "\" text-anchor=\"middle\">" +
       F("time (0 .. %.2f ms); blue: in use, gray: reserved", dur / 1e3) + "</text>\n";
  std::map<int, std::pair<std::string, std::string>> lines;
  for (const MemorySample& s : m.memory) {
    auto& [use, res] = lines[s.pid];
    use += F("%.1f,%.1f ", X(s.ts), Y(s.in_use));
    res += F("%.1f,%.1f ", X(s.ts), Y(s.reserved));
  }
  for (const auto& [pid, l] : lines) {
    o += "<polyline fill=\"none\" stroke=\"#bab0ac\" points=\"" + l.second + "\"/>\n";
    o += "<polyline class=\"mem\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"1.5\" points=\"" + l.first +
         "\"><title>" + Esc(m.process_names.count(pid) ? m.process_names.at(pid) : "") + "</title></polyline>\n";
  }
  return o + "</svg>\n";
}

const char* kScript = R"JS(
window.addEventListener('error', function (e) {
  document.getElementById('errors').textContent += 'script error: ' + e.message + '\n';
});
document.addEventListener('DOMContentLoaded', function () {
  var svg = document.getElementById('timeline');
  var n = svg.querySelectorAll('rect.ev').length;
  var w = Number(svg.getAttribute('width')), h = Number(svg.getAttribute('height'));
  svg.setAttribute('viewBox', '0 0 ' + w + ' ' + h);
  var view = {x: 0, w: w};
  function apply() { svg.setAttribute('viewBox', view.x + ' 0 ' + view.w + ' ' + h); }
  document.getElementById('zoomin').onclick = function () { view.x += view.w / 4; view.w /= 2; apply(); };
  document.getElementById('zoomout').onclick = function () {
    view.x = Math.max(0, view.x - view.w / 2); view.w = Math.min(w, view.w * 2); apply(); };
  document.getElementById('reset').onclick = function () { view = {x: 0, w: w}; apply(); };
  var s = document.getElementById('status');
  s.textContent = 'timeline: ' + n + ' events drawn';
  s.setAttribute('data-drawn', String(n));
});
)JS";

}  // namespace

std::string HtmlReport(const Model& m, const std::string& title) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>htr-prof: " + Esc(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:16px}table{border-collapse:collapse;font-size:12px}"
      "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}td:first-child,td:nth-child(2),"
      "td:nth-child(3){text-align:left}#tlwrap{overflow-x:auto;border:1px solid #ddd}pre#errors{color:#b00}"
      "</style>\n</head><body>\n<h1>htr-prof: " + Esc(title) + "</h1>\n<pre id=\"summary\">" +
      Esc(TextReport(m, 10)) + "</pre>\n<pre id=\"errors\"></pre>\n<h2>Timeline</h2>\n"
      "<p><button id=\"zoomin\">zoom in</button> <button id=\"zoomout\">zoom out</button> "
      "<button id=\"reset\">reset</button> <span id=\"status\">timeline (static)</span></p>\n<div id=\"tlwrap\">" +
      Timeline(m) + "</div>\n<h2>Ops</h2>\n" + Table(m) + "<h2>Roofline</h2>\n" + Roofline(m) +
      "<h2>Memory in use</h2>\n" + MemoryCurve(m) + "<script>" + kScript + "</script>\n</body></html>\n";
  return o;
}

}  // namespace htrprof
