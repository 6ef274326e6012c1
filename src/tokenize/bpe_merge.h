// Applying BPE merges to one word: lowest rank first, leftmost first among equal ranks (what
// HF `tokenizers` and GPT-2's reference loop both produce). Shared by the GPT-2 fast path
// (bpe_model.cpp: symbols are bare ids) and the tokenizer.json pipeline's model
// (model_bpe.cpp: symbols also carry the byte length they cover, for offsets), so the symbol
// type is a parameter: `symbol_id(s)` reads its id and `join(l, r, id)` makes the merged one.
#pragma once

#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "tokenize/bpe_model.h"

namespace tfm::tok {

inline std::int32_t symbol_id(std::int32_t s) { return s; }
inline std::int32_t join(std::int32_t, std::int32_t, std::int32_t id) { return id; }

constexpr std::int32_t kNoMergeRank = 0x7FFFFFFF;

// Words of up to kSmallWord symbols: a rank per adjacent pair kept in an array, the lowest
// found by a scan (fewer cache misses than a heap for the usual 2-10 symbols).
constexpr std::size_t kSmallWord = 128;

template <class S>
void merge_small_word(const PairMap& merges, std::vector<S>& syms) {
  std::int32_t ranks[kSmallWord];
  std::size_t n = syms.size();
  auto rank_of = [&](std::size_t k) {
    const PairMap::Value v = merges.find(symbol_id(syms[k]), symbol_id(syms[k + 1]));
    return v.rank < 0 ? kNoMergeRank : v.rank;
  };
  for (std::size_t k = 0; k + 1 < n; ++k) ranks[k] = rank_of(k);
  while (n > 1) {
    std::size_t best = 0;
    for (std::size_t k = 1; k + 1 < n; ++k)
      if (ranks[k] < ranks[best]) best = k;
    if (ranks[best] == kNoMergeRank) break;
    syms[best] = join(syms[best], syms[best + 1], merges.find(symbol_id(syms[best]), symbol_id(syms[best + 1])).id);
    for (std::size_t k = best + 1; k + 1 < n; ++k) syms[k] = syms[k + 1];
    for (std::size_t k = best + 1; k + 2 < n; ++k) ranks[k] = ranks[k + 1];
    --n;
    syms.resize(n);
    if (best + 1 < n) ranks[best] = rank_of(best);
    if (best > 0) ranks[best - 1] = rank_of(best - 1);
  }
}

// Longer words: a linked list of symbols and a min-heap of (rank, position), stale entries
// skipped when popped; O(n log n) instead of the scan's O(n^2).
template <class S>
void merge_large_word(const PairMap& merges, std::vector<S>& syms) {
  const std::size_t n = syms.size();
  std::vector<std::int32_t> prev(n), next(n);
  for (std::size_t k = 0; k < n; ++k) {
    prev[k] = static_cast<std::int32_t>(k) - 1;
    next[k] = k + 1 < n ? static_cast<std::int32_t>(k + 1) : -1;
  }
  struct Entry {
    std::int32_t rank, pos, left, right;
    bool operator>(const Entry& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push = [&](std::int32_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    const std::int32_t l = symbol_id(syms[pos]), r = symbol_id(syms[next[pos]]);
    const PairMap::Value v = merges.find(l, r);
    if (v.rank >= 0) heap.push({v.rank, pos, l, r});
  };
  for (std::size_t k = 0; k + 1 < n; ++k) push(static_cast<std::int32_t>(k));
  std::vector<bool> alive(n, true);
  while (!heap.empty()) {
    const Entry e = heap.top();
    heap.pop();
    const std::int32_t r = next[e.pos];
    if (!alive[e.pos] || r < 0 || symbol_id(syms[e.pos]) != e.left || symbol_id(syms[r]) != e.right) continue;  // stale
    syms[e.pos] = join(syms[e.pos], syms[r], merges.find(e.left, e.right).id);
    alive[r] = false;
    next[e.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = e.pos;
    push(prev[e.pos]);
    push(e.pos);
  }
  std::size_t w = 0;
  for (std::int32_t k = 0; k >= 0; k = next[k]) syms[w++] = syms[k];
  syms.resize(w);
}

template <class S>
void merge_word(const PairMap& merges, std::vector<S>& syms) {
  if (syms.size() <= kSmallWord)
    merge_small_word(merges, syms);
  else
    merge_large_word(merges, syms);
}

}  // namespace tfm::tok
