// Character classification for the pre-tokenizers: a 64 KiB table for the BMP built once
// from the generated ranges (unicode_tables.cpp), binary search above it.
#include "tokenize/unicode.h"

#include "base/utf8.h"
#include "tfm/error.h"
#include "tfm/tokenizer.h"

#include <algorithm>
#include <vector>

namespace tfm::tok::unicode {

bool is_white_space(std::uint32_t cp) {
  // PropList.txt White_Space (unchanged since Unicode 6.3).
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

static bool in_ranges(const CodeRange* r, std::size_t n, std::uint32_t cp) {
  const CodeRange* end = r + n;
  const CodeRange* it = std::upper_bound(r, end, cp, [](std::uint32_t c, const CodeRange& x) { return c < x.lo; });
  return it != r && (it - 1)->hi >= cp;
}

bool is_letter_slow(std::uint32_t cp) { return in_ranges(kLetterRanges, kLetterRanges_size, cp); }
bool is_number_slow(std::uint32_t cp) { return in_ranges(kNumberRanges, kNumberRanges_size, cp); }

CharClass classify_slow(std::uint32_t cp) {
  if (cp == kInvalid) return CharClass::other;
  if (is_white_space(cp)) return CharClass::space;
  if (is_letter_slow(cp)) return CharClass::letter;
  if (is_number_slow(cp)) return CharClass::number;
  return CharClass::other;
}

namespace detail {

static const std::uint8_t* build_bmp_table() {
  static std::vector<std::uint8_t> table(0x10000);
  for (std::uint32_t cp = 0; cp < 0x10000; ++cp) table[cp] = static_cast<std::uint8_t>(classify_slow(cp));
  return table.data();
}

const std::uint8_t* bmp_class = build_bmp_table();

// 0 other, 1 letter, 2 number, 3 space (checked against classify_slow in the unit tests).
const std::uint8_t ascii_class[128] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3, 0, 0,  // \t \n \v \f \r
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  //
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // space
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0,  // 0-9
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // A-O
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // P-Z
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,  // a-o
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0,  // p-z
};

}  // namespace detail

void append_utf8(std::string& out, std::uint32_t cp) { tfm::append_utf8(out, cp); }

bool is_valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  std::size_t i = 0;
  while (i < s.size()) {
    std::uint32_t cp;
    i += decode_utf8(p + i, s.size() - i, cp);
    if (cp == kInvalid) return false;
  }
  return true;
}

}  // namespace tfm::tok::unicode

namespace tfm {
void check_utf8(std::string_view text, const std::string& where) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint32_t cp;
    const std::size_t n = tok::unicode::decode_utf8(p + i, text.size() - i, cp);
    TFM_CHECK(cp != tok::unicode::kInvalid, where, "invalid UTF-8 at byte ", i);
    i += n;
  }
}
}  // namespace tfm
