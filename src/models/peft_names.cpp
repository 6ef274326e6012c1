// Names of the bottleneck adapter's enums (peft.h), parsed where configs are read. Kept apart
// from model_peft.cpp so the config parsers build alone (the fuzz targets).
#include "tfm/error.h"
#include "tfm/peft.h"

namespace tfm {

const char* to_string(BottleneckPlacement v) { return v == BottleneckPlacement::houlsby ? "houlsby" : "pfeiffer"; }
const char* to_string(BottleneckActivation v) {
  switch (v) {
    case BottleneckActivation::relu: return "relu";
    case BottleneckActivation::gelu: return "gelu";
    case BottleneckActivation::swish: return "swish";
  }
  return "?";
}
BottleneckPlacement parse_bottleneck_placement(const std::string& s, const std::string& where) {
  if (s == "houlsby") return BottleneckPlacement::houlsby;
  if (s == "pfeiffer") return BottleneckPlacement::pfeiffer;
  fail(where, "placement '", s, "' is not one of: houlsby, pfeiffer");
}
BottleneckActivation parse_bottleneck_activation(const std::string& s, const std::string& where) {
  if (s == "relu") return BottleneckActivation::relu;
  if (s == "gelu") return BottleneckActivation::gelu;
  if (s == "swish" || s == "silu") return BottleneckActivation::swish;
  fail(where, "non_linearity '", s, "' is not one of: relu, gelu, swish");
}

}  // namespace tfm
