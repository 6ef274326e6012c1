// Precompiled: SentencePiece's precompiled_charsmap (T5, ALBERT, XLNet, many multilingual
// models). The map is [u32 trie bytes][Darts double-array trie][NUL-separated strings]; a key
// found in the trie is replaced by the string at its value's offset. As HF applies it: per
// extended grapheme cluster (ICU), the whole cluster first when it is under 6 bytes, else
// char by char; the first (shortest) prefix hit of the chunk is the replacement.
#include <unicode/brkiter.h>
#include <unicode/unistr.h>

#include <cstring>

#include "tfm/error.h"
#include "tokenize/components.h"

namespace tfm::tok {

namespace {

class Precompiled final : public Normalizer {
 public:
  explicit Precompiled(const std::string& map) {
    const char* where = "tokenizer.json: Precompiled normalizer";
    TFM_CHECK(map.size() >= 4, where, "precompiled_charsmap is truncated (", map.size(), " bytes)");
    std::uint32_t trie_bytes = 0;
    std::memcpy(&trie_bytes, map.data(), 4);
    TFM_CHECK(trie_bytes % 4 == 0 && 4 + static_cast<std::size_t>(trie_bytes) <= map.size(), where,
              "precompiled_charsmap trie size ", trie_bytes, " does not fit its ", map.size(), " bytes");
    units_.resize(trie_bytes / 4);
    std::memcpy(units_.data(), map.data() + 4, trie_bytes);
    strings_ = map.substr(4 + trie_bytes);
  }

  void normalize(Piece& p) const override {
    if (units_.empty()) return;
    const icu::UnicodeString u = icu::UnicodeString::fromUTF8(p.text);
    UErrorCode err = U_ZERO_ERROR;
    std::unique_ptr<icu::BreakIterator> it(icu::BreakIterator::createCharacterInstance(icu::Locale::getRoot(), err));
    TFM_CHECK(U_SUCCESS(err), "tokenizer", "ICU grapheme iterator unavailable");
    it->setText(u);
    // UTF-16 boundaries -> UTF-8 byte offsets
    std::vector<std::size_t> bounds;
    std::size_t byte = 0;
    int32_t prev16 = it->first();
    bounds.push_back(0);
    for (int32_t b = it->next(); b != icu::BreakIterator::DONE; b = it->next()) {
      std::string chunk;
      u.tempSubStringBetween(prev16, b).toUTF8String(chunk);
      byte += chunk.size();
      bounds.push_back(byte);
      prev16 = b;
    }
    p.materialize();
    std::string text;
    std::vector<Range> align;
    bool modified = false;
    for (std::size_t g = 0; g + 1 < bounds.size(); ++g) {
      const std::size_t gb = bounds[g], ge = bounds[g + 1];
      const std::string_view grapheme(p.text.data() + gb, ge - gb);
      const char* rep = nullptr;
      if (grapheme.size() < 6 && (rep = transform(grapheme))) {
        modified = true;
        append(text, align, rep, p, gb, ge);
        continue;
      }
      for (std::size_t i = gb; i < ge;) {
        std::uint32_t cp;
        const auto len = static_cast<std::size_t>(next_cp(p.text, i, cp));
        if (const char* r = transform(std::string_view(p.text.data() + i, len))) {
          modified = true;
          append(text, align, r, p, i, i + len);
        } else {
          text.append(p.text, i, len);
          align.insert(align.end(), p.align.begin() + static_cast<std::ptrdiff_t>(i),
                       p.align.begin() + static_cast<std::ptrdiff_t>(i + len));
        }
        i += len;
      }
    }
    if (!modified) return;
    p.text = std::move(text);
    p.align = std::move(align);
  }

 private:
  // As HF's transform: the i-th new char takes the i-th replaced char's range; new chars
  // beyond the replaced ones are insertions with the last replaced char's range.
  static void append(std::string& text, std::vector<Range>& align, const char* rep, const Piece& p, std::size_t b,
                     std::size_t e) {
    std::vector<Range> old;
    for (std::size_t i = b; i < e;) {
      std::uint32_t cp;
      const auto len = static_cast<std::size_t>(next_cp(p.text, i, cp));
      old.push_back(p.align[i]);
      i += len;
    }
    const std::string_view r(rep);
    std::size_t k = 0;
    for (std::size_t i = 0; i < r.size(); ++k) {
      std::uint32_t cp;
      const auto len = static_cast<std::size_t>(next_cp(r, i, cp));
      text.append(r.substr(i, len));
      align.insert(align.end(), len, old.empty() ? Range{0, 0} : old[std::min(k, old.size() - 1)]);
      i += len;
    }
  }
  // Darts: the first prefix of key with a value -> the string at that offset.
  const char* transform(std::string_view key) const {
    auto offset = [](std::uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); };
    std::size_t pos = 0;
    std::uint32_t unit = units_[0];
    pos ^= offset(unit);
    for (unsigned char c : key) {
      pos ^= c;
      if (pos >= units_.size()) return nullptr;
      unit = units_[pos];
      if ((unit & ((1u << 31) | 0xFF)) != c) return nullptr;
      pos ^= offset(unit);
      if (pos >= units_.size()) return nullptr;
      if ((unit >> 8) & 1) {
        const std::uint32_t value = units_[pos] & ((1u << 31) - 1);
        if (value >= strings_.size()) return nullptr;
        return strings_.c_str() + value;
      }
    }
    return nullptr;
  }
  std::vector<std::uint32_t> units_;
  std::string strings_;
};

}  // namespace

std::unique_ptr<Normalizer> make_precompiled(const std::string& charsmap) { return std::make_unique<Precompiled>(charsmap); }

}  // namespace tfm::tok
