// Internal: a byte-level BPE Tokenizer as tokenizer.ggml.* metadata (gguf_tokenizer.cpp;
// the reading direction is the public gguf_tokenizer_json in tfm/gguf_model.h).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tfm/gguf.h"
#include "tfm/tokenizer.h"

namespace tfm {

// vocab_size > the tokenizer's: padded with UNUSED "[PAD<id>]" tokens up to it.
void tokenizer_to_gguf(const Tokenizer& tok, std::vector<std::pair<std::string, GgufValue>>& meta,
                       std::int64_t vocab_size = 0);

}  // namespace tfm
