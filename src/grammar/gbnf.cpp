// GBNF text to byte-level rules. The syntax is llama.cpp's (grammars/README.md there):
//   root  ::= object                      # a comment
//   value ::= "lit\n" | [a-z0-9_] | [^"\\] | . | (group)* | x+ | x? | x{2} | x{2,} | x{2,5}
// Newlines may appear anywhere inside a rule; a rule ends where the next `name ::=` begins.
// Repetitions become helper rules (x* : R ::= x R | empty, right-recursive so the matcher's
// stacks do not grow with the count), classes become their UTF-8 byte sequences.
#include <map>

#include "base/utf8.h"
#include "grammar/codepoints.h"
#include "grammar/rules.h"
#include "tfm/error.h"
#include "tfm/grammar.h"

namespace tfm {
namespace {

constexpr std::size_t kMaxElems = 1 << 20;  // a hostile {m,n} cannot make the rules unbounded
constexpr std::int64_t kMaxRepeat = 4096;

using Seq = std::vector<GrammarElem>;

class Parser {
 public:
  Parser(std::string_view text, std::string where) : t_(text), where_(std::move(where)) {}

  GrammarRules parse() {
    skip_space();
    while (i_ < t_.size()) {
      const std::size_t line = line_;
      const std::string name = parse_name();
      skip_space();
      if (!take("::=")) error("expected '::=' after rule name '", name, "'");
      const std::int32_t id = rule(name);
      if (defined_[static_cast<std::size_t>(id)]) error("rule '", name, "' is defined twice");
      defined_[static_cast<std::size_t>(id)] = true;
      def_line_[name] = line;
      parse_alternatives(id, 0);
      if (i_ < t_.size() && t_[i_] == ')') error("unbalanced ')'");
    }
    for (std::size_t r = 0; r < defined_.size(); ++r)
      if (!defined_[r]) {
        line_ = use_line_[r];
        error("rule '", g_.names[r], "' is used but not defined");
      }
    const auto root = ids_.find("root");
    if (root == ids_.end()) fail(where_, "no 'root' rule");
    g_.root = root->second;
    return std::move(g_);
  }

 private:
  template <class... A>
  [[noreturn]] void error(const A&... a) {
    fail(where_, "line ", line_, ": ", a...);
  }

  // ---- rules and elements ----
  std::int32_t rule(const std::string& name) {
    const auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(g_.names.size());
    ids_.emplace(name, id);
    g_.names.push_back(name);
    g_.alternatives.emplace_back();
    defined_.push_back(false);
    use_line_.push_back(line_);
    return id;
  }
  std::int32_t helper(std::int32_t parent) {
    std::string name = g_.names[static_cast<std::size_t>(parent)] + "_" + std::to_string(helpers_++);
    const std::int32_t id = rule(name);
    defined_[static_cast<std::size_t>(id)] = true;
    return id;
  }
  void add_alt(std::int32_t r, const Seq& seq) {
    if (g_.elems.size() + seq.size() + 1 > kMaxElems) error("grammar too large (over ", kMaxElems, " elements)");
    g_.alternatives[static_cast<std::size_t>(r)].push_back(static_cast<std::int32_t>(g_.elems.size()));
    g_.elems.insert(g_.elems.end(), seq.begin(), seq.end());
    g_.elems.push_back({GrammarElem::end, 0});
  }
  GrammarElem byte_elem(const ByteSet& s) {
    const auto it = set_ids_.find(s);
    if (it != set_ids_.end()) return {GrammarElem::bytes, it->second};
    const auto id = static_cast<std::int32_t>(g_.byte_sets.size());
    g_.byte_sets.push_back(s);
    set_ids_.emplace(s, id);
    return {GrammarElem::bytes, id};
  }
  // One element matching exactly one code point of `set`.
  Seq class_elems(const CodePointSet& set, std::int32_t parent) {
    const auto seqs = utf8_sequences(set);
    if (seqs.empty()) error("character class matches nothing");
    ByteSet single{};
    bool all_single = true;
    for (const auto& s : seqs) {
      if (s.size() != 1) all_single = false;
      else byteset_add(single, s[0].first, s[0].second);
    }
    if (all_single) return {byte_elem(single)};
    const std::int32_t h = helper(parent);
    if (single != ByteSet{}) add_alt(h, {byte_elem(single)});
    for (const auto& s : seqs) {
      if (s.size() == 1) continue;
      Seq alt;
      for (const auto& [lo, hi] : s) {
        ByteSet b{};
        byteset_add(b, lo, hi);
        alt.push_back(byte_elem(b));
      }
      add_alt(h, alt);
    }
    return {{GrammarElem::ref, h}};
  }

  // ---- text ----
  bool take(std::string_view s) {
    if (t_.substr(i_, s.size()) != s) return false;
    i_ += s.size();
    return true;
  }
  void skip_space() {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        if (c == '\n') ++line_;
        ++i_;
      } else {
        break;
      }
    }
  }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  }
  std::string parse_name() {
    const std::size_t b = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    if (i_ == b) error("expected a rule name at '", t_.substr(b, 10), "'");
    return std::string(t_.substr(b, i_ - b));
  }
  // Is a new rule starting here (`name ::=`)?
  bool at_rule_start() const {
    std::size_t j = i_;
    while (j < t_.size() && name_char(t_[j])) ++j;
    if (j == i_) return false;
    while (j < t_.size() && (t_[j] == ' ' || t_[j] == '\t' || t_[j] == '\r' || t_[j] == '\n')) ++j;
    return t_.substr(j, 3) == "::=";
  }
  std::uint32_t hex(int digits) {
    std::uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= t_.size()) error("unfinished escape");
      const char c = t_[i_++];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) error("bad hex digit '", c, "' in escape");
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }
  // One character of a literal or class: an escape or a UTF-8 sequence.
  std::uint32_t parse_char() {
    if (i_ >= t_.size()) error("unexpected end of grammar");
    const auto c = static_cast<unsigned char>(t_[i_]);
    if (c == '\\') {
      ++i_;
      if (i_ >= t_.size()) error("unfinished escape");
      const char e = t_[i_++];
      switch (e) {
        case 'x': return hex(2);
        case 'u': return check_cp(hex(4));
        case 'U': return check_cp(hex(8));
        case 't': return '\t';
        case 'r': return '\r';
        case 'n': return '\n';
        case '\\': case '"': case '[': case ']': case '-': case '^': case '/': return static_cast<unsigned char>(e);
        default: error("unknown escape '\\", e, "'");
      }
    }
    const int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i_ + static_cast<std::size_t>(n) > t_.size()) error("invalid UTF-8 at byte ", i_);
    std::uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(t_[i_ + static_cast<std::size_t>(k)]);
      if ((b & 0xC0) != 0x80) error("invalid UTF-8 at byte ", i_);
      cp = (cp << 6) | (b & 0x3F);
    }
    i_ += static_cast<std::size_t>(n);
    return check_cp(cp);
  }
  std::uint32_t check_cp(std::uint32_t cp) {
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) error("code point U+", std::hex, cp, " is not a character");
    return cp;
  }

  // ---- structure ----
  void parse_alternatives(std::int32_t r, int depth) {
    if (depth > 64) error("groups nested too deeply");
    for (;;) {
      add_alt(r, parse_sequence(r, depth));
      skip_space();
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        continue;
      }
      return;
    }
  }
  Seq parse_sequence(std::int32_t r, int depth) {
    Seq seq;
    for (;;) {
      skip_space();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) return seq;
      Seq atom = parse_atom(r, depth);
      skip_space();
      atom = parse_repetition(std::move(atom), r);
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
  }
  Seq parse_atom(std::int32_t r, int depth) {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      Seq s;
      while (i_ < t_.size() && t_[i_] != '"') {
        if (t_[i_] == '\n') error("newline inside a string literal");
        std::string bytes;
        append_utf8(bytes, parse_char());
        for (const char b : bytes) {
          ByteSet one{};
          byteset_add(one, static_cast<unsigned char>(b), static_cast<unsigned char>(b));
          s.push_back(byte_elem(one));
        }
      }
      if (!take("\"")) error("unterminated string literal");
      return s;
    }
    if (c == '[') {
      ++i_;
      const bool negated = take("^");
      CodePointSet set;
      while (i_ < t_.size() && t_[i_] != ']') {
        const std::uint32_t lo = parse_char();
        std::uint32_t hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          hi = parse_char();
          if (hi < lo) error("character range out of order");
        }
        set.emplace_back(lo, hi);
      }
      if (!take("]")) error("unterminated character class");
      return class_elems(negated ? complement(set) : normalize(set), r);
    }
    if (c == '.') {
      ++i_;
      return class_elems({{0, kMaxCodePoint}}, r);
    }
    if (c == '(') {
      ++i_;
      const std::int32_t h = helper(r);
      parse_alternatives(h, depth + 1);
      if (!take(")")) error("expected ')'");
      return {{GrammarElem::ref, h}};
    }
    if (name_char(c)) return {{GrammarElem::ref, rule(parse_name())}};
    error("unexpected '", c, "'");
  }
  std::int64_t parse_int() {
    std::int64_t v = 0;
    const std::size_t b = i_;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      v = v * 10 + (t_[i_++] - '0');
      if (v > kMaxRepeat) error("repetition count over ", kMaxRepeat);
    }
    if (i_ == b) error("expected a number in {}");
    return v;
  }
  Seq parse_repetition(Seq atom, std::int32_t r) {
    if (i_ >= t_.size()) return atom;
    std::int64_t lo = 1, hi = 1;  // hi < 0: unbounded
    const char c = t_[i_];
    if (c == '*') lo = 0, hi = -1;
    else if (c == '+') lo = 1, hi = -1;
    else if (c == '?') lo = 0, hi = 1;
    else if (c == '{') {
      ++i_;
      skip_space();
      lo = parse_int();
      skip_space();
      hi = lo;
      if (take(",")) {
        skip_space();
        hi = i_ < t_.size() && t_[i_] == '}' ? -1 : parse_int();
        skip_space();
      }
      if (i_ >= t_.size() || t_[i_] != '}') error("expected '}'");
      if (hi >= 0 && hi < lo) error("repetition {", lo, ",", hi, "} out of order");
    } else {
      return atom;
    }
    ++i_;
    skip_space();
    Seq out;
    for (std::int64_t k = 0; k < lo; ++k) {
      if (out.size() + atom.size() > kMaxElems) error("grammar too large");
      out.insert(out.end(), atom.begin(), atom.end());
    }
    if (hi < 0) {  // R ::= atom R | empty
      const std::int32_t h = helper(r);
      Seq again = atom;
      again.push_back({GrammarElem::ref, h});
      add_alt(h, again);
      add_alt(h, {});
      out.push_back({GrammarElem::ref, h});
    } else if (hi > lo) {  // (atom (atom (...)?)?)?: R1 ::= atom | empty, Rk ::= atom R(k-1) | empty
      std::int32_t inner = -1;
      for (std::int64_t k = 0; k < hi - lo; ++k) {
        const std::int32_t h = helper(r);
        Seq alt = atom;
        if (inner >= 0) alt.push_back({GrammarElem::ref, inner});
        add_alt(h, alt);
        add_alt(h, {});
        inner = h;
      }
      out.push_back({GrammarElem::ref, inner});
    }
    return out;
  }

  std::string_view t_;
  std::string where_;
  std::size_t i_ = 0, line_ = 1;
  GrammarRules g_;
  std::map<std::string, std::int32_t> ids_;
  std::map<ByteSet, std::int32_t> set_ids_;
  std::vector<bool> defined_;
  std::vector<std::size_t> use_line_;
  std::map<std::string, std::size_t> def_line_;
  std::int64_t helpers_ = 0;
};

}  // namespace

Grammar Grammar::parse(std::string_view gbnf, const std::string& where) {
  GrammarRules rules = Parser(gbnf, where).parse();
  finish_rules(rules, where);
  Grammar g;
  g.gbnf_ = std::string(gbnf);
  g.rules_ = std::make_shared<const GrammarRules>(std::move(rules));
  return g;
}

Grammar Grammar::from_json_schema(std::string_view schema, const std::string& where) {
  return parse(json_schema_to_gbnf(schema, where), where);
}

}  // namespace tfm
