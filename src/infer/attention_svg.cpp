// heat_maps_svg: panels of coloured cells with rotated column labels and one colour bar.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/svg.h"
#include "tfm/error.h"
#include "tfm/plot.h"

namespace tfm {
namespace {

using svg::num;

// Matplotlib's "Blues" at five stops: white at 0, dark blue at 1.
std::string colour(double t) {
  static const double stops[5][3] = {{255, 255, 255}, {198, 219, 239}, {107, 174, 214}, {33, 113, 181}, {8, 48, 107}};
  t = std::clamp(t, 0.0, 1.0) * 4.0;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  char buf[8];
  int c[3];
  for (int k = 0; k < 3; ++k) c[k] = static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c[0], c[1], c[2]);
  return buf;
}

// Length of a UTF-8 string in code points (label widths).
std::size_t glyphs(const std::string& s) {
  std::size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

// At most 12 code points, with an ellipsis when cut.
std::string clip_label(const std::string& s) {
  if (glyphs(s) <= 12) return s;
  std::size_t n = 0, i = 0;
  for (; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80 && n++ == 11) break;
  return s.substr(0, i) + "\u2026";
}

}  // namespace

std::string visible_token(std::string_view t) {
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    const auto c = static_cast<unsigned char>(t[i]);
    std::size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool valid = len > 0 && i + len <= t.size() && !(len == 2 && c < 0xC2);
    for (std::size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(t[i + k]) & 0xC0) == 0x80;
    if (!valid) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
      ++i;
      continue;
    }
    if (c == ' ') out += "\u2423";
    else if (c == '\n') out += "\u23CE";
    else if (c == '\t') out += "\u21E5";
    else if (c == '\r') out += "\u240D";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out.append(t.substr(i, len));
    }
    i += len;
  }
  return out;
}

std::string heat_maps_svg(const std::vector<HeatMap>& maps, const HeatMapStyle& style) {
  TFM_CHECK(!maps.empty(), "heat map", "no maps to draw");
  std::size_t nr = 1, nc = 1, row_chars = 1, col_chars = 1;
  double vmax = 0;
  for (const auto& m : maps) {
    TFM_CHECK(m.values.size() == m.row_labels.size() * m.col_labels.size(), "heat map", "'", m.title, "' has ",
              m.values.size(), " values for ", m.row_labels.size(), " x ", m.col_labels.size(), " labels");
    nr = std::max(nr, m.row_labels.size());
    nc = std::max(nc, m.col_labels.size());
    for (const auto& l : m.row_labels) row_chars = std::max(row_chars, glyphs(clip_label(l)));
    for (const auto& l : m.col_labels) col_chars = std::max(col_chars, glyphs(clip_label(l)));
    for (float v : m.values)
      if (std::isfinite(v)) vmax = std::max(vmax, static_cast<double>(v));
  }
  if (vmax <= 0) vmax = 1;
  const auto n = static_cast<std::int64_t>(maps.size());
  const std::int64_t cols = style.columns > 0 ? std::min(style.columns, n)
                                              : static_cast<std::int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  const std::int64_t rows = (n + cols - 1) / cols;
  // One panel's grid is about 720 px alone, smaller in a grid; cells stay 3..28 px.
  const double target = cols == 1 ? 720.0 : std::max(240.0, 1100.0 / static_cast<double>(cols));
  const double cell = std::clamp(target / static_cast<double>(std::max(nr, nc)), 3.0, 28.0);
  const double font = std::min(12.0, cell * 0.8);
  const bool labels = font >= 4.0;
  const double row_margin = labels ? static_cast<double>(row_chars) * font * 0.62 + 8 : 4;
  const double col_margin = labels ? static_cast<double>(col_chars) * font * 0.62 + 8 : 4;
  const double panel_title = 18, gap = 20;
  const double panel_w = row_margin + static_cast<double>(nc) * cell, panel_h = panel_title + col_margin + static_cast<double>(nr) * cell;
  const double top = style.title.empty() ? 10 : 34, left = 24, bar_w = 14, bar_area = 70;
  const double width = left + static_cast<double>(cols) * (panel_w + gap) + bar_area;
  const double height = top + static_cast<double>(rows) * (panel_h + gap) + 20;

  std::string out = svg::open(width, height);
  if (!style.title.empty()) out += svg::text(width / 2, 22, style.title, "text-anchor=\"middle\" font-size=\"15\"");
  // Axis names, once: the row axis down the left edge, the column axis at the bottom.
  out += "<text transform=\"translate(14," + num(top + panel_h / 2) + ") rotate(-90)\" text-anchor=\"middle\" fill=\"#555\">" +
         svg::escape(style.row_axis) + " \u2193</text>\n";
  out += svg::text(left + panel_w / 2, height - 8, style.col_axis + " \u2192", "text-anchor=\"middle\" fill=\"#555\"");
  for (std::int64_t p = 0; p < n; ++p) {
    const HeatMap& m = maps[static_cast<std::size_t>(p)];
    const double x0 = left + static_cast<double>(p % cols) * (panel_w + gap);
    const double y0 = top + static_cast<double>(p / cols) * (panel_h + gap);
    const double gx = x0 + row_margin, gy = y0 + panel_title + col_margin;  // the grid's corner
    const std::size_t r = m.row_labels.size(), c = m.col_labels.size();
    out += "<g class=\"panel\">\n";
    out += svg::text(gx + static_cast<double>(c) * cell / 2, y0 + 13, m.title, "text-anchor=\"middle\" font-size=\"13\"");
    // Cells in grid units (one cell = 1 x 1, scaled by the group) keep the file small, and
    // exact zeros (masked keys: half of a causal map) are the white background, not drawn.
    out += "<g class=\"cells\" shape-rendering=\"crispEdges\" transform=\"translate(" + num(gx) + "," + num(gy) +
           ") scale(" + num(cell) + ")\">\n";
    for (std::size_t i = 0; i < r; ++i)
      for (std::size_t j = 0; j < c; ++j) {
        const float v = m.values[i * c + j];
        if (v == 0.0f) continue;
        out += "<rect x=\"" + std::to_string(j) + "\" y=\"" + std::to_string(i) + "\" width=\"1\" height=\"1\" fill=\"" +
               colour(std::isfinite(v) ? v / vmax : 0.0) + "\"/>\n";
      }
    out += "</g>\n<rect x=\"" + num(gx) + "\" y=\"" + num(gy) + "\" width=\"" + num(static_cast<double>(c) * cell) +
           "\" height=\"" + num(static_cast<double>(r) * cell) + "\" fill=\"none\" stroke=\"#888\"/>\n";
    if (labels) {
      out += "<g class=\"labels\" font-size=\"" + num(font) + "\" fill=\"#222\">\n";
      for (std::size_t i = 0; i < r; ++i)
        out += svg::text(gx - 4, gy + (static_cast<double>(i) + 0.5) * cell + font * 0.35, clip_label(m.row_labels[i]),
                         "text-anchor=\"end\"");
      for (std::size_t j = 0; j < c; ++j) {  // rotated to read upwards, ending at the grid's top
        const double x = gx + (static_cast<double>(j) + 0.5) * cell + font * 0.35, y = gy - 4;
        out += "<text transform=\"translate(" + num(x) + "," + num(y) + ") rotate(-90)\">" +
               svg::escape(clip_label(m.col_labels[j])) + "</text>\n";
      }
      out += "</g>\n";
    }
    out += "</g>\n";
  }
  // The colour bar: 0 at the bottom, vmax at the top.
  const double bx = width - bar_area + 16, by = top + panel_title + col_margin;
  const double bh = std::max(60.0, std::min(static_cast<double>(nr) * cell, 300.0));
  out += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 4; ++k) out += "<stop offset=\"" + num(k / 4.0) + "\" stop-color=\"" + colour(k / 4.0) + "\"/>";
  out += "</linearGradient></defs>\n";
  out += "<rect x=\"" + num(bx) + "\" y=\"" + num(by) + "\" width=\"" + num(bar_w) + "\" height=\"" + num(bh) +
         "\" fill=\"url(#scale)\" stroke=\"#888\"/>\n";
  for (int k = 0; k <= 2; ++k) {
    const double y = by + bh * (1.0 - k / 2.0);
    out += svg::text(bx + bar_w + 4, y + 4, num(vmax * k / 2.0), "font-size=\"11\"");
  }
  out += svg::close();
  return out;
}

}  // namespace tfm
