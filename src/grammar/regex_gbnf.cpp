#include "grammar/regex_gbnf.h"

#include <cstdio>

#include "base/utf8.h"
#include "tfm/error.h"

namespace tfm {
namespace {

// ECMAScript's \s: WhiteSpace and LineTerminator.
const CodePointSet kSpace = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                             {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const CodePointSet kDigit = {{'0', '9'}};
const CodePointSet kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// '.': anything but the line terminators.
const CodePointSet kDot = complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});

std::string class_escape(std::uint32_t cp) {
  char buf[16];
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return std::string(1, static_cast<char>(cp));
  if (cp < 0x80) std::snprintf(buf, sizeof buf, "\\x%02X", cp);
  else if (cp < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04X", cp);
  else std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

CodePointSet intersect(const CodePointSet& a, const CodePointSet& b) {
  CodePointSet out;
  for (const auto& [alo, ahi] : a)
    for (const auto& [blo, bhi] : b) {
      const std::uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalize(out);
}

class RegexParser {
 public:
  RegexParser(std::string_view p, std::string where) : p_(p), where_(std::move(where)) {}

  std::string parse() {
    const bool start = !p_.empty() && p_[0] == '^';
    if (start) ++i_;
    std::string body = alternatives(0);
    bool end = false;
    if (i_ < p_.size() && p_[i_] == '$') {
      ++i_;
      end = true;
    }
    if (i_ < p_.size()) error(p_[i_] == ')' ? "unbalanced ')'" : "unexpected '" + std::string(1, p_[i_]) + "'");
    std::string any = "(";
    any += json_char_gbnf(complement({}));
    any += ")*";
    std::string out = "(";
    if (!start) out += any + ' ';
    out += body;
    if (!end) out += ' ' + any;
    return out + ')';
  }

 private:
  template <class... A>
  [[noreturn]] void error(const A&... a) {
    fail(where_, "pattern '", p_, "' at ", i_, ": ", a...);
  }

  std::string alternatives(int depth) {
    if (depth > 32) error("groups nested too deeply");
    std::string out = sequence(depth);
    while (i_ < p_.size() && p_[i_] == '|') {
      ++i_;
      out += " | " + sequence(depth);
    }
    return "(" + out + ")";
  }
  std::string sequence(int depth) {
    std::string out;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && i_ + 1 == p_.size()) break;
      std::string a = atom(depth);
      a += quantifier();
      out += (out.empty() ? "" : " ") + a;
    }
    return out.empty() ? "\"\"" : out;
  }
  std::string quantifier() {
    if (i_ >= p_.size()) return "";
    std::string q;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{' && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') {
      const std::size_t close = p_.find('}', i_);
      if (close == std::string_view::npos) error("unterminated {");
      q = std::string(p_.substr(i_, close - i_ + 1));
      for (const char d : q)
        if (!(d == '{' || d == '}' || d == ',' || (d >= '0' && d <= '9'))) error("bad repetition ", q);
      i_ = close + 1;
    } else {
      return "";
    }
    if (i_ < p_.size() && p_[i_] == '?') ++i_;  // lazy: the same strings
    if (i_ < p_.size() && (p_[i_] == '*' || p_[i_] == '+' || p_[i_] == '?' || p_[i_] == '{')) error("nothing to repeat");
    return q;
  }
  std::uint32_t next_cp() {
    const auto c = static_cast<unsigned char>(p_[i_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<std::size_t>(n) > p_.size()) error("invalid UTF-8");
    std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(p_[i_ + static_cast<std::size_t>(k)]) & 0x3F);
    i_ += static_cast<std::size_t>(n);
    return cp;
  }
  std::uint32_t hex(std::size_t digits) {
    if (i_ + digits > p_.size()) error("unfinished escape");
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < digits; ++k) {
      const char c = p_[i_++];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error("bad hex digit");
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }
  // After a backslash: a class (\d \w \s and negations) or one character.
  CodePointSet escape(bool in_class) {
    if (i_ >= p_.size()) error("pattern ends with '\\'");
    const char e = p_[i_++];
    switch (e) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return normalize(kSpace);
      case 'S': return complement(kSpace);
      case 'n': return {{0x0A, 0x0A}};
      case 'r': return {{0x0D, 0x0D}};
      case 't': return {{0x09, 0x09}};
      case 'f': return {{0x0C, 0x0C}};
      case 'v': return {{0x0B, 0x0B}};
      case '0': return {{0, 0}};
      case 'x': {
        const std::uint32_t v = hex(2);
        return {{v, v}};
      }
      case 'u': {
        std::uint32_t v = 0;
        if (i_ < p_.size() && p_[i_] == '{') {
          ++i_;
          const std::size_t close = p_.find('}', i_);
          if (close == std::string_view::npos || close == i_ || close - i_ > 6) error("bad \\u{...}");
          v = hex(close - i_);
          ++i_;
        } else {
          v = hex(4);
        }
        if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) error("\\u escape of a surrogate or beyond U+10FFFF");
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{0x08, 0x08}};
        error("word boundaries (\\b) are not supported");
      case 'B': error("word boundaries (\\B) are not supported");
      case 'p': case 'P': error("Unicode property escapes (\\p) are not supported");
      case 'k': error("named backreferences are not supported");
      default:
        if (e >= '1' && e <= '9') error("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) error("unknown escape '\\", e, "'");
        --i_;
        const std::uint32_t cp = next_cp();
        return {{cp, cp}};
    }
  }
  CodePointSet char_class() {
    const bool negated = i_ < p_.size() && p_[i_] == '^';
    if (negated) ++i_;
    CodePointSet set;
    while (i_ < p_.size() && p_[i_] != ']') {
      CodePointSet lo_set;
      if (p_[i_] == '\\') {
        ++i_;
        lo_set = escape(true);
      } else {
        const std::uint32_t cp = next_cp();
        lo_set = {{cp, cp}};
      }
      if (lo_set.size() == 1 && lo_set[0].first == lo_set[0].second && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        std::uint32_t hi = 0;
        if (p_[i_] == '\\') {
          ++i_;
          const CodePointSet h = escape(true);
          if (h.size() != 1 || h[0].first != h[0].second) error("class escape as a range end");
          hi = h[0].first;
        } else {
          hi = next_cp();
        }
        if (hi < lo_set[0].first) error("range out of order in class");
        set.emplace_back(lo_set[0].first, hi);
      } else {
        set.insert(set.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (i_ >= p_.size()) error("unterminated character class");
    ++i_;
    return negated ? complement(set) : normalize(set);
  }
  std::string atom(int depth) {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (p_.substr(i_, 2) == "?:") {
        i_ += 2;
      } else if (p_.substr(i_, 2) == "?<" && i_ + 2 < p_.size() && p_[i_ + 2] != '=' && p_[i_ + 2] != '!') {
        const std::size_t close = p_.find('>', i_);  // a named group: only its grouping matters
        if (close == std::string_view::npos) error("unterminated group name");
        i_ = close + 1;
      } else if (i_ < p_.size() && p_[i_] == '?') {
        error("lookarounds are not supported");
      }
      std::string inner = alternatives(depth + 1);
      if (i_ >= p_.size() || p_[i_] != ')') error("expected ')'");
      ++i_;
      return inner;
    }
    if (c == '[') {
      ++i_;
      return json_char_gbnf(char_class());
    }
    if (c == '.') {
      ++i_;
      return json_char_gbnf(kDot);
    }
    if (c == '\\') {
      ++i_;
      return json_char_gbnf(escape(false));
    }
    if (c == '^' || c == '$') error("anchors are supported only at the pattern's ends");
    if (c == '*' || c == '+' || c == '?') error("nothing to repeat");
    if (c == '{' || c == '}' || c == ']') error("unescaped '", c, "'");
    const std::uint32_t cp = next_cp();
    return json_char_gbnf({{cp, cp}});
  }

  std::string_view p_;
  std::string where_;
  std::size_t i_ = 0;
};

}  // namespace

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string json_char_gbnf(const CodePointSet& set_in) {
  const CodePointSet set = without_surrogates(set_in);
  std::vector<std::string> alts;
  // Raw: everything but '"', '\' and the control characters.
  const CodePointSet raw = intersect(set, complement({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}));
  if (!raw.empty()) {
    std::string cls = "[";
    for (const auto& [lo, hi] : raw) {
      cls += class_escape(lo);
      if (hi != lo) {
        cls += '-';
        cls += class_escape(hi);
      }
    }
    alts.push_back(cls + "]");
  }
  for (const auto& [lo, hi] : intersect(set, {{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}}))
    for (std::uint32_t cp = lo; cp <= hi; ++cp) {
      char buf[16];
      const char* named = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : cp == '\t' ? "\\t"
                          : cp == 0x08 ? "\\b" : cp == 0x0C ? "\\f" : nullptr;
      if (named) {
        alts.push_back(gbnf_literal(named));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
        alts.push_back(gbnf_literal(buf));
      }
    }
  if (alts.empty()) fail("json_schema", "a character class that matches no character");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (std::size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : "") + alts[k];
  return out + ")";
}

std::string regex_to_gbnf(std::string_view pattern, const std::string& where) { return RegexParser(pattern, where).parse(); }

}  // namespace tfm
