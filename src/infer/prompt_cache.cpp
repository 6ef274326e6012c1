#include "tfm/prompt_cache.h"

#include <algorithm>

namespace tfm {

std::uint64_t PromptCache::chain(std::uint64_t prev, std::span<const std::int32_t> tokens) {
  // FNV-1a over the previous key and the tokens, then a final avalanche (splitmix64's).
  std::uint64_t h = 1469598103934665603ull ^ prev;
  for (const std::int32_t t : tokens) h = (h ^ static_cast<std::uint32_t>(t)) * 1099511628211ull;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

const std::vector<unsigned char>* PromptCache::find(std::uint64_t key, std::uint64_t prev, std::span<const std::int32_t> tokens) {
  const auto it = entries_.find(key);
  if (it == entries_.end() || it->second.prev != prev || !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(), it->second.tokens.end()))
    return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  ++hits_;
  return &it->second.rows;
}

void PromptCache::put(std::uint64_t key, std::uint64_t prev, std::span<const std::int32_t> tokens, std::vector<unsigned char> rows) {
  const auto size = static_cast<std::int64_t>(rows.size() + tokens.size() * sizeof(std::int32_t));
  if (size > budget_ || entries_.count(key)) return;
  while (bytes_ + size > budget_ && !lru_.empty()) {
    const auto victim = entries_.find(lru_.back());
    bytes_ -= static_cast<std::int64_t>(victim->second.rows.size() + victim->second.tokens.size() * sizeof(std::int32_t));
    entries_.erase(victim);
    lru_.pop_back();
    ++evictions_;
  }
  lru_.push_front(key);
  entries_.emplace(key, Entry{prev, std::vector<std::int32_t>(tokens.begin(), tokens.end()), std::move(rows), lru_.begin()});
  bytes_ += size;
}

}  // namespace tfm
