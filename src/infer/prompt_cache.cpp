#include "tfm/prompt_cache.h"

#include <algorithm>
#include <cstring>

#include "tfm/error.h"

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

namespace {

constexpr std::string_view kMagic = "TFM-PROMPT-CACHE-1\n";

template <class T>
void put_pod(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads from a file's bytes; every length is checked against what is left.
struct Reader {
  std::string_view b;
  std::size_t at = 0;
  std::string where;
  template <class T>
  T pod() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, b.data() + at, sizeof v);
    at += sizeof v;
    return v;
  }
  void need(std::uint64_t n) {
    if (n > b.size() - at) fail(where, "truncated at byte ", at, " (", n, " more bytes needed, ", b.size() - at, " left)");
  }
};

}  // namespace

std::string PromptCache::serialize(const std::string& layout) const {
  std::string out(kMagic);
  put_pod<std::uint64_t>(out, layout.size());
  out += layout;
  put_pod<std::uint64_t>(out, entries_.size());
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {  // oldest first: loading keeps the order
    const Entry& e = entries_.at(*it);
    put_pod<std::uint64_t>(out, *it);
    put_pod<std::uint64_t>(out, e.prev);
    put_pod<std::uint64_t>(out, e.tokens.size());
    out.append(reinterpret_cast<const char*>(e.tokens.data()), e.tokens.size() * sizeof(std::int32_t));
    put_pod<std::uint64_t>(out, e.rows.size());
    out.append(reinterpret_cast<const char*>(e.rows.data()), e.rows.size());
  }
  return out;
}

std::int64_t PromptCache::deserialize(std::string_view bytes, const std::string& layout, std::uint64_t block_tokens,
                                      std::uint64_t block_bytes, const std::string& where) {
  Reader r{bytes, 0, where};
  if (bytes.substr(0, kMagic.size()) != kMagic) fail(where, "not a tfm prompt-cache file");
  r.at = kMagic.size();
  const auto n = r.pod<std::uint64_t>();
  r.need(n);
  if (bytes.substr(r.at, n) != layout)
    fail(where, "saved for another model or cache layout (", bytes.substr(r.at, std::min<std::uint64_t>(n, 200)), "; this server: ", layout, ")");
  r.at += n;
  const auto count = r.pod<std::uint64_t>();
  std::int64_t added = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto key = r.pod<std::uint64_t>(), prev = r.pod<std::uint64_t>();
    const auto nt = r.pod<std::uint64_t>();
    if (nt != block_tokens) fail(where, "block ", i, " holds ", nt, " tokens; this layout's hold ", block_tokens);
    r.need(nt * sizeof(std::int32_t));
    std::vector<std::int32_t> toks(nt);
    std::memcpy(toks.data(), bytes.data() + r.at, nt * sizeof(std::int32_t));
    r.at += nt * sizeof(std::int32_t);
    if (chain(prev, toks) != key) fail(where, "block ", i, ": its key is not the hash of its tokens");
    const auto nr = r.pod<std::uint64_t>();
    if (nr != block_bytes) fail(where, "block ", i, " has ", nr, " bytes of keys and values; this layout's have ", block_bytes);
    r.need(nr);
    std::vector<unsigned char> rows(bytes.begin() + static_cast<std::ptrdiff_t>(r.at), bytes.begin() + static_cast<std::ptrdiff_t>(r.at + nr));
    r.at += nr;
    const bool had = entries_.count(key) > 0;
    put(key, prev, toks, std::move(rows));
    added += !had && entries_.count(key) > 0 ? 1 : 0;
  }
  if (r.at != bytes.size()) fail(where, bytes.size() - r.at, " bytes after the last block");
  return added;
}

void PromptCache::clear() {
  entries_.clear();
  lru_.clear();
  bytes_ = 0;
}

std::int64_t PromptCache::tokens() const {
  std::int64_t n = 0;
  for (const auto& [key, e] : entries_) n += static_cast<std::int64_t>(e.tokens.size());
  return n;
}

}  // namespace tfm
