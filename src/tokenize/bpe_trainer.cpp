// Byte-level BPE training. Words = GPT-2 pre-tokens of every corpus line, counted once.
// Each step merges the most frequent adjacent pair (ties: the smallest (left id, right id),
// so training is deterministic and independent of hash order and thread count). Pair
// counts are updated incrementally: only the words containing the merged pair are
// rescanned, and a max-heap with lazy invalidation finds the next pair.
#include <algorithm>

#include "tfm/error.h"
#include "tokenize/pair_merges.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm::tok {

void add_reserved(Tokenizer::Impl& impl, const TokenizerTrainOptions& opts);

namespace {
using Word = PairMerges::Word;
}  // namespace

Tokenizer::Impl train_bpe(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts) {
  const char* where = "tokenizer train";
  Tokenizer::Impl impl;
  impl.kind = TokenizerKind::bpe;
  impl.isolate_cjk = opts.isolate_cjk;
  add_reserved(impl, opts);
  impl.token_bytes = impl.tokens;  // added tokens decode to themselves
  const std::int64_t base = static_cast<std::int64_t>(impl.tokens.size()) + 256;
  TFM_CHECK(opts.vocab_size >= base, where, "bpe vocab_size ", opts.vocab_size, " must be at least ", base,
            " (reserved tokens + 256 bytes)");
  std::array<std::int32_t, 256> byte_id{};
  for (std::uint8_t b : bytes_in_gpt2_order()) {
    byte_id[b] = static_cast<std::int32_t>(impl.tokens.size());
    const std::string raw(1, static_cast<char>(b));
    impl.tokens.push_back(bytes_to_token_text(raw));
    impl.token_bytes.push_back(raw);
  }

  // Count distinct pre-tokens.
  TokenIdMap word_index;
  std::vector<Word> words;
  std::vector<Span> spans;
  for (const auto& text : corpus) {
    spans.clear();
    if (opts.isolate_cjk)
      cjk_isolated_gpt2_split(text, spans);
    else
      gpt2_split(text, spans);
    for (const Span& s : spans) {
      const std::string_view w(text.data() + s.begin, s.end - s.begin);
      auto it = word_index.find(w);
      if (it == word_index.end()) {
        it = word_index.emplace(std::string(w), static_cast<std::int32_t>(words.size())).first;
        Word nw;
        for (unsigned char c : w) nw.syms.push_back(byte_id[c]);
        words.push_back(std::move(nw));
      }
      ++words[it->second].count;
    }
  }

  PairMerges merges(std::move(words));
  const std::int64_t min_count = std::max<std::int64_t>(1, opts.min_freq);
  std::vector<std::int32_t> merge_result;
  // Text -> id of every token so far: two merges may spell the same string ("ab"+"c",
  // "a"+"bc"); the second then reuses the first's id. A merge that would spell an added
  // token is never made (the id would be special).
  TokenIdMap text_ids;
  for (std::size_t id = 0; id < impl.tokens.size(); ++id) text_ids.emplace(impl.tokens[id], static_cast<std::int32_t>(id));
  std::unordered_map<std::uint64_t, bool> banned;
  std::int32_t a = 0, b = 0;
  std::int64_t count = 0;
  while (static_cast<std::int64_t>(impl.tokens.size()) < opts.vocab_size && merges.next(a, b, count)) {
    if (count < min_count) break;
    if (banned.count(PairMerges::pack(a, b))) continue;
    std::string text = impl.tokens[a] + impl.tokens[b];
    auto existing = text_ids.find(text);
    std::int32_t new_id;
    if (existing == text_ids.end()) {
      new_id = static_cast<std::int32_t>(impl.tokens.size());
      text_ids.emplace(text, new_id);
      impl.tokens.push_back(std::move(text));
      impl.token_bytes.push_back(impl.token_bytes[a] + impl.token_bytes[b]);
    } else if (static_cast<std::size_t>(existing->second) < impl.added.size()) {
      banned[PairMerges::pack(a, b)] = true;
      continue;
    } else {
      new_id = existing->second;
    }
    impl.bpe.merge_list.emplace_back(a, b);
    merge_result.push_back(new_id);

    merges.merge(a, b, new_id);
  }

  impl.bpe.merges.reserve(impl.bpe.merge_list.size());
  for (std::size_t r = 0; r < impl.bpe.merge_list.size(); ++r) {
    const auto [left, right] = impl.bpe.merge_list[r];
    impl.bpe.merges.insert(left, right, {static_cast<std::int32_t>(r), merge_result[r]});
  }
  impl.finalize(where);
  return impl;
}

}  // namespace tfm::tok
