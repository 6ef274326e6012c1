#include "metrics/text.h"

#include <unicode/uchar.h>
#include <unicode/uscript.h>
#include <unicode/ustring.h>

#include "base/utf8.h"
#include "tfm/error.h"

namespace tfm::metrics::detail {

std::u32string decode_utf8(std::string_view s) {
  // Invalid input becomes U+FFFD once per maximal subpart (the lead byte and the continuation
  // bytes valid so far), as Python's bytes.decode('utf-8', 'replace') does.
  std::u32string out;
  out.reserve(s.size());
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  for (std::size_t i = 0; i < s.size();) {
    const unsigned char c = byte(i);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    std::size_t len = 0;
    char32_t cp = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    std::size_t k = 1;  // bytes of the sequence accepted so far
    while (len > 0 && k < len && i + k < s.size()) {
      const unsigned char b = byte(i + k);
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) break;
      cp = (cp << 6) | (b & 0x3F);
      ++k;
    }
    if (len > 0 && k == len) {
      out.push_back(cp);
    } else {
      out.push_back(0xFFFD);
    }
    i += k;
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char32_t c : s) tfm::append_utf8(out, c);
  return out;
}

bool is_py_space(char32_t c) {
  if (c == U' ') return true;
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  const auto u = static_cast<UChar32>(c);
  if (u_charType(u) == U_SPACE_SEPARATOR) return true;
  const auto d = u_charDirection(u);
  return d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR || d == U_SEGMENT_SEPARATOR;
}

std::vector<std::u32string> py_split(std::u32string_view s) {
  std::vector<std::u32string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_py_space(s[i])) ++i;
    const std::size_t start = i;
    while (i < s.size() && !is_py_space(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::u32string_view py_rstrip(std::u32string_view s) {
  while (!s.empty() && is_py_space(s.back())) s.remove_suffix(1);
  return s;
}

std::u32string_view py_strip(std::u32string_view s) {
  s = py_rstrip(s);
  while (!s.empty() && is_py_space(s.front())) s.remove_prefix(1);
  return s;
}

std::u32string py_lower(std::u32string_view s) {
  // ICU works on UTF-16: convert, lower-case with the root locale (full mappings, final
  // sigma in context, as Python's str.lower()), convert back.
  UErrorCode err = U_ZERO_ERROR;
  std::u16string in(s.size() * 2 + 1, u'\0');
  int32_t in_len = 0;
  u_strFromUTF32(in.data(), static_cast<int32_t>(in.size()), &in_len, reinterpret_cast<const UChar32*>(s.data()),
                 static_cast<int32_t>(s.size()), &err);
  TFM_CHECK(U_SUCCESS(err), "metrics", "lower-casing: UTF-32 -> UTF-16 failed (", u_errorName(err), ")");
  std::u16string low(static_cast<std::size_t>(in_len) * 3 + 1, u'\0');
  const int32_t low_len = u_strToLower(low.data(), static_cast<int32_t>(low.size()), in.data(), in_len, "", &err);
  TFM_CHECK(U_SUCCESS(err), "metrics", "lower-casing failed (", u_errorName(err), ")");
  std::u32string out(static_cast<std::size_t>(low_len) + 1, U'\0');
  int32_t out_len = 0;
  u_strToUTF32(reinterpret_cast<UChar32*>(out.data()), static_cast<int32_t>(out.size()), &out_len, low.data(), low_len,
               &err);
  TFM_CHECK(U_SUCCESS(err), "metrics", "lower-casing: UTF-16 -> UTF-32 failed (", u_errorName(err), ")");
  out.resize(static_cast<std::size_t>(out_len));
  return out;
}

bool is_punctuation(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0; }
bool is_symbol(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_S_MASK) != 0; }
bool is_number(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }
bool is_letter(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK) != 0; }
bool is_han(char32_t c) {
  UErrorCode err = U_ZERO_ERROR;
  return uscript_getScript(static_cast<UChar32>(c), &err) == USCRIPT_HAN && U_SUCCESS(err);
}

}  // namespace tfm::metrics::detail
