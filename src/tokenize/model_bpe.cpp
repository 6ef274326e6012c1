// BPE model as HF `tokenizers` runs it: word -> chars (continuing_subword_prefix on all but
// the first, end_of_word_suffix on the last) -> ids, unknown chars to <0xXX> byte tokens
// (byte_fallback) or unk_token (consecutive ones fused with fuse_unk), then merges applied
// lowest rank first, leftmost first among equal ranks. ignore_merges: a word that is a
// token as a whole is that token. Byte-level pieces (after ByteLevel) are read byte by byte
// through GPT-2's alphabet without building the char string.
#include <algorithm>
#include <array>
#include <unordered_map>

#include "tfm/error.h"
#include "tokenize/bpe_merge.h"
#include "tokenize/bpe_model.h"
#include "tokenize/components.h"
#include "tokenize/flat_string_map.h"

namespace tfm::tok {

namespace {

struct Sym {
  std::int32_t id;
  std::uint32_t len;  // bytes of the piece this symbol covers
};

// For bpe_merge.h's templates (found by argument-dependent lookup).
std::int32_t symbol_id(const Sym& s) { return s.id; }
Sym join(const Sym& l, const Sym& r, std::int32_t id) { return {id, l.len + r.len}; }

struct StrHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
struct Cache {
  std::uint64_t serial = 0;
  std::unordered_map<std::string, std::vector<Sym>, StrHash, std::equal_to<>> map;
};
constexpr std::size_t kCacheMaxEntries = 1 << 18;
constexpr std::size_t kCacheMaxWordBytes = 128;

class Bpe final : public Model {
 public:
  Bpe(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
      const BpeOptions& o, const char* where)
      : o_(o) {
    vocab_ = std::move(vocab);
    ids_.reserve(vocab_.size() * 2);
    for (std::size_t id = 0; id < vocab_.size(); ++id) ids_.emplace(vocab_[id], static_cast<std::int32_t>(id));
    if (o_.has_unk) {
      unk_ = token_to_id(o_.unk_token);
      TFM_CHECK(unk_ >= 0, where, "BPE unk_token '", o_.unk_token, "' is not in the vocabulary");
    }
    byte_char_.fill(-1);
    fallback_.fill(-1);
    for (int b = 0; b < 256; ++b) {
      byte_char_[b] = token_to_id(bytes_to_token_text(std::string(1, static_cast<char>(b))));
      char code[8];
      std::snprintf(code, sizeof code, "<0x%02X>", b);
      fallback_[b] = token_to_id(code);
    }
    merges_.reserve(merges.size());
    const std::size_t plen = o_.continuing_subword_prefix.size();
    for (std::size_t r = 0; r < merges.size(); ++r) {
      // Named references, not a structured binding: clang 14 (the fuzz build) cannot capture
      // bindings in a lambda.
      const std::string& l = merges[r].first;
      const std::string& rt = merges[r].second;
      auto find = [&](const std::string& t) {
        const std::int32_t id = token_to_id(t);
        TFM_CHECK(id >= 0, where, "merge ", r, " ('", l, " ", rt, "') names unknown token '", t, "'");
        return id;
      };
      const std::int32_t a = find(l), b = find(rt);
      const std::string merged = l + (rt.size() >= plen ? rt.substr(plen) : std::string());
      merges_.assign(a, b, {static_cast<std::int32_t>(r), find(merged)});  // a repeated pair: the last wins, as HF
    }
    if (o_.ignore_merges) {
      byte_keys_.resize(vocab_.size());
      for (std::size_t id = 0; id < vocab_.size(); ++id)
        if (!token_text_to_bytes(vocab_[id], byte_keys_[id])) byte_keys_[id].clear();
      byte_ids_.build(&byte_keys_);
    }
    fast_ids_.build(&vocab_);
    serial_ = next_model_serial();
  }

  void tokenize(const Piece& p, std::vector<Token>& out) const override {
    if (p.text.empty()) return;
    if (o_.ignore_merges) {
      std::int32_t id = -1;
      if (p.byte_level) {
        id = byte_ids_.find(p.text);
      } else {
        id = fast_ids_.find(p.text);
      }
      if (id >= 0) {
        out.push_back({id, {0, static_cast<std::uint32_t>(p.text.size())}, {}});
        return;
      }
    }
    thread_local Cache cache;
    thread_local std::vector<Sym> syms;
    const std::vector<Sym>* word = nullptr;
    const bool cacheable = p.text.size() <= kCacheMaxWordBytes;
    if (cacheable) {
      if (cache.serial != serial_) {
        cache.map.clear();
        cache.serial = serial_;
      }
      auto it = cache.map.find(std::string_view(p.text));
      if (it != cache.map.end()) word = &it->second;
    }
    if (!word) {
      syms.clear();
      initial_symbols(p, syms);
      merge_word(merges_, syms);
      word = &syms;
      if (cacheable) {
        if (cache.map.size() >= kCacheMaxEntries) cache.map.clear();
        word = &cache.map.emplace(p.text, syms).first->second;
      }
    }
    std::uint32_t at = 0;
    for (const Sym& s : *word) {
      out.push_back({s.id, {at, at + s.len}, {}});
      at += s.len;
    }
  }

 private:
  // One unit per char (per byte for byte-level pieces), as HF's merge_word.
  void initial_symbols(const Piece& p, std::vector<Sym>& syms) const {
    const std::string& w = p.text;
    const bool affixes = !o_.continuing_subword_prefix.empty() || !o_.end_of_word_suffix.empty();
    if (p.byte_level && !affixes) {
      bool all = true;
      for (unsigned char c : w) all &= byte_char_[c] >= 0;
      if (all) {
        for (unsigned char c : w) syms.push_back({byte_char_[c], 1});
        return;
      }
    }
    std::int32_t unk_id = -1;
    std::uint32_t unk_len = 0;
    std::string key;
    const std::size_t n = w.size();
    for (std::size_t i = 0; i < n;) {
      std::size_t len;
      key.clear();
      if (!o_.continuing_subword_prefix.empty() && i > 0) key = o_.continuing_subword_prefix;
      if (p.byte_level) {
        len = 1;
        key += bytes_to_token_text(std::string_view(w).substr(i, 1));
      } else {
        std::uint32_t cp;
        len = static_cast<std::size_t>(next_cp(w, i, cp));
        key.append(w, i, len);
      }
      const bool last = i + len >= n;
      if (last) key += o_.end_of_word_suffix;
      const std::int32_t id = fast_ids_.find(key);
      if (id >= 0) {
        if (unk_id >= 0) {
          syms.push_back({unk_id, unk_len});
          unk_id = -1;
        }
        syms.push_back({id, static_cast<std::uint32_t>(len)});
      } else {
        bool fell_back = false;
        if (o_.byte_fallback) {
          bool all = true;
          for (unsigned char c : key) all &= fallback_[c] >= 0;
          if (all) {
            // HF gives each byte token a length of 1 byte (offsets follow that).
            for (unsigned char c : key) syms.push_back({fallback_[c], 1});
            fell_back = true;
          }
        }
        if (!fell_back && o_.has_unk) {
          if (unk_id >= 0 && o_.fuse_unk) {
            unk_len += static_cast<std::uint32_t>(len);
          } else {
            if (unk_id >= 0) syms.push_back({unk_id, unk_len});
            unk_id = unk_;
            unk_len = static_cast<std::uint32_t>(len);
          }
        }
      }
      i += len;
    }
    if (unk_id >= 0) syms.push_back({unk_id, unk_len});
  }

  BpeOptions o_;
  PairMap merges_;
  std::int32_t unk_ = -1;
  std::array<std::int32_t, 256> byte_char_{}, fallback_{};
  std::vector<std::string> byte_keys_;  // ignore_merges: id -> the raw bytes of a byte-level token
  FlatStringMap byte_ids_, fast_ids_;
  std::uint64_t serial_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_bpe(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                const BpeOptions& opts, const char* where) {
  return std::make_unique<Bpe>(std::move(vocab), merges, opts, where);
}

}  // namespace tfm::tok
