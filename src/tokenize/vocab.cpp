// Char- and word-level vocabularies, built the way d2l's Vocab does: count tokens, keep
// those seen at least min_freq times, reserved tokens first, then by descending frequency
// (ties: first appearance in the corpus, as Python's stable sort over a Counter gives).
#include <algorithm>

#include "tfm/error.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer_impl.h"
#include "tokenize/unicode.h"

namespace tfm::tok {

// Reserved + extra specials as added tokens with ids 0..; shared with the BPE trainer.
void add_reserved(Tokenizer::Impl& impl, const TokenizerTrainOptions& opts) {
  for (const auto* list : {&opts.reserved, &opts.extra_specials}) {
    for (const auto& s : *list) {
      TFM_CHECK(!s.empty(), "tokenizer train", "empty special token");
      const bool dup = std::find(impl.tokens.begin(), impl.tokens.end(), s) != impl.tokens.end();
      TFM_CHECK(!dup, "tokenizer train", "special token '", s, "' given twice");
      const auto id = static_cast<std::int32_t>(impl.tokens.size());
      impl.tokens.push_back(s);
      impl.added.push_back({s, id, true});
    }
  }
}

Tokenizer::Impl train_vocab(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts) {
  const char* where = "tokenizer train";
  TFM_CHECK(opts.kind != TokenizerKind::bpe, where, "internal: train_vocab on bpe");
  TFM_CHECK(opts.vocab_size >= 0 && opts.min_freq >= 0, where, "vocab_size and min_freq must be >= 0");
  Tokenizer::Impl impl;
  impl.kind = opts.kind;
  add_reserved(impl, opts);

  struct Count {
    std::int64_t freq = 0, first = 0;
  };
  TokenIdMap index;  // token -> slot in counts
  std::vector<std::pair<std::string, Count>> counts;
  std::vector<Span> spans;
  std::int64_t seen = 0;
  for (const auto& text : corpus) {
    spans.clear();
    if (opts.kind == TokenizerKind::char_level)
      codepoint_split(text, spans);
    else
      whitespace_split(text, spans);
    for (const Span& s : spans) {
      const std::string_view t(text.data() + s.begin, s.end - s.begin);
      auto it = index.find(t);
      if (it == index.end()) {
        // Tokens with invalid UTF-8 cannot be written to tokenizer.json: they stay <unk>.
        if (!unicode::is_valid_utf8(std::string(t))) continue;
        it = index.emplace(std::string(t), static_cast<std::int32_t>(counts.size())).first;
        counts.push_back({std::string(t), Count{0, seen}});
      }
      ++counts[it->second].second.freq;
      ++seen;
    }
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second.freq > b.second.freq; });
  for (const auto& [token, c] : counts) {
    if (opts.vocab_size > 0 && static_cast<std::int64_t>(impl.tokens.size()) >= opts.vocab_size) break;
    if (c.freq < opts.min_freq) break;
    if (std::find(impl.tokens.begin(), impl.tokens.begin() + static_cast<std::ptrdiff_t>(impl.added.size()), token) !=
        impl.tokens.begin() + static_cast<std::ptrdiff_t>(impl.added.size()))
      continue;  // a reserved token seen in the corpus keeps its reserved id
    impl.tokens.push_back(token);
  }
  impl.finalize(where);
  return impl;
}

}  // namespace tfm::tok
