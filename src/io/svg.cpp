#include "io/svg.h"

#include <cstdio>

namespace tfm::svg {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    if (ch == '&') out += "&amp;";
    else if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '"') out += "&quot;";
    else if (ch == '\'') out += "&apos;";
    else out += ch;
  }
  return out;
}

std::string open(double width, double height, double font_size) {
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"sans-serif\" font-size=\"" +
         num(font_size) + "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
}

std::string close() { return "</svg>\n"; }

std::string text(double x, double y, std::string_view content, std::string_view extra) {
  std::string t = "<text x=\"";
  t += num(x);
  t += "\" y=\"";
  t += num(y);
  t += '"';
  if (!extra.empty()) t.append(" ").append(extra);
  t += '>';
  t += escape(content);
  t += "</text>\n";
  return t;
}

}  // namespace tfm::svg
