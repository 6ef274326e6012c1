// NFC, NFD, NFKC, NFKD (ICU), Lowercase and StripAccents normalizers.
#include <algorithm>

#include "tokenize/components.h"

namespace tfm::tok {

namespace {

bool all_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(uprops::Form f) : form_(f) {}
  // HF's alignments, char by char: every char is decomposed (NFD/NFKD of that char alone),
  // each run of combining marks is put in canonical order (ranges move with the marks),
  // then for NFC/NFKC canonical composition folds marks into their starter, which keeps the
  // starter's range (so "e\u0301" -> "\u00e9" maps to the 'e' alone, as in HF).
  void normalize(Piece& p) const override {
    if (all_ascii(p.text) || uprops::is_normalized(form_, p.text)) return;
    p.materialize();
    const bool compat = form_ == uprops::Form::nfkc || form_ == uprops::Form::nfkd;
    const bool compose = form_ == uprops::Form::nfc || form_ == uprops::Form::nfkc;
    const uprops::Form dform = compat ? uprops::Form::nfkd : uprops::Form::nfd;
    struct Out {
      std::uint32_t cp;
      Range r;
      std::uint8_t ccc;
    };
    std::vector<Out> chars;
    std::string one, dec;
    for (std::size_t i = 0; i < p.text.size();) {
      std::uint32_t cp;
      const auto len = static_cast<std::size_t>(next_cp(p.text, i, cp));
      const Range r{p.align[i].begin, p.align[i + len - 1].end};
      one.assign(p.text, i, len);
      const std::string& d = uprops::normalize(dform, one, dec) ? dec : one;
      for (std::size_t k = 0; k < d.size();) {
        std::uint32_t c;
        k += static_cast<std::size_t>(next_cp(d, k, c));
        chars.push_back({c, r, uprops::combining_class(c)});
      }
      i += len;
    }
    for (std::size_t i = 0; i < chars.size();) {  // canonical ordering of each run of marks
      if (chars[i].ccc == 0) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < chars.size() && chars[j].ccc != 0) ++j;
      std::stable_sort(chars.begin() + static_cast<std::ptrdiff_t>(i), chars.begin() + static_cast<std::ptrdiff_t>(j),
                       [](const Out& a, const Out& b) { return a.ccc < b.ccc; });
      i = j;
    }
    if (compose) {  // canonical composition (UAX #15): a mark joins the last starter unless blocked
      std::vector<Out> out;
      out.reserve(chars.size());
      std::int64_t starter = -1;
      int last_class = 256;
      for (const Out& c : chars) {
        if (starter >= 0 && (last_class == 0 || last_class < c.ccc)) {
          const std::int32_t comp = uprops::compose_pair(out[static_cast<std::size_t>(starter)].cp, c.cp);
          if (comp >= 0) {
            out[static_cast<std::size_t>(starter)].cp = static_cast<std::uint32_t>(comp);
            continue;
          }
        }
        if (c.ccc == 0) starter = static_cast<std::int64_t>(out.size());
        last_class = c.ccc;
        out.push_back(c);
      }
      chars = std::move(out);
    }
    std::string text;
    std::vector<Range> align;
    for (const Out& o : chars) {
      const std::size_t before = text.size();
      append_utf8_cp(text, o.cp);
      align.insert(align.end(), text.size() - before, o.r);
    }
    p.text = std::move(text);
    p.align = std::move(align);
  }

 private:
  uprops::Form form_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(Piece& p) const override {
    if (all_ascii(p.text)) {  // one byte per char either way: alignment unchanged
      for (char& c : p.text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      return;
    }
    transform_chars(p, [](std::uint32_t cp, std::vector<std::uint32_t>& out) {
      std::uint32_t buf[3];
      int n = 0;
      uprops::lower_into(cp, buf, n);
      out.insert(out.end(), buf, buf + n);
    });
  }
};

class StripAccents final : public Normalizer {
 public:
  void normalize(Piece& p) const override {
    if (all_ascii(p.text)) return;
    transform_chars(p, [](std::uint32_t cp, std::vector<std::uint32_t>& out) {
      if (!uprops::is_mark(cp)) out.push_back(cp);
    });
  }
};

}  // namespace

std::unique_ptr<Normalizer> make_unicode_normalizer(uprops::Form form) { return std::make_unique<UnicodeForm>(form); }
std::unique_ptr<Normalizer> make_lowercase() { return std::make_unique<Lowercase>(); }
std::unique_ptr<Normalizer> make_strip_accents() { return std::make_unique<StripAccents>(); }

}  // namespace tfm::tok
