// Pre-tokenizers that split by a pattern: Split (literal or regex, any behavior, invert),
// Whitespace, WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit,
// and Sequence.
#include "tokenize/components.h"
#include "tokenize/regex.h"

namespace tfm::tok {

namespace {

// HF's Pattern for Fn(char) -> bool: every matching char is a match of its own.
template <class Pred>
Matches char_matches(std::string_view s, Pred&& pred) {
  Matches m;
  if (s.empty()) {
    m.push_back({{0, 0}, false});
    return m;
  }
  std::uint32_t last = 0;
  for (std::size_t i = 0; i < s.size();) {
    std::uint32_t cp;
    const auto len = static_cast<std::size_t>(next_cp(s, i, cp));
    if (pred(cp)) {
      if (last < i) m.push_back({{last, static_cast<std::uint32_t>(i)}, false});
      m.push_back({{static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + len)}, true});
      last = static_cast<std::uint32_t>(i + len);
    }
    i += len;
  }
  if (last < s.size()) m.push_back({{last, static_cast<std::uint32_t>(s.size())}, false});
  return m;
}

void invert(Matches& m) {
  for (auto& [r, is_match] : m) is_match = !is_match;
}

class SplitPre final : public PreTokenizer {
 public:
  SplitPre(const std::string& literal, const std::string& regex, SplitBehavior b, bool inv)
      : literal_(literal), behavior_(b), invert_(inv) {
    // Char-level tokenizers that tfm wrote before it read tokenizer.json with HF's regex engine
    // split on Python's dotall "(?s)."; Oniguruma's Ruby syntax (HF's) has no (?s) and spells
    // "any code point, newlines too" as [\s\S], which tfm writes now.
    const std::string pattern = regex == "(?s)." ? "[\\s\\S]" : regex;
    if (!pattern.empty()) re_ = std::make_unique<Regex>(pattern, "tokenizer.json: Split pre-tokenizer");
  }
  void pre_tokenize(PreTokenized& pt) const override {
    split_each(pt, [&](const Piece& p, std::vector<Piece>& out) {
      Matches m = re_ ? re_->find_matches(p.text) : literal_matches(p.text);
      if (invert_) invert(m);
      split_piece(p, m, behavior_, out);
    });
  }

 private:
  Matches literal_matches(const std::string& s) const {
    Matches m;
    if (literal_.empty()) {  // HF: an empty pattern matches nothing
      m.push_back({{0, static_cast<std::uint32_t>(s.size())}, false});
      return m;
    }
    if (s.empty()) {
      m.push_back({{0, 0}, false});
      return m;
    }
    std::uint32_t prev = 0;
    for (std::size_t at = s.find(literal_); at != std::string::npos; at = s.find(literal_, at + literal_.size())) {
      if (prev != at) m.push_back({{prev, static_cast<std::uint32_t>(at)}, false});
      m.push_back({{static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + literal_.size())}, true});
      prev = static_cast<std::uint32_t>(at + literal_.size());
    }
    if (prev != s.size()) m.push_back({{prev, static_cast<std::uint32_t>(s.size())}, false});
    return m;
  }
  std::string literal_;
  std::unique_ptr<Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

// Whitespace: the words of the regex \w+|[^\w\s]+ (Rust regex classes), whitespace removed.
class Whitespace final : public PreTokenizer {
 public:
  void pre_tokenize(PreTokenized& pt) const override {
    split_each(pt, [](const Piece& p, std::vector<Piece>& out) {
      const std::string& s = p.text;
      std::size_t i = 0;
      while (i < s.size()) {
        std::uint32_t cp;
        auto len = static_cast<std::size_t>(next_cp(s, i, cp));
        if (uprops::is_whitespace(cp)) {
          i += len;
          continue;
        }
        const bool word = uprops::is_word_char(cp);
        std::size_t j = i + len;
        while (j < s.size()) {
          len = static_cast<std::size_t>(next_cp(s, j, cp));
          if (uprops::is_whitespace(cp) || uprops::is_word_char(cp) != word) break;
          j += len;
        }
        out.push_back(p.slice(i, j));
        i = j;
      }
    });
  }
};

template <class Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Pred pred, SplitBehavior b) : pred_(pred), behavior_(b) {}
  void pre_tokenize(PreTokenized& pt) const override {
    split_each(pt, [&](const Piece& p, std::vector<Piece>& out) { split_piece(p, char_matches(p.text, pred_), behavior_, out); });
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

template <class Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, SplitBehavior b) {
  return std::make_unique<CharSplit<Pred>>(pred, b);
}

class PreSequence final : public PreTokenizer {
 public:
  explicit PreSequence(std::vector<std::unique_ptr<PreTokenizer>> parts) : parts_(std::move(parts)) {}
  void pre_tokenize(PreTokenized& pt) const override {
    for (const auto& p : parts_) p->pre_tokenize(pt);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

bool is_ws(std::uint32_t c) { return uprops::is_whitespace(c); }
bool is_punct(std::uint32_t c) { return uprops::is_punctuation(c); }
bool is_num(std::uint32_t c) { return uprops::is_numeric(c); }

}  // namespace

std::unique_ptr<PreTokenizer> make_split(const std::string& literal, const std::string& regex, SplitBehavior behavior,
                                         bool inv) {
  return std::make_unique<SplitPre>(literal, regex, behavior, inv);
}
std::unique_ptr<PreTokenizer> make_whitespace() { return std::make_unique<Whitespace>(); }
std::unique_ptr<PreTokenizer> make_whitespace_split() { return char_split(&is_ws, SplitBehavior::removed); }
std::unique_ptr<PreTokenizer> make_bert_pre() {
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  parts.push_back(char_split(&is_ws, SplitBehavior::removed));
  parts.push_back(char_split(&is_punct, SplitBehavior::isolated));
  return std::make_unique<PreSequence>(std::move(parts));
}
std::unique_ptr<PreTokenizer> make_punctuation(SplitBehavior behavior) { return char_split(&is_punct, behavior); }
std::unique_ptr<PreTokenizer> make_digits(bool individual) {
  return char_split(&is_num, individual ? SplitBehavior::isolated : SplitBehavior::contiguous);
}
std::unique_ptr<PreTokenizer> make_char_delimiter(std::uint32_t delimiter) {
  return char_split([delimiter](std::uint32_t c) { return c == delimiter; }, SplitBehavior::removed);
}
std::unique_ptr<PreTokenizer> make_pre_sequence(std::vector<std::unique_ptr<PreTokenizer>> parts) {
  return std::make_unique<PreSequence>(std::move(parts));
}

}  // namespace tfm::tok
