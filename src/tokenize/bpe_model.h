// Byte-level BPE: GPT-2's byte<->unicode table, the merge table, and word encoding.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::tok {

// GPT-2's bytes_to_unicode(): every byte maps to a printable code point, so byte-level
// tokens can be written as text in encoder.json / tokenizer.json.
const std::array<std::uint32_t, 256>& byte_to_unicode();
// Byte b in the table's order: GPT-2's first 256 token ids follow this order.
const std::array<std::uint8_t, 256>& bytes_in_gpt2_order();
std::string bytes_to_token_text(std::string_view bytes);  // raw bytes -> "Ġhello" form
// Inverse; false when text has a char outside the table (then out is unspecified).
bool token_text_to_bytes(std::string_view text, std::string& out);

// Open-addressing map (left id, right id) -> (rank, merged id). Merges are looked up in
// the innermost loop of encoding, so no std::unordered_map node chasing there.
class PairMap {
 public:
  struct Value {
    std::int32_t rank = -1, id = -1;
  };
  void reserve(std::size_t n);
  bool insert(std::int32_t a, std::int32_t b, Value v);  // false when the pair exists
  void assign(std::int32_t a, std::int32_t b, Value v);  // insert or overwrite
  Value find(std::int32_t a, std::int32_t b) const {
    if (keys_.empty()) return {};
    const std::uint64_t key = pack(a, b);
    for (std::size_t h = hash(key) & mask_;; h = (h + 1) & mask_) {
      if (keys_[h] == key) return vals_[h];
      if (keys_[h] == kEmpty) return {};
    }
  }
  std::size_t size() const { return size_; }

 private:
  static constexpr std::uint64_t kEmpty = ~0ull;
  static std::uint64_t pack(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  static std::uint64_t hash(std::uint64_t k) {
    k ^= k >> 29;
    k *= 0xbf58476d1ce4e5b9ull;
    return k ^ (k >> 32);
  }
  void grow();
  std::vector<std::uint64_t> keys_;
  std::vector<Value> vals_;
  std::size_t mask_ = 0, size_ = 0;
};

struct BpeModel {
  std::array<std::int32_t, 256> byte_id{};  // id of each single-byte token, -1 if none
  PairMap merges;                           // rank = position in the merge list
  std::vector<std::pair<std::int32_t, std::int32_t>> merge_list;  // in rank order
  std::uint64_t serial = 0;                 // unique per model: keys the per-thread cache

  // Appends the ids of one pre-token (raw bytes). Fails when a byte has no token.
  void encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const;
  // The same through a per-thread cache of recent words.
  void encode_word_cached(std::string_view bytes, std::vector<std::int32_t>& out) const;
  // GPT-2's reference algorithm (repeatedly merge every occurrence of the lowest-ranked
  // pair), kept as the naive twin of encode_word for the tests.
  void encode_word_naive(std::string_view bytes, std::vector<std::int32_t>& out) const;
};

std::uint64_t next_model_serial();

}  // namespace tfm::tok
