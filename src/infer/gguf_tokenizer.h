// Internal: a byte-level BPE Tokenizer as tokenizer.ggml.* metadata (gguf_tokenizer.cpp;
// the reading direction is the public gguf_tokenizer_json in tfm/gguf_model.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfm/gguf.h"
#include "tfm/tokenizer.h"

namespace tfm {

void tokenizer_to_gguf(const Tokenizer& tok, std::vector<std::pair<std::string, GgufValue>>& meta);

}  // namespace tfm
