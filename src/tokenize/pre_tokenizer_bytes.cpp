// ByteLevel (GPT-2's split + byte alphabet) and Metaspace pre-tokenizers.
#include "tokenize/components.h"
#include "tokenize/pretokenizer.h"

namespace tfm::tok {

namespace {

// use_regex runs the hand-written GPT-2 splitter (pretokenizer.cpp): HF's ByteLevel regex
// is tiktoken's gpt2 pattern, against which that splitter is proven equal
// (tests/tokenizer_parity). Pieces keep their raw bytes, flagged byte_level.
class ByteLevelPre final : public PreTokenizer {
 public:
  ByteLevelPre(bool prefix, bool regex) : add_prefix_space_(prefix), use_regex_(regex) {}
  void pre_tokenize(PreTokenized& pt) const override {
    if (!add_prefix_space_ && !use_regex_) {  // Llama-3, Qwen: only the flag to set, in place
      for (Split& s : pt)
        if (!s.done) s.piece.byte_level = true;
      return;
    }
    split_each(pt, [&](const Piece& in, std::vector<Piece>& out) {
      Piece p = in;
      if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) prepend(p, " ");
      if (!use_regex_) {
        out.push_back(std::move(p));
      } else {
        thread_local std::vector<Span> spans;
        spans.clear();
        gpt2_split(p.text, spans);
        for (const Span& s : spans) out.push_back(p.slice(s.begin, s.end));
      }
      for (Piece& o : out) o.byte_level = true;
    });
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::uint32_t rep, PrependScheme scheme, bool split) : scheme_(scheme), split_(split), rep_cp_(rep) {
    append_utf8_cp(rep_, rep);
  }
  void pre_tokenize(PreTokenized& pt) const override {
    split_each(pt, [&](const Piece& in, std::vector<Piece>& out) {
      Piece p = in;
      if (p.text.find(' ') != std::string::npos) {
        p.materialize();
        std::string text;
        std::vector<Range> align;
        for (std::size_t i = 0; i < p.text.size(); ++i) {
          if (p.text[i] == ' ') {
            text += rep_;
            align.insert(align.end(), rep_.size(), p.align[i]);
          } else {
            text += p.text[i];
            align.push_back(p.align[i]);
          }
        }
        p.text = std::move(text);
        p.align = std::move(align);
      }
      const bool starts = p.text.compare(0, rep_.size(), rep_) == 0;
      if (!starts && (scheme_ == PrependScheme::always || (scheme_ == PrependScheme::first && p.original_whole().begin == 0)))
        prepend(p, rep_);
      if (!split_) {
        out.push_back(std::move(p));
        return;
      }
      Matches m;
      std::uint32_t last = 0;
      for (std::size_t at = p.text.find(rep_); at != std::string::npos; at = p.text.find(rep_, at + rep_.size())) {
        if (last < at) m.push_back({{last, static_cast<std::uint32_t>(at)}, false});
        m.push_back({{static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(at + rep_.size())}, true});
        last = static_cast<std::uint32_t>(at + rep_.size());
      }
      if (last < p.text.size()) m.push_back({{last, static_cast<std::uint32_t>(p.text.size())}, false});
      split_piece(p, m, SplitBehavior::merged_with_next, out);
    });
  }

 private:
  PrependScheme scheme_;
  bool split_;
  std::uint32_t rep_cp_;
  std::string rep_;
};

}  // namespace

std::unique_ptr<PreTokenizer> make_byte_level_pre(bool add_prefix_space, bool use_regex) {
  return std::make_unique<ByteLevelPre>(add_prefix_space, use_regex);
}
std::unique_ptr<PreTokenizer> make_metaspace(std::uint32_t replacement, PrependScheme scheme, bool split) {
  return std::make_unique<Metaspace>(replacement, scheme, split);
}

}  // namespace tfm::tok
