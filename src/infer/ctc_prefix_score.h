// CTC prefix scores (Watanabe et al. 2017, "Hybrid CTC/attention architecture for end-to-end
// speech recognition", Algorithm 2): the log-probability, under a CTC head's frame posteriors,
// that the collapsed output of the whole input begins with a given prefix. Joint CTC/attention
// decoding adds it to the attention decoder's score of each candidate, so a hypothesis that
// skips, repeats or invents words the encoder never heard loses to one the frames support.
//
// Each prefix keeps two log-probabilities per frame t: that frames 0..t spell exactly the
// prefix with frame t on its last label (r_n) or on a blank (r_b). Extending a prefix by one
// label is one pass over the frames.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tfm {

class CtcPrefixScorer {
 public:
  // log_probs: frames x vocab log-probabilities (each frame a log_softmax), row-major.
  CtcPrefixScorer(std::vector<float> log_probs, std::int64_t frames, std::int64_t vocab, std::int32_t blank);

  struct State {
    std::vector<double> r_n, r_b;  // per frame, as above
    std::int32_t last = -1;        // the prefix's last label (-1: the empty prefix)
    double score = 0;              // log P(output begins with the prefix); 0 for the empty one
  };
  // The empty prefix.
  State initial() const;
  // The prefix extended by `label` (not the blank): its state, whose score is the prefix
  // score of the extended prefix.
  State extend(const State& prefix, std::int32_t label) const;
  // log P(output is exactly the prefix): its score when the text ends there.
  double final_score(const State& prefix) const;

  std::int64_t frames() const { return frames_; }
  std::int64_t vocab() const { return vocab_; }
  std::int32_t blank() const { return blank_; }

 private:
  double at(std::int64_t t, std::int32_t k) const { return lp_[static_cast<std::size_t>(t * vocab_ + k)]; }
  std::vector<float> lp_;
  std::int64_t frames_, vocab_;
  std::int32_t blank_;
};

}  // namespace tfm
