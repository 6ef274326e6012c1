// Byte-level BPE encoding of one pre-token. Small words: tiktoken's scheme (an array of
// pair ranks, merge the leftmost lowest rank, O(n^2) with tiny constants). Long words
// (runs of punctuation or spaces can be megabytes): a min-heap over a linked list,
// O(n log n). Both merge the leftmost lowest-ranked pair first, which for a merge list
// where every merge's parts come from earlier merges equals GPT-2's merge-all-occurrences.
#include "tokenize/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <unordered_map>

#include "tfm/error.h"
#include "tokenize/bpe_merge.h"
#include "tokenize/unicode.h"

namespace tfm::tok {

const std::array<std::uint32_t, 256>& byte_to_unicode() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    std::array<bool, 256> printable{};
    for (int b = '!'; b <= '~'; ++b) printable[b] = true;
    for (int b = 0xA1; b <= 0xAC; ++b) printable[b] = true;
    for (int b = 0xAE; b <= 0xFF; ++b) printable[b] = true;
    std::uint32_t next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable[b] ? static_cast<std::uint32_t>(b) : next++;
    return t;
  }();
  return table;
}

const std::array<std::uint8_t, 256>& bytes_in_gpt2_order() {
  static const std::array<std::uint8_t, 256> order = [] {
    std::array<std::uint8_t, 256> o{};
    std::array<int, 256> idx{};
    for (int b = 0; b < 256; ++b) idx[b] = b;
    const auto& t = byte_to_unicode();
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return t[a] < t[b]; });
    for (int k = 0; k < 256; ++k) o[k] = static_cast<std::uint8_t>(idx[k]);
    return o;
  }();
  return order;
}

std::string bytes_to_token_text(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) unicode::append_utf8(out, byte_to_unicode()[b]);
  return out;
}

bool token_text_to_bytes(std::string_view text, std::string& out) {
  static const std::array<std::int16_t, 324> inverse = [] {
    std::array<std::int16_t, 324> inv{};
    inv.fill(-1);
    for (int b = 0; b < 256; ++b) inv[byte_to_unicode()[b]] = static_cast<std::int16_t>(b);
    return inv;
  }();
  out.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint32_t cp;
    i += unicode::decode_utf8(p + i, text.size() - i, cp);
    if (cp >= inverse.size() || inverse[cp] < 0) return false;
    out += static_cast<char>(inverse[cp]);
  }
  return true;
}

// ---- PairMap ---------------------------------------------------------------------------
void PairMap::reserve(std::size_t n) {
  std::size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  if (cap <= keys_.size()) return;
  std::vector<std::uint64_t> old_keys = std::move(keys_);
  std::vector<Value> old_vals = std::move(vals_);
  keys_.assign(cap, kEmpty);
  vals_.assign(cap, Value{});
  mask_ = cap - 1;
  for (std::size_t s = 0; s < old_keys.size(); ++s) {
    if (old_keys[s] == kEmpty) continue;
    std::size_t h = hash(old_keys[s]) & mask_;
    while (keys_[h] != kEmpty) h = (h + 1) & mask_;
    keys_[h] = old_keys[s];
    vals_[h] = old_vals[s];
  }
}

bool PairMap::insert(std::int32_t a, std::int32_t b, Value v) {
  if (2 * (size_ + 1) > keys_.size()) reserve(size_ + 1 + size_ / 2);
  const std::uint64_t key = pack(a, b);
  std::size_t h = hash(key) & mask_;
  for (;; h = (h + 1) & mask_) {
    if (keys_[h] == key) return false;
    if (keys_[h] == kEmpty) break;
  }
  keys_[h] = key;
  vals_[h] = v;
  ++size_;
  return true;
}

void PairMap::assign(std::int32_t a, std::int32_t b, Value v) {
  if (insert(a, b, v)) return;
  const std::uint64_t key = pack(a, b);
  for (std::size_t h = hash(key) & mask_;; h = (h + 1) & mask_) {
    if (keys_[h] == key) {
      vals_[h] = v;
      return;
    }
  }
}

// ---- encoding --------------------------------------------------------------------------
std::uint64_t next_model_serial() {
  static std::atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1);
}

static void initial_symbols(const BpeModel& m, std::string_view bytes, std::vector<std::int32_t>& syms) {
  syms.resize(bytes.size());
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    const std::int32_t id = m.byte_id[static_cast<unsigned char>(bytes[k])];
    TFM_CHECK(id >= 0, "tokenizer", "byte 0x", std::hex, int(static_cast<unsigned char>(bytes[k])),
              " has no token in this BPE vocabulary");
    syms[k] = id;
  }
}

void BpeModel::encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const {
  thread_local std::vector<std::int32_t> syms;
  initial_symbols(*this, bytes, syms);
  merge_word(merges, syms);
  out.insert(out.end(), syms.begin(), syms.end());
}

void BpeModel::encode_word_naive(std::string_view bytes, std::vector<std::int32_t>& out) const {
  std::vector<std::int32_t> word;
  initial_symbols(*this, bytes, word);
  while (word.size() > 1) {
    std::int32_t best = kNoMergeRank;
    for (std::size_t k = 0; k + 1 < word.size(); ++k) {
      const PairMap::Value v = merges.find(word[k], word[k + 1]);
      if (v.rank >= 0) best = std::min(best, v.rank);
    }
    if (best == kNoMergeRank) break;
    const auto [a, b] = merge_list[static_cast<std::size_t>(best)];
    const std::int32_t merged = merges.find(a, b).id;
    std::vector<std::int32_t> next;
    for (std::size_t k = 0; k < word.size();) {
      if (k + 1 < word.size() && word[k] == a && word[k + 1] == b) {
        next.push_back(merged);
        k += 2;
      } else {
        next.push_back(word[k++]);
      }
    }
    word.swap(next);
  }
  out.insert(out.end(), word.begin(), word.end());
}

// ---- cache -----------------------------------------------------------------------------
namespace {
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    std::uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
struct WordCache {
  std::uint64_t serial = 0;
  std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> map;
};
constexpr std::size_t kCacheMaxEntries = 1 << 18;
constexpr std::size_t kCacheMaxWordBytes = 64;
}  // namespace

void BpeModel::encode_word_cached(std::string_view bytes, std::vector<std::int32_t>& out) const {
  if (bytes.size() > kCacheMaxWordBytes) return encode_word(bytes, out);
  thread_local WordCache cache;
  if (cache.serial != serial) {
    cache.map.clear();
    cache.serial = serial;
  }
  auto it = cache.map.find(bytes);
  if (it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const std::size_t start = out.size();
  encode_word(bytes, out);
  if (cache.map.size() >= kCacheMaxEntries) cache.map.clear();
  cache.map.emplace(std::string(bytes), std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
}

}  // namespace tfm::tok
