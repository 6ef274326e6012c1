// The bookkeeping both merge trainers (BPE and WordPiece) share: the distinct words as symbol
// sequences with their counts, every adjacent pair's count and the words it occurs in, and a
// max-heap of pairs whose stale entries are skipped lazily. The trainers differ only in how a
// merged symbol is named and when a merge is refused, so they keep that and call this.
#pragma once

#include <algorithm>
#include <cstdint>
#include <queue>
#include <unordered_map>
#include <vector>

namespace tfm::tok {

class PairMerges {
 public:
  struct Word {
    std::vector<std::int32_t> syms;
    std::int64_t count = 0;
  };

  explicit PairMerges(std::vector<Word> words) : words_(std::move(words)) {
    for (std::size_t w = 0; w < words_.size(); ++w) {
      const auto& s = words_[w].syms;
      for (std::size_t k = 0; k + 1 < s.size(); ++k) {
        const std::uint64_t p = pack(s[k], s[k + 1]);
        pair_count_[p] += words_[w].count;
        auto& v = pair_words_[p];
        if (v.empty() || v.back() != static_cast<std::int32_t>(w)) v.push_back(static_cast<std::int32_t>(w));
      }
    }
    for (const auto& [p, c] : pair_count_) heap_.push({c, p});
  }

  // Takes the most frequent pair (ties: the smallest packed pair, so runs are reproducible)
  // off the heap. False when no pair is left.
  bool next(std::int32_t& a, std::int32_t& b, std::int64_t& count) {
    while (!heap_.empty()) {
      const Entry top = heap_.top();
      heap_.pop();
      const auto it = pair_count_.find(top.pair);
      const std::int64_t current = it == pair_count_.end() ? 0 : it->second;
      if (current != top.count) {  // stale: requeue with the current count
        if (current > 0) heap_.push({current, top.pair});
        continue;
      }
      a = static_cast<std::int32_t>(top.pair >> 32);
      b = static_cast<std::int32_t>(top.pair & 0xFFFFFFFFu);
      count = current;
      return true;
    }
    return false;
  }

  // Rewrites every word holding a b as new_id, left to right, and updates the pair counts; the
  // pairs the new symbol forms go back on the heap.
  void merge(std::int32_t a, std::int32_t b, std::int32_t new_id) {
    const std::uint64_t pair = pack(a, b);
    std::vector<std::int32_t> where = std::move(pair_words_[pair]);
    pair_words_.erase(pair);
    std::vector<std::uint64_t> touched;
    for (const std::int32_t w : where) {
      Word& word = words_[static_cast<std::size_t>(w)];
      auto& s = word.syms;
      bool has = false;
      for (std::size_t k = 0; k + 1 < s.size() && !has; ++k) has = s[k] == a && s[k + 1] == b;
      if (!has) continue;  // already rewritten by an earlier merge
      for (std::size_t k = 0; k + 1 < s.size(); ++k) pair_count_[pack(s[k], s[k + 1])] -= word.count;
      merged_.clear();
      for (std::size_t k = 0; k < s.size();) {
        if (k + 1 < s.size() && s[k] == a && s[k + 1] == b) {
          merged_.push_back(new_id);
          k += 2;
        } else {
          merged_.push_back(s[k++]);
        }
      }
      s.swap(merged_);
      for (std::size_t k = 0; k + 1 < s.size(); ++k) {
        const std::uint64_t p = pack(s[k], s[k + 1]);
        pair_count_[p] += word.count;
        if (s[k] == new_id || s[k + 1] == new_id) {
          auto& v = pair_words_[p];
          if (v.empty() || v.back() != w) v.push_back(w);
          touched.push_back(p);
        }
      }
    }
    pair_count_.erase(pair);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const std::uint64_t p : touched) heap_.push({pair_count_[p], p});
  }

  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }

 private:
  struct Entry {
    std::int64_t count;
    std::uint64_t pair;
    bool operator<(const Entry& o) const { return count != o.count ? count < o.count : pair > o.pair; }
  };
  std::vector<Word> words_;
  std::unordered_map<std::uint64_t, std::int64_t> pair_count_;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> pair_words_;
  std::priority_queue<Entry> heap_;
  std::vector<std::int32_t> merged_;
};

}  // namespace tfm::tok
