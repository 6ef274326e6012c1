// Building a tokenizer from an in-memory tokenizer.json document, for loaders that assemble
// one from other metadata (GGUF's tokenizer.ggml.* keys, converters).
//
//   nlohmann::json doc = ...;  // {"model": {"type": "BPE", "vocab": ..., "merges": ...}, ...}
//   tfm::Tokenizer tok = tfm::tokenizer_from_json(doc);
#pragma once

#include <nlohmann/json.hpp>

#include "tfm/tokenizer.h"

namespace tfm {

Tokenizer tokenizer_from_json(const nlohmann::json& doc, const TokenizerConfig& config = {});

}  // namespace tfm
