// Heat maps as SVG (attention weights: queries on rows, keys on columns), hand-written so the
// library needs no plotting dependency. One map, or a grid of panels sharing one colour scale
// (white -> dark blue, as in d2l's pictures) with a colour bar.
//
//   HeatMap h;  h.title = "head 0";  h.row_labels = toks;  h.col_labels = toks;  h.values = w;
//   std::string svg = heat_maps_svg({h}, {.title = "decoder self-attention, layer 3"});
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

struct HeatMap {
  std::string title;                                // above the panel
  std::vector<std::string> row_labels, col_labels;  // drawn as given (XML-escaped)
  std::vector<float> values;                        // rows x cols, row-major
};

struct HeatMapStyle {
  std::string title;                  // above the figure
  std::string row_axis = "query";     // axis names
  std::string col_axis = "key";
  std::int64_t columns = 0;           // panels per row; 0: about square
};

// The SVG document. Throws when a map's values do not match its labels.
std::string heat_maps_svg(const std::vector<HeatMap>& maps, const HeatMapStyle& style = {});

// A token as a readable label: space -> '␣', newline -> '⏎', tab -> '⇥', other control bytes
// and invalid UTF-8 as \xNN.
std::string visible_token(std::string_view token);

}  // namespace tfm
