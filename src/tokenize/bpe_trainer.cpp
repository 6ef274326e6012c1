// Byte-level BPE training. Words = GPT-2 pre-tokens of every corpus line, counted once.
// Each step merges the most frequent adjacent pair (ties: the smallest (left id, right id),
// so training is deterministic and independent of hash order and thread count). Pair
// counts are updated incrementally: only the words containing the merged pair are
// rescanned, and a max-heap with lazy invalidation finds the next pair.
#include <algorithm>
#include <queue>

#include "tfm/error.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm::tok {

void add_reserved(Tokenizer::Impl& impl, const TokenizerTrainOptions& opts);

namespace {

std::uint64_t pack(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

struct Word {
  std::vector<std::int32_t> syms;
  std::int64_t count = 0;
};

struct HeapEntry {
  std::int64_t count;
  std::uint64_t pair;
  bool operator<(const HeapEntry& o) const {  // max count first, then smallest pair
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

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

  // Pair counts and where each pair occurs.
  std::unordered_map<std::uint64_t, std::int64_t> pair_count;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> pair_words;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const auto& s = words[w].syms;
    for (std::size_t k = 0; k + 1 < s.size(); ++k) {
      const std::uint64_t p = pack(s[k], s[k + 1]);
      pair_count[p] += words[w].count;
      auto& v = pair_words[p];
      if (v.empty() || v.back() != static_cast<std::int32_t>(w)) v.push_back(static_cast<std::int32_t>(w));
    }
  }
  std::priority_queue<HeapEntry> heap;
  for (const auto& [p, c] : pair_count) heap.push({c, p});

  const std::int64_t min_count = std::max<std::int64_t>(1, opts.min_freq);
  std::vector<std::int32_t> merged_syms, merge_result;
  // Text -> id of every token so far: two merges may spell the same string ("ab"+"c",
  // "a"+"bc"); the second then reuses the first's id. A merge that would spell an added
  // token is never made (the id would be special).
  TokenIdMap text_ids;
  for (std::size_t id = 0; id < impl.tokens.size(); ++id) text_ids.emplace(impl.tokens[id], static_cast<std::int32_t>(id));
  std::unordered_map<std::uint64_t, bool> banned;
  while (static_cast<std::int64_t>(impl.tokens.size()) < opts.vocab_size && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    auto pc = pair_count.find(top.pair);
    const std::int64_t current = pc == pair_count.end() ? 0 : pc->second;
    if (current != top.count) {  // stale entry: requeue with the current count
      if (current > 0) heap.push({current, top.pair});
      continue;
    }
    if (current < min_count) break;
    const auto a = static_cast<std::int32_t>(top.pair >> 32), b = static_cast<std::int32_t>(top.pair & 0xFFFFFFFFu);
    if (banned.count(top.pair)) continue;
    std::string text = impl.tokens[a] + impl.tokens[b];
    auto existing = text_ids.find(text);
    std::int32_t new_id;
    if (existing == text_ids.end()) {
      new_id = static_cast<std::int32_t>(impl.tokens.size());
      text_ids.emplace(text, new_id);
      impl.tokens.push_back(std::move(text));
      impl.token_bytes.push_back(impl.token_bytes[a] + impl.token_bytes[b]);
    } else if (static_cast<std::size_t>(existing->second) < impl.added.size()) {
      banned[top.pair] = true;
      continue;
    } else {
      new_id = existing->second;
    }
    impl.bpe.merge_list.emplace_back(a, b);
    merge_result.push_back(new_id);

    std::vector<std::int32_t> where_list = std::move(pair_words[top.pair]);
    pair_words.erase(top.pair);
    std::vector<std::uint64_t> touched;
    for (std::int32_t w : where_list) {
      Word& word = words[w];
      auto& s = word.syms;
      bool has = false;
      for (std::size_t k = 0; k + 1 < s.size() && !has; ++k) has = s[k] == a && s[k + 1] == b;
      if (!has) continue;  // already rewritten by an earlier merge
      for (std::size_t k = 0; k + 1 < s.size(); ++k) pair_count[pack(s[k], s[k + 1])] -= word.count;
      merged_syms.clear();
      for (std::size_t k = 0; k < s.size();) {
        if (k + 1 < s.size() && s[k] == a && s[k + 1] == b) {
          merged_syms.push_back(new_id);
          k += 2;
        } else {
          merged_syms.push_back(s[k++]);
        }
      }
      s.swap(merged_syms);
      for (std::size_t k = 0; k + 1 < s.size(); ++k) {
        const std::uint64_t p = pack(s[k], s[k + 1]);
        pair_count[p] += word.count;
        if (s[k] == new_id || s[k + 1] == new_id) {
          auto& v = pair_words[p];
          if (v.empty() || v.back() != w) v.push_back(w);
          touched.push_back(p);
        }
      }
    }
    pair_count.erase(top.pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (std::uint64_t p : touched) heap.push({pair_count[p], p});
  }

  impl.bpe.merges.reserve(impl.bpe.merge_list.size());
  for (std::size_t r = 0; r < impl.bpe.merge_list.size(); ++r) {
    const auto [a, b] = impl.bpe.merge_list[r];
    impl.bpe.merges.insert(a, b, {static_cast<std::int32_t>(r), merge_result[r]});
  }
  impl.finalize(where);
  return impl;
}

}  // namespace tfm::tok
