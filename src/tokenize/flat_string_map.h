// String -> id lookup for vocabularies: open addressing over (hash, id) slots, keys compared
// against the caller's id -> string table. Vocabulary lookups are the innermost step of
// encoding (a word, a char, a byte-level word); std::unordered_map's node chasing and
// modulo cost more there than the hash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::tok {

class FlatStringMap {
 public:
  // keys[id] is the key of id; empty keys are skipped; a repeated key keeps its first id.
  void build(const std::vector<std::string>* keys) {
    keys_ = keys;
    std::size_t cap = 16;
    while (cap < 2 * keys->size() + 2) cap *= 2;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    for (std::size_t id = 0; id < keys->size(); ++id) {
      const std::string& k = (*keys)[id];
      if (k.empty() || find(k) >= 0) continue;
      const std::uint32_t h = hash(k);
      std::size_t s = h & mask_;
      while (slots_[s].id >= 0) s = (s + 1) & mask_;
      slots_[s] = {h, static_cast<std::int32_t>(id)};
    }
  }
  std::int32_t find(std::string_view k) const {
    if (slots_.empty()) return -1;
    const std::uint32_t h = hash(k);
    for (std::size_t s = h & mask_;; s = (s + 1) & mask_) {
      const Slot& slot = slots_[s];
      if (slot.id < 0) return -1;
      if (slot.hash == h && (*keys_)[static_cast<std::size_t>(slot.id)] == k) return slot.id;
    }
  }

 private:
  static std::uint32_t hash(std::string_view s) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    return static_cast<std::uint32_t>(h ^ (h >> 32));
  }
  struct Slot {
    std::uint32_t hash;
    std::int32_t id;
  };
  const std::vector<std::string>* keys_ = nullptr;
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
};

}  // namespace tfm::tok
