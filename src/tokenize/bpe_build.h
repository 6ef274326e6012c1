// Shared by the tokenizer.json and GPT-2 file loaders (bpe_load.cpp).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tokenize/tokenizer_impl.h"

namespace tfm::tok {

// impl.tokens / impl.added from (token, id) entries + added tokens; checks that ids are
// valid, unique and contiguous.
void fill_vocab(Tokenizer::Impl& impl, const std::vector<std::pair<std::string, std::int64_t>>& entries,
                const std::vector<AddedToken>& added, const char* where);
// Byte-level BPE from a filled vocabulary and merges (left, right) in rank order.
void build_bpe(Tokenizer::Impl& impl, const std::vector<std::pair<std::string, std::string>>& merges,
               const char* where);

}  // namespace tfm::tok
