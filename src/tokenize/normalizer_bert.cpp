// BertNormalizer: clean_text (drop NUL, U+FFFD and control chars; whitespace -> ' '),
// handle_chinese_chars (spaces around each CJK ideograph), strip_accents (NFD, drop Mn),
// lowercase: in that order, as HF.
#include "tokenize/components.h"

namespace tfm::tok {

namespace {

class BertNormalizer final : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {
    nfd_ = make_unicode_normalizer(uprops::Form::nfd);
    lowercase_ = make_lowercase();
  }
  void normalize(Piece& p) const override {
    if (clean_) {
      transform_chars(p, [](std::uint32_t c, std::vector<std::uint32_t>& out) {
        const bool ws = c == '\t' || c == '\n' || c == '\r' || uprops::is_whitespace(c);
        const bool control = !(c == '\t' || c == '\n' || c == '\r') && uprops::is_other(c);
        if (c == 0 || c == 0xFFFD || control) return;
        out.push_back(ws ? ' ' : c);
      });
    }
    if (chinese_) {
      transform_chars(p, [](std::uint32_t c, std::vector<std::uint32_t>& out) {
        if (uprops::is_cjk(c)) {
          out.push_back(' ');
          out.push_back(c);
          out.push_back(' ');
        } else {
          out.push_back(c);
        }
      });
    }
    if (strip_) {
      nfd_->normalize(p);
      transform_chars(p, [](std::uint32_t c, std::vector<std::uint32_t>& out) {
        if (!uprops::is_mark_nonspacing(c)) out.push_back(c);
      });
    }
    if (lower_) lowercase_->normalize(p);
  }

 private:
  bool clean_, chinese_, strip_, lower_;
  std::unique_ptr<Normalizer> nfd_, lowercase_;
};

}  // namespace

std::unique_ptr<Normalizer> make_bert_normalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents,
                                                 bool lowercase) {
  return std::make_unique<BertNormalizer>(clean_text, handle_chinese_chars, strip_accents, lowercase);
}

}  // namespace tfm::tok
