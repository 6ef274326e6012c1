// Unigram (SentencePiece): the best-scoring segmentation by Viterbi over the lattice of
// vocabulary pieces. A char no piece starts with becomes unk with score min - 10;
// consecutive unks are fused; with byte_fallback an unknown piece is spelled in <0xXX>
// byte tokens. Same tie-breaking as HF (first-found best path wins).
#include <algorithm>
#include <limits>

#include "tfm/error.h"
#include "tokenize/components.h"

namespace tfm::tok {

namespace {

class Unigram final : public Model {
 public:
  Unigram(std::vector<std::string> vocab, std::vector<double> scores, std::int32_t unk_id, bool byte_fallback,
          const char* where)
      : scores_(std::move(scores)), unk_(unk_id), byte_fallback_(byte_fallback) {
    vocab_ = std::move(vocab);
    TFM_CHECK(unk_ < static_cast<std::int32_t>(vocab_.size()), where, "Unigram unk_id ", unk_, " out of range");
    double min_score = std::numeric_limits<double>::infinity();
    for (std::size_t id = 0; id < vocab_.size(); ++id) {
      ids_.emplace(vocab_[id], static_cast<std::int32_t>(id));
      max_bytes_ = std::max(max_bytes_, vocab_[id].size());
      min_score = std::min(min_score, scores_[id]);
    }
    unk_score_ = (vocab_.empty() ? 0.0 : min_score) - 10.0;
    for (int b = 0; b < 256; ++b) {
      char code[8];
      std::snprintf(code, sizeof code, "<0x%02X>", b);
      fallback_[b] = token_to_id(code);
    }
  }

  void tokenize(const Piece& p, std::vector<Token>& out) const override {
    const std::string& s = p.text;
    const std::size_t n = s.size();
    if (n == 0) return;
    struct Node {
      double score = 0;
      std::int64_t start = -1;
      std::int32_t id = -1;
    };
    std::vector<Node> best(n + 1);
    best[0].start = 0;
    for (std::size_t at = 0; at < n;) {
      std::uint32_t cp;
      const auto mblen = static_cast<std::size_t>(next_cp(s, at, cp));
      const double here = best[at].score;
      bool single = false;
      const std::size_t limit = std::min(n, at + max_bytes_);
      for (std::size_t end = at + 1; end <= limit; ++end) {
        const std::int32_t id = token_to_id(std::string_view(s).substr(at, end - at));
        if (id < 0) continue;
        Node& t = best[end];
        const double cand = here + scores_[id];
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<std::int64_t>(at), id};
        if (end - at == mblen) single = true;
      }
      if (!single) {
        TFM_CHECK(unk_ >= 0, "tokenizer", "Unigram: no piece covers '", s.substr(at, mblen), "' and there is no unk_id");
        Node& t = best[at + mblen];
        const double cand = here + unk_score_;
        if (t.start < 0 || cand > t.score) t = {cand, static_cast<std::int64_t>(at), unk_};
      }
      at += mblen;
    }
    // Back from the end; runs of unk fuse into one piece.
    thread_local std::vector<Range> pieces;
    pieces.clear();
    bool in_unk = false;
    for (std::size_t end = n; end > 0;) {
      const Node& node = best[end];
      const auto start = static_cast<std::size_t>(node.start);
      const bool unk = unk_ >= 0 && node.id == unk_;
      if (unk && in_unk)
        pieces.back().begin = static_cast<std::uint32_t>(start);
      else
        pieces.push_back({static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(end)});
      in_unk = unk;
      end = start;
    }
    std::reverse(pieces.begin(), pieces.end());
    for (const Range& r : pieces) {
      const std::string_view text = std::string_view(s).substr(r.begin, r.end - r.begin);
      const std::int32_t id = token_to_id(text);
      if (id >= 0) {
        out.push_back({id, r, {}});
        continue;
      }
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char c : text) all &= fallback_[c] >= 0;
        if (all) {
          for (unsigned char c : text) out.push_back({fallback_[c], r, {}});
          continue;
        }
      }
      out.push_back({unk_, r, std::string(text)});
    }
  }

 private:
  std::vector<double> scores_;
  std::int32_t unk_;
  bool byte_fallback_;
  double unk_score_ = 0;
  std::size_t max_bytes_ = 0;
  std::int32_t fallback_[256];
};

}  // namespace

std::unique_ptr<Model> make_unigram(std::vector<std::string> vocab, std::vector<double> scores, std::int32_t unk_id,
                                    bool byte_fallback, const char* where) {
  return std::make_unique<Unigram>(std::move(vocab), std::move(scores), unk_id, byte_fallback, where);
}

}  // namespace tfm::tok
