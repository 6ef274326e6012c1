// sacreBLEU's BLEU tokenizers, rule for rule. Each of its regex substitutions matches one or two
// characters from fixed classes, so re.sub()'s left-to-right scan of non-overlapping matches
// is written out as a loop over code points: at each position try the pattern; on a match
// emit the replacement and skip the matched characters, else copy one character.
#include <algorithm>
#include <array>
#include <utility>

#include "metrics/text.h"
#include "tfm/error.h"
#include "tfm/metrics.h"

namespace tfm::metrics {
namespace {

using detail::py_split;

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }

// Substitutes every non-overlapping match of "(A)(B)" (two single-character classes) by
// `before` A `middle` B `after`, scanning as re.sub does.
template <class A, class B>
std::u32string sub_pair(const std::u32string& s, A first, B second, std::u32string_view before,
                        std::u32string_view middle, std::u32string_view after) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 2);
  for (std::size_t i = 0; i < s.size();) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out.append(before).append(1, s[i]).append(middle).append(1, s[i + 1]).append(after);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

// Substitutes every character of the class by " c ".
template <class A>
std::u32string pad_each(const std::u32string& s, A cls) {
  std::u32string out;
  out.reserve(s.size() + s.size() / 2);
  for (char32_t c : s) {
    if (cls(c)) out.append(1, U' ').append(1, c).append(1, U' ');
    else out += c;
  }
  return out;
}

// ' '.join(s.split())
std::u32string join_split(const std::u32string& s) {
  std::u32string out;
  for (const auto& w : py_split(s)) {
    if (!out.empty()) out += U' ';
    out += w;
  }
  return out;
}

// tokenizer_re.TokenizerRegexp: the post-processing shared by 13a and zh.
std::u32string regexp_tokenize(std::u32string s) {
  // [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation and symbols except ' - . ,
  auto punct = [](char32_t c) {
    return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
           (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == U'/';
  };
  auto period_comma = [](char32_t c) { return c == U'.' || c == U','; };
  auto non_digit = [](char32_t c) { return !is_ascii_digit(c); };
  s = pad_each(s, punct);
  s = sub_pair(s, non_digit, period_comma, U"", U" ", U" ");  // ([^0-9])([\.,]) -> '\1 \2 '
  s = sub_pair(s, period_comma, non_digit, U" ", U" ", U"");  // ([\.,])([^0-9]) -> ' \1 \2'
  s = sub_pair(s, is_ascii_digit, [](char32_t c) { return c == U'-'; }, U"", U" ", U" ");  // ([0-9])(-)
  return join_split(s);
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
}

// tokenizer_13a.Tokenizer13a: mteval-v13a's language-independent part, then the regexes on
// the line padded with a space on both sides. The replacements are ASCII, so they are done
// on the UTF-8 bytes (the same result as on code points).
std::u32string tokenize_13a(std::string line) {
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  return regexp_tokenize(detail::decode_utf8(" " + line + " "));
}

// tokenizer_zh._UCODE_RANGES as sacreBLEU compares them. Two of its entries are written
// '\u20000'..'\u2a6d6' and '\u2f800'..'\u2fa1d' (meant as Extension B and the Compatibility
// Supplement); \u takes four hex digits, so they are two-character strings, and comparing one
// character against them selects U+2001..U+2A6D and U+2F81..U+2FA1 (general punctuation,
// currency, arrows, maths, ...). Kept as sacreBLEU behaves.
constexpr std::array<std::pair<char32_t, char32_t>, 22> kZhRanges{{
    {0x3400, 0x4DB5}, {0x4E00, 0x9FA5}, {0x9FA6, 0x9FBB}, {0xF900, 0xFA2D}, {0xFA30, 0xFA6A}, {0xFA70, 0xFAD9},
    {0x2001, 0x2A6D}, {0x2F81, 0x2FA1}, {0xFF00, 0xFFEF}, {0x2E80, 0x2EFF}, {0x3000, 0x303F}, {0x31C0, 0x31EF},
    {0x2F00, 0x2FDF}, {0x2FF0, 0x2FFF}, {0x3100, 0x312F}, {0x31A0, 0x31BF}, {0xFE10, 0xFE1F}, {0xFE30, 0xFE4F},
    {0x2600, 0x26FF}, {0x2700, 0x27BF}, {0x3200, 0x32FF}, {0x3300, 0x33FF},
}};

bool is_zh_char(char32_t c) {
  return std::any_of(kZhRanges.begin(), kZhRanges.end(), [c](const auto& r) { return c >= r.first && c <= r.second; });
}

// tokenizer_zh.TokenizerZh: strip, pad every Chinese character with spaces, then the regexes.
std::u32string tokenize_zh(std::string_view line) {
  const std::u32string all = detail::decode_utf8(line);
  return regexp_tokenize(pad_each(std::u32string(detail::py_strip(all)), is_zh_char));
}

// tokenizer_intl.TokenizerV14International (mteval-v14's international tokenization).
std::u32string tokenize_intl(std::string_view line) {
  std::u32string s = detail::decode_utf8(line);
  auto non_number = [](char32_t c) { return !detail::is_number(c); };
  s = sub_pair(s, non_number, detail::is_punctuation, U"", U" ", U" ");  // (\P{N})(\p{P}) -> '\1 \2 '
  s = sub_pair(s, detail::is_punctuation, non_number, U" ", U" ", U"");  // (\p{P})(\P{N}) -> ' \1 \2'
  s = pad_each(s, detail::is_symbol);                                   // (\p{S}) -> ' \1 '
  return join_split(s);
}

// tokenizer_char.TokenizerChar: ' '.join(line) — every character, spaces included, which the
// later split() drops.
std::u32string tokenize_chars(std::string_view line) {
  std::u32string out;
  for (char32_t c : detail::decode_utf8(line)) {
    if (!out.empty()) out += U' ';
    out += c;
  }
  return out;
}

}  // namespace

BleuTokenizer bleu_tokenizer_from_name(std::string_view name) {
  if (name == "13a") return BleuTokenizer::t13a;
  if (name == "intl") return BleuTokenizer::intl;
  if (name == "zh") return BleuTokenizer::zh;
  if (name == "char") return BleuTokenizer::chars;
  if (name == "none") return BleuTokenizer::none;
  fail("bleu", "unknown tokenizer '", name, "'; allowed: 13a, intl, zh, char, none");
}

const char* to_string(BleuTokenizer t) {
  switch (t) {
    case BleuTokenizer::t13a: return "13a";
    case BleuTokenizer::intl: return "intl";
    case BleuTokenizer::zh: return "zh";
    case BleuTokenizer::chars: return "char";
    case BleuTokenizer::none: return "none";
  }
  return "?";
}

BleuTokenizer default_bleu_tokenizer(const std::vector<std::string>& references) {
  std::size_t letters = 0, han = 0;
  for (const auto& r : references) {
    for (char32_t c : detail::decode_utf8(r)) {
      if (!detail::is_letter(c)) continue;
      ++letters;
      han += detail::is_han(c);
    }
  }
  return letters > 0 && 2 * han >= letters ? BleuTokenizer::zh : BleuTokenizer::t13a;
}

std::string valid_utf8(std::string_view text) { return detail::encode_utf8(detail::decode_utf8(text)); }

std::string rstrip_whitespace(std::string_view line) {
  return detail::encode_utf8(detail::py_rstrip(detail::decode_utf8(line)));
}

std::string sacrebleu_tokenize(std::string_view line, BleuTokenizer t) {
  switch (t) {
    case BleuTokenizer::t13a: return detail::encode_utf8(tokenize_13a(std::string(line)));
    case BleuTokenizer::intl: return detail::encode_utf8(tokenize_intl(line));
    case BleuTokenizer::zh: return detail::encode_utf8(tokenize_zh(line));
    case BleuTokenizer::chars: return detail::encode_utf8(tokenize_chars(line));
    case BleuTokenizer::none: return std::string(line);
  }
  return std::string(line);
}

}  // namespace tfm::metrics
