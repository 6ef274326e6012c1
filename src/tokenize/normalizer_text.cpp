// Strip, Replace (literal or regex), Prepend and Sequence normalizers.
#include "tokenize/components.h"
#include "tokenize/regex.h"

namespace tfm::tok {

namespace {

class Strip final : public Normalizer {
 public:
  Strip(bool l, bool r) : left_(l), right_(r) {}
  void normalize(Piece& p) const override {
    std::size_t b = 0, e = p.text.size();
    if (left_) {
      while (b < e) {
        std::uint32_t cp;
        const int len = next_cp(p.text, b, cp);
        if (!uprops::is_whitespace(cp)) break;
        b += static_cast<std::size_t>(len);
      }
    }
    if (right_) {
      while (e > b) {
        std::size_t s = e - 1;
        while (s > b && (static_cast<unsigned char>(p.text[s]) & 0xC0) == 0x80) --s;
        std::uint32_t cp;
        next_cp(p.text, s, cp);
        if (!uprops::is_whitespace(cp)) break;
        e = s;
      }
    }
    if (b != 0 || e != p.text.size()) p = p.slice(b, e);
  }

 private:
  bool left_, right_;
};

// Each match is replaced by content.
class Replace final : public Normalizer {
 public:
  Replace(const std::string& literal, const std::string& regex, const std::string& content)
      : literal_(literal), content_(content) {
    if (!regex.empty()) re_ = std::make_unique<Regex>(regex, "tokenizer.json: Replace normalizer");
  }
  void normalize(Piece& p) const override {
    thread_local std::vector<Range> found;
    found.clear();
    if (re_) {
      re_->find_all(p.text, found);
    } else if (!literal_.empty()) {
      for (std::size_t at = p.text.find(literal_); at != std::string::npos; at = p.text.find(literal_, at + literal_.size()))
        found.push_back({static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + literal_.size())});
    }
    if (found.empty()) return;
    p.materialize();
    std::string text;
    std::vector<Range> align;
    text.reserve(p.text.size() + found.size() * content_.size());
    align.reserve(text.capacity());
    std::size_t prev = 0;
    for (const Range& m : found) {
      text.append(p.text, prev, m.begin - prev);
      align.insert(align.end(), p.align.begin() + static_cast<std::ptrdiff_t>(prev),
                   p.align.begin() + static_cast<std::ptrdiff_t>(m.begin));
      text += content_;
      // HF: the match is removed and the content inserted after it, aligned to the
      // match's last char (so "  " -> " " maps to the second space)
      align.insert(align.end(), content_.size(), m.end > 0 ? p.align[m.end - 1] : Range{0, 0});
      prev = m.end;
    }
    text.append(p.text, prev, std::string::npos);
    align.insert(align.end(), p.align.begin() + static_cast<std::ptrdiff_t>(prev), p.align.end());
    p.text = std::move(text);
    p.align = std::move(align);
  }

 private:
  std::string literal_, content_;
  std::unique_ptr<Regex> re_;
};

class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string s) : prefix_(std::move(s)) {}
  void normalize(Piece& p) const override { prepend(p, prefix_); }

 private:
  std::string prefix_;
};

class NormalizerSequence final : public Normalizer {
 public:
  explicit NormalizerSequence(std::vector<std::unique_ptr<Normalizer>> parts) : parts_(std::move(parts)) {}
  void normalize(Piece& p) const override {
    for (const auto& n : parts_) n->normalize(p);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

}  // namespace

std::unique_ptr<Normalizer> make_strip(bool left, bool right) { return std::make_unique<Strip>(left, right); }
std::unique_ptr<Normalizer> make_replace(const std::string& literal, const std::string& regex, const std::string& content) {
  return std::make_unique<Replace>(literal, regex, content);
}
std::unique_ptr<Normalizer> make_prepend(const std::string& prefix) { return std::make_unique<Prepend>(prefix); }
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> parts) {
  return std::make_unique<NormalizerSequence>(std::move(parts));
}

}  // namespace tfm::tok
