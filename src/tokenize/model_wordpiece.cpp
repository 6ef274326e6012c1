// WordPiece (BERT): greedy longest-match-first from the start of the word, pieces after
// the first looked up with the continuing prefix ("##"); a word with an unmatchable rest,
// or longer than max_input_chars_per_word chars, is the unk token as a whole.
#include "tfm/error.h"
#include "tokenize/components.h"

namespace tfm::tok {

namespace {

class WordPiece final : public Model {
 public:
  WordPiece(std::vector<std::string> vocab, const std::string& unk, const std::string& prefix, std::size_t max_chars,
            const char* where)
      : prefix_(prefix), max_chars_(max_chars) {
    vocab_ = std::move(vocab);
    for (std::size_t id = 0; id < vocab_.size(); ++id) ids_.emplace(vocab_[id], static_cast<std::int32_t>(id));
    unk_ = token_to_id(unk);
    TFM_CHECK(unk_ >= 0, where, "WordPiece unk_token '", unk, "' is not in the vocabulary");
    for (const auto& t : vocab_) max_token_bytes_ = std::max(max_token_bytes_, t.size());
  }

  void tokenize(const Piece& p, std::vector<Token>& out) const override {
    const std::string& w = p.text;
    const auto whole = Range{0, static_cast<std::uint32_t>(w.size())};
    std::size_t chars = 0;
    for (std::size_t i = 0; i < w.size(); ++i) chars += (static_cast<unsigned char>(w[i]) & 0xC0) != 0x80;
    if (chars > max_chars_) {
      out.push_back({unk_, whole, {}});
      return;
    }
    const std::size_t mark = out.size();
    std::string key;
    for (std::size_t start = 0; start < w.size();) {
      std::size_t end = std::min(w.size(), start + max_token_bytes_);
      while (end < w.size() && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) --end;  // char boundary
      std::int32_t found = -1;
      while (end > start) {
        key.clear();
        if (start > 0) key = prefix_;
        key.append(w, start, end - start);
        found = token_to_id(key);
        if (found >= 0) break;
        --end;
        while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80) --end;
      }
      if (found < 0) {
        out.resize(mark);
        out.push_back({unk_, whole, {}});
        return;
      }
      out.push_back({found, {static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end)}, {}});
      start = end;
    }
  }

 private:
  std::string prefix_;
  std::size_t max_chars_;
  std::int32_t unk_ = -1;
  std::size_t max_token_bytes_ = 0;
};

class WordLevel final : public Model {
 public:
  WordLevel(std::vector<std::string> vocab, const std::string& unk, const char* where) {
    vocab_ = std::move(vocab);
    for (std::size_t id = 0; id < vocab_.size(); ++id) ids_.emplace(vocab_[id], static_cast<std::int32_t>(id));
    unk_ = unk.empty() ? -1 : token_to_id(unk);
    unk_name_ = unk;
    (void)where;
  }
  void tokenize(const Piece& p, std::vector<Token>& out) const override {
    std::int32_t id = token_to_id(p.text);
    if (id < 0) {
      TFM_CHECK(unk_ >= 0, "tokenizer", "WordLevel: '", p.text, "' is not in the vocabulary and unk_token '", unk_name_,
                "' is missing");
      id = unk_;
    }
    out.push_back({id, {0, static_cast<std::uint32_t>(p.text.size())}, {}});
  }

 private:
  std::int32_t unk_ = -1;
  std::string unk_name_;
};

}  // namespace

std::unique_ptr<Model> make_wordpiece(std::vector<std::string> vocab, const std::string& unk_token,
                                      const std::string& prefix, std::size_t max_input_chars_per_word, const char* where) {
  return std::make_unique<WordPiece>(std::move(vocab), unk_token, prefix, max_input_chars_per_word, where);
}
std::unique_ptr<Model> make_wordlevel(std::vector<std::string> vocab, const std::string& unk_token, const char* where) {
  return std::make_unique<WordLevel>(std::move(vocab), unk_token, where);
}

}  // namespace tfm::tok
