// Chat-template lexer. The preprocessing and token rules follow @huggingface/jinja (which
// transformers.js renders chat templates with): lstrip_blocks and trim_blocks are on, a single
// final newline is dropped, `{%-`/`-%}` strip white space, and a sign right after an operator
// or an opening bracket is part of a number literal.
#include "chat/lexer.h"

#include <array>
#include <cstring>
#include <utility>

#include "chat/value.h"
#include "tfm/error.h"

namespace tfm::chat {

std::string describe_position(const std::string& source, std::size_t offset) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < offset && i < source.size(); ++i) {
    if (source[i] == '\n') { ++line; col = 1; } else { ++col; }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}

std::string one_line(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7f) { out += "\\x"; out += hex[u >> 4]; out += hex[u & 15]; }
    else out += c;
  }
  return out;
}

namespace {

// The template after preprocessing, each byte remembering where it came from.
struct Source {
  std::string text;
  std::vector<std::uint32_t> origin;
};

bool line_start(const std::string& s, std::size_t i) {
  return i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r';
}

Source preprocess(const std::string& raw) {
  std::size_t n = raw.size();
  if (n > 0 && raw[n - 1] == '\n') --n;  // a single trailing newline is not part of the output
  // lstrip_blocks: spaces and tabs from the start of a line to a `{%` / `{#` are dropped.
  Source a;
  for (std::size_t i = 0; i < n;) {
    if (line_start(raw, i)) {
      std::size_t j = i;
      while (j < n && (raw[j] == ' ' || raw[j] == '\t')) ++j;
      if (j + 1 < n && raw[j] == '{' && (raw[j + 1] == '#' || raw[j + 1] == '%' || raw[j + 1] == '-')) i = j;
    }
    const std::size_t stop = i + 1;
    for (; i < stop; ++i) {
      a.text += raw[i];
      a.origin.push_back(static_cast<std::uint32_t>(i));
    }
  }
  // trim_blocks: the first newline after `%}` / `#}` (or `-}`) is dropped.
  Source b;
  for (std::size_t i = 0; i < a.text.size(); ++i) {
    if (a.text[i] == '\n' && i >= 2 && a.text[i - 1] == '}' && std::strchr("#%-", a.text[i - 2]) != nullptr) continue;
    b.text += a.text[i];
    b.origin.push_back(a.origin[i]);
  }
  b.origin.push_back(static_cast<std::uint32_t>(n));  // end of input
  return b;
}

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& raw) : raw_(raw), src_(preprocess(raw)), s_(src_.text) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) step();
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    fail("chat template", describe_position(raw_, src_.origin[std::min(pos_, s_.size())]), ": ", one_line(what));
  }
  void push(Tok t, std::string v, std::size_t at) {
    tokens_.push_back(Token{t, std::move(v), src_.origin[at]});
  }
  bool at(const char* seq) const { return s_.compare(pos_, std::strlen(seq), seq) == 0; }

  // The white space JS's \s matches, at pos_ (UTF-8); returns its byte length or 0.
  std::size_t space_len(std::size_t i) const {
    const auto c = static_cast<unsigned char>(s_[i]);
    if (c < 0x80) return is_js_space(c) ? 1 : 0;
    const std::string one = utf8_chars(s_.substr(i, 4)).front();
    return js_trim(one, true, false).empty() ? one.size() : 0;
  }
  void skip_space() {
    while (pos_ < s_.size()) {
      const std::size_t n = space_len(pos_);
      if (n == 0) break;
      pos_ += n;
    }
  }
  void strip_trailing_text() {
    if (tokens_.empty() || tokens_.back().type != Tok::Text) return;
    tokens_.back().value = js_trim(tokens_.back().value, false, true);
    if (tokens_.back().value.empty()) tokens_.pop_back();
  }
  // Like the reference's consumeWhile: running into the end of input is an error.
  template <class Pred>
  std::string consume_while(Pred pred) {
    std::string out;
    while (pos_ < s_.size() && pred(s_[pos_])) {
      if (s_[pos_] == '\\') {
        if (++pos_ >= s_.size()) error("Unexpected end of input");
        const char e = s_[pos_++];
        if (e == 'x' || e == 'u') {
          const std::size_t len = e == 'x' ? 2 : 4;
          const std::string hex = s_.substr(pos_, len);
          if (hex.size() != len || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            error("Invalid hexadecimal escape sequence: \\" + std::string(1, e) + hex);
          append_utf8(out, static_cast<unsigned>(std::stoul(hex, nullptr, 16)));
          pos_ += len;
          continue;
        }
        static const std::array<std::pair<char, char>, 9> escapes{
            {{'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'b', '\b'}, {'f', '\f'}, {'v', '\v'}, {'\'', '\''}, {'"', '"'},
             {'\\', '\\'}}};
        bool known = false;
        for (auto [k, v] : escapes)
          if (k == e) { out += v; known = true; }
        if (!known) error(std::string("Unexpected escaped character: ") + e);
        continue;
      }
      out += s_[pos_++];
      if (pos_ >= s_.size()) error("Unexpected end of input");
    }
    return out;
  }
  std::string number_tail(std::string digits) {
    if (pos_ + 1 < s_.size() && s_[pos_] == '.' && is_digit(s_[pos_ + 1])) {
      ++pos_;
      digits += '.';
      digits += consume_while(is_digit);
    }
    return digits;
  }

  void step();

  const std::string& raw_;
  Source src_;
  const std::string& s_;
  std::size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

void Lexer::step() {
  const Tok last = tokens_.empty() ? Tok::Text : tokens_.back().type;
  const bool text_mode = tokens_.empty() || last == Tok::CloseStatement || last == Tok::CloseExpression ||
                         last == Tok::Comment;
  if (text_mode) {
    const std::size_t start = pos_;
    while (pos_ < s_.size() &&
           !(s_[pos_] == '{' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '%' || s_[pos_ + 1] == '{' || s_[pos_ + 1] == '#')))
      ++pos_;
    if (pos_ > start) {
      push(Tok::Text, s_.substr(start, pos_ - start), start);
      return;
    }
  }
  const std::size_t start = pos_;
  if (at("{#")) {
    pos_ += 2;
    const bool strip_before = pos_ < s_.size() && s_[pos_] == '-';
    if (strip_before) ++pos_;
    std::string comment;
    while (!(pos_ + 1 < s_.size() && s_[pos_] == '#' && s_[pos_ + 1] == '}')) {
      if (pos_ + 2 >= s_.size()) error("Missing end of comment tag");
      comment += s_[pos_++];
    }
    const bool strip_after = !comment.empty() && comment.back() == '-';
    if (strip_after) comment.pop_back();
    if (strip_before) strip_trailing_text();
    push(Tok::Comment, comment, start);
    pos_ += 2;
    if (strip_after) skip_space();
    return;
  }
  if (at("{%-")) {
    strip_trailing_text();
    push(Tok::OpenStatement, "{%", start);
    pos_ += 3;
    return;
  }
  if (at("{{-")) {
    strip_trailing_text();
    push(Tok::OpenExpression, "{{", start);
    curly_depth_ = 0;
    pos_ += 3;
    return;
  }
  // White space inside a tag is skipped; running into the end of input there is an error.
  while (pos_ < s_.size()) {
    const std::size_t n = space_len(pos_);
    if (n == 0) break;
    pos_ += n;
    if (pos_ >= s_.size()) error("Unexpected end of input");
  }
  const std::size_t here = pos_;
  if (at("-%}")) {
    push(Tok::CloseStatement, "%}", here);
    pos_ += 3;
    skip_space();
    return;
  }
  if (at("-}}")) {
    push(Tok::CloseExpression, "}}", here);
    pos_ += 3;
    skip_space();
    return;
  }
  const char c = s_[pos_];
  if (c == '-' || c == '+') {
    if (tokens_.empty() || last == Tok::Text) error(std::string("Unexpected character: ") + c);
    const bool binary = last == Tok::Identifier || last == Tok::Number || last == Tok::String ||
                        last == Tok::CloseParen || last == Tok::CloseSquare;
    if (!binary) {
      ++pos_;
      std::string num = consume_while(is_digit);
      if (!num.empty()) num = number_tail(num);
      std::string text(1, c);
      text += num;
      push(num.empty() ? Tok::Unary : Tok::Number, std::move(text), here);
      return;
    }
  }
  static const std::array<std::pair<const char*, Tok>, 29> table{{
      {"{%", Tok::OpenStatement}, {"%}", Tok::CloseStatement}, {"{{", Tok::OpenExpression},
      {"}}", Tok::CloseExpression}, {"(", Tok::OpenParen}, {")", Tok::CloseParen}, {"{", Tok::OpenCurly},
      {"}", Tok::CloseCurly}, {"[", Tok::OpenSquare}, {"]", Tok::CloseSquare}, {",", Tok::Comma},
      {".", Tok::Dot}, {":", Tok::Colon}, {"|", Tok::Pipe}, {"<=", Tok::Comparison}, {">=", Tok::Comparison},
      {"==", Tok::Comparison}, {"!=", Tok::Comparison}, {"<", Tok::Comparison}, {">", Tok::Comparison},
      {"+", Tok::Additive}, {"-", Tok::Additive}, {"~", Tok::Additive}, {"**", Tok::Power},
      {"*", Tok::Multiplicative}, {"//", Tok::Multiplicative}, {"/", Tok::Multiplicative},
      {"%", Tok::Multiplicative}, {"=", Tok::Equals}}};
  for (const auto& [seq, type] : table) {
    if (type == Tok::CloseExpression && curly_depth_ > 0) continue;  // `}}` closing a dict literal
    if (!at(seq)) continue;
    push(type, seq, here);
    if (type == Tok::OpenExpression) curly_depth_ = 0;
    if (type == Tok::OpenCurly) ++curly_depth_;
    if (type == Tok::CloseCurly) --curly_depth_;
    pos_ += std::strlen(seq);
    return;
  }
  if (c == '\'' || c == '"') {
    ++pos_;
    std::string str = consume_while([c](char x) { return x != c; });
    push(Tok::String, std::move(str), here);
    ++pos_;
    return;
  }
  if (is_digit(c)) {
    std::string num = consume_while(is_digit);
    if (last != Tok::Dot) num = number_tail(num);
    push(Tok::Number, std::move(num), here);
    return;
  }
  if (is_word(c)) {
    push(Tok::Identifier, consume_while(is_word), here);
    return;
  }
  error(std::string("Unexpected character: ") + c);
}

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace tfm::chat
