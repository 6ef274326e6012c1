// Code-point text for the metrics: sacreBLEU works on Python strings (sequences of code
// points), so its regexes, character n-grams and str.split() are defined on code points.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfm::metrics::detail {

// UTF-8 -> code points; a byte that does not start a valid sequence becomes U+FFFD.
std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);

// Python's str.isspace(): bidirectional class WS, B or S, or general category Zs.
bool is_py_space(char32_t c);
// Python's str.split() with no argument: runs of whitespace separate, none kept.
std::vector<std::u32string> py_split(std::u32string_view s);
// Python's str.rstrip() / str.strip() with no argument.
std::u32string_view py_rstrip(std::u32string_view s);
std::u32string_view py_strip(std::u32string_view s);
// Python's str.lower(): full Unicode lower-casing (ICU's root locale).
std::u32string py_lower(std::u32string_view s);

// Unicode general categories used by the intl tokenizer (ICU's character database).
bool is_punctuation(char32_t c);  // \p{P}
bool is_symbol(char32_t c);       // \p{S}
bool is_number(char32_t c);       // \p{N}
bool is_han(char32_t c);          // script Han
bool is_letter(char32_t c);       // \p{L}

}  // namespace tfm::metrics::detail
