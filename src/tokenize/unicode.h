// UTF-8 decoding and the character classes GPT-2's pre-tokenizer needs (\p{L}, \p{N}, \s).
//
// Decoding is strict (Unicode table 3-7: no overlongs, no surrogates, nothing above
// U+10FFFF). A byte that does not start a well-formed sequence decodes as one unit of
// length 1 with cp = kInvalid; it classifies as "other", the class U+FFFD would have, so
// invalid bytes never break a letter or number run differently from a replacement char.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm::tok::unicode {

struct CodeRange {
  std::uint32_t lo, hi;  // inclusive
};
extern const char* const kUnicodeVersion;
extern const CodeRange kLetterRanges[];
extern const std::size_t kLetterRanges_size;
extern const CodeRange kNumberRanges[];
extern const std::size_t kNumberRanges_size;

constexpr std::uint32_t kInvalid = 0xFFFFFFFFu;

enum class CharClass : std::uint8_t { other = 0, letter = 1, number = 2, space = 3 };

// Unicode White_Space (PropList.txt), the set Rust's regex (tiktoken) uses for \s.
bool is_white_space(std::uint32_t cp);
// Slow, obviously-correct lookups (binary search over the generated ranges); tests compare
// the fast classify() against these.
bool is_letter_slow(std::uint32_t cp);
bool is_number_slow(std::uint32_t cp);
CharClass classify_slow(std::uint32_t cp);

namespace detail {
extern const std::uint8_t* bmp_class;  // 65536 entries of CharClass, built at start-up
extern const std::uint8_t ascii_class[128];
}  // namespace detail

inline CharClass classify(std::uint32_t cp) {
  if (cp < 128) return static_cast<CharClass>(detail::ascii_class[cp]);
  if (cp < 0x10000) return static_cast<CharClass>(detail::bmp_class[cp]);
  if (cp == kInvalid) return CharClass::other;
  return classify_slow(cp);
}

// Decode one code point at p[0..n) (n >= 1). Returns the length consumed (1..4); cp is the
// code point or kInvalid for a byte that starts no well-formed sequence (length 1).
inline int decode_utf8(const unsigned char* p, std::size_t n, std::uint32_t& cp) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  auto cont = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xBF) {
    return i < n && p[i] >= lo && p[i] <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (cont(1)) {
      cp = ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu);
      return 2;
    }
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    if (cont(1, lo, hi) && cont(2)) {
      cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      return 3;
    }
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    if (cont(1, lo, hi) && cont(2) && cont(3)) {
      cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
      return 4;
    }
  }
  cp = kInvalid;
  return 1;
}

void append_utf8(std::string& out, std::uint32_t cp);
bool is_valid_utf8(const std::string& s);

}  // namespace tfm::tok::unicode
