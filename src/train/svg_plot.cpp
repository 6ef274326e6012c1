// curves.svg: a small hand-written SVG line chart of train and eval loss against step.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "io/svg.h"
#include "tfm/plot.h"
#include "train/train_internal.h"

namespace tfm::train_detail {
namespace {

using svg::num;

constexpr double kW = 720, kH = 420, kLeft = 64, kRight = 20, kTop = 36, kBottom = 48;

// Round tick step (1, 2 or 5 times a power of ten) giving about `want` ticks over span.
double tick_step(double span, int want) {
  const double raw = span / want;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

std::string loss_curves_svg(const Curves& c, const std::string& title) {
  double x0 = 0, x1 = 1, y0 = INFINITY, y1 = -INFINITY;
  for (const auto* s : {&c.train_loss, &c.val_loss})
    for (const auto& p : *s) {
      if (!std::isfinite(p.value)) continue;
      x1 = std::max(x1, static_cast<double>(p.step));
      y0 = std::min(y0, p.value);
      y1 = std::max(y1, p.value);
    }
  if (!(y0 <= y1)) y0 = 0, y1 = 1;
  if (y1 - y0 < 1e-9) y0 -= 0.5, y1 += 0.5;
  const double ys = tick_step(y1 - y0, 6);
  y0 = std::floor(y0 / ys) * ys;
  y1 = std::ceil(y1 / ys) * ys;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto X = [&](double s) { return kLeft + (s - x0) / (x1 - x0) * pw; };
  auto Y = [&](double v) { return kTop + (1.0 - (v - y0) / (y1 - y0)) * ph; };

  std::string out = svg::open(kW, kH);
  out += svg::text(kW / 2, 22, title, "text-anchor=\"middle\" font-size=\"14\"");
  // Axes, grid and ticks.
  out += "<g stroke=\"#ccc\" stroke-width=\"1\">\n";
  for (double v = y0; v <= y1 + ys * 1e-6; v += ys)
    out += "<line x1=\"" + num(kLeft) + "\" x2=\"" + num(kW - kRight) + "\" y1=\"" + num(Y(v)) + "\" y2=\"" + num(Y(v)) + "\"/>\n";
  const double xs = tick_step(x1 - x0, 8);
  for (double s = 0; s <= x1 + xs * 1e-6; s += xs)
    out += "<line y1=\"" + num(kTop) + "\" y2=\"" + num(kH - kBottom) + "\" x1=\"" + num(X(s)) + "\" x2=\"" + num(X(s)) + "\"/>\n";
  out += "</g>\n<g fill=\"#333\">\n";
  for (double v = y0; v <= y1 + ys * 1e-6; v += ys)
    out += "<text x=\"" + num(kLeft - 6) + "\" y=\"" + num(Y(v) + 4) + "\" text-anchor=\"end\">" + num(v) + "</text>\n";
  for (double s = 0; s <= x1 + xs * 1e-6; s += xs)
    out += "<text x=\"" + num(X(s)) + "\" y=\"" + num(kH - kBottom + 16) + "\" text-anchor=\"middle\">" + num(s) + "</text>\n";
  out += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kH - 10) + "\" text-anchor=\"middle\">step</text>\n";
  out += "<text transform=\"translate(16," + num(kTop + ph / 2) + ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n</g>\n";
  out += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#333\"/>\n";
  auto line = [&](const std::vector<MetricPoint>& pts, const char* colour, const char* label, int row) {
    std::string d;
    for (const auto& p : pts)
      if (std::isfinite(p.value)) {
        if (!d.empty()) d += ' ';
        d += num(X(static_cast<double>(p.step)));
        d += ',';
        d += num(Y(p.value));
      }
    if (!d.empty())
      out += "<polyline fill=\"none\" stroke=\"" + std::string(colour) + "\" stroke-width=\"1.5\" points=\"" + d + "\"/>\n";
    const double ly = kTop + 14 + 16 * row;
    out += "<line x1=\"" + num(kW - kRight - 110) + "\" x2=\"" + num(kW - kRight - 90) + "\" y1=\"" + num(ly - 4) +
           "\" y2=\"" + num(ly - 4) + "\" stroke=\"" + colour + "\" stroke-width=\"2\"/>\n<text x=\"" +
           num(kW - kRight - 84) + "\" y=\"" + num(ly) + "\">" + label + "</text>\n";
  };
  line(c.train_loss, "#1f77b4", "train loss", 0);
  line(c.val_loss, "#d62728", "eval loss", 1);
  out += svg::close();
  return out;
}

// The confusion matrix as the attention pictures draw theirs: each true class's row scaled to
// fractions of that class, so rare and common classes read alike; its recall beside its name.
std::string confusion_matrix_svg(const std::vector<std::vector<std::int64_t>>& counts, const std::vector<std::string>& names,
                                 const std::string& title) {
  HeatMap h;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    std::int64_t total = 0;
    for (std::int64_t v : counts[i]) total += v;
    for (std::int64_t v : counts[i]) h.values.push_back(total > 0 ? static_cast<float>(v) / static_cast<float>(total) : 0.0f);
    char recall[32];
    std::snprintf(recall, sizeof recall, " (%.1f%%)", total > 0 ? 100.0 * static_cast<double>(counts[i][i]) / static_cast<double>(total) : 0.0);
    const std::string name = i < names.size() ? names[i] : std::to_string(i);
    h.row_labels.push_back(name + recall);
    h.col_labels.push_back(name);
  }
  return heat_maps_svg({h}, {.title = "confusion matrix — " + title, .row_axis = "true class (recall)",
                             .col_axis = "predicted class", .columns = 1});
}

}  // namespace tfm::train_detail
