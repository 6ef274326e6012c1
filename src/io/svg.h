// Small pieces shared by the hand-written SVG charts (training curves, attention heat maps).
#pragma once

#include <string>
#include <string_view>

namespace tfm::svg {

// A coordinate or value, short: "%.4g".
std::string num(double v);
// Text content or attribute value with & < > " ' escaped.
std::string escape(std::string_view s);
// The document's opening tag (white background) and closing tag.
std::string open(double width, double height, double font_size = 12);
std::string close();
// A text element; extra holds further attributes (e.g. text-anchor="end").
std::string text(double x, double y, std::string_view content, std::string_view extra = "");

}  // namespace tfm::svg
