// Name tables of the ModelConfig enums (shared by the parser and the writer).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfm/error.h"
#include "tfm/model_config.h"

namespace tfm {

const std::vector<std::pair<Architecture, const char*>>& enum_names(Architecture);
const std::vector<std::pair<NormKind, const char*>>& enum_names(NormKind);
const std::vector<std::pair<NormPlacement, const char*>>& enum_names(NormPlacement);
const std::vector<std::pair<FfnActivation, const char*>>& enum_names(FfnActivation);
const std::vector<std::pair<PositionKind, const char*>>& enum_names(PositionKind);
const std::vector<std::pair<RopePairing, const char*>>& enum_names(RopePairing);
const std::vector<std::pair<HeadKind, const char*>>& enum_names(HeadKind);
const std::vector<std::pair<Pooling, const char*>>& enum_names(Pooling);

// Parse `text` as enum E; the error names the key and lists the allowed values.
template <class E>
E parse_enum(const std::string& text, const std::string& key, const std::string& where) {
  std::string allowed;
  for (const auto& [e, n] : enum_names(E{})) {
    if (text == n) return e;
    allowed += allowed.empty() ? n : std::string(", ") + n;
  }
  fail(where, "key '", key, "': unknown value '", text, "' (allowed: ", allowed, ")");
}

}  // namespace tfm
