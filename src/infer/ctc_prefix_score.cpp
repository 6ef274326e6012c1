// CTC prefix scores (ctc_prefix_score.h), in double precision over float posteriors.
#include "infer/ctc_prefix_score.h"

#include <cmath>
#include <limits>

#include "base/log_add.h"
#include "tfm/error.h"

namespace tfm {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

}  // namespace

CtcPrefixScorer::CtcPrefixScorer(std::vector<float> log_probs, std::int64_t frames, std::int64_t vocab, std::int32_t blank)
    : lp_(std::move(log_probs)), frames_(frames), vocab_(vocab), blank_(blank) {
  TFM_CHECK(frames >= 1 && vocab >= 2, "ctc prefix score", "needs at least one frame and two labels, got ", frames, " x ", vocab);
  TFM_CHECK(static_cast<std::int64_t>(lp_.size()) == frames * vocab, "ctc prefix score", "log-probabilities hold ", lp_.size(),
            " numbers, not ", frames, " x ", vocab);
  TFM_CHECK(blank >= 0 && blank < vocab, "ctc prefix score", "blank ", blank, " is outside the vocabulary of ", vocab);
}

CtcPrefixScorer::State CtcPrefixScorer::initial() const {
  State s;
  s.r_n.assign(static_cast<std::size_t>(frames_), kNegInf);
  s.r_b.resize(static_cast<std::size_t>(frames_));
  double acc = 0;  // the empty prefix: blanks all the way
  for (std::int64_t t = 0; t < frames_; ++t) s.r_b[static_cast<std::size_t>(t)] = acc += at(t, blank_);
  return s;
}

CtcPrefixScorer::State CtcPrefixScorer::extend(const State& g, std::int32_t c) const {
  TFM_CHECK(c >= 0 && c < vocab_ && c != blank_, "ctc prefix score", "label ", c, " is the blank or outside the vocabulary of ",
            vocab_);
  const auto T = static_cast<std::size_t>(frames_);
  State h;
  h.last = c;
  h.r_n.resize(T);
  h.r_b.resize(T);
  // Frame 0 can start the new label only when the prefix before it is empty.
  h.r_n[0] = g.last < 0 ? at(0, c) : kNegInf;
  h.r_b[0] = kNegInf;
  double psi = h.r_n[0];
  for (std::size_t t = 1; t < T; ++t) {
    // Paths reaching the end of g at t-1 from which c may begin at t: a repeated label
    // needs a blank between the two.
    const double phi = c == g.last ? g.r_b[t - 1] : log_add(g.r_b[t - 1], g.r_n[t - 1]);
    const double emit = at(static_cast<std::int64_t>(t), c);
    h.r_n[t] = log_add(h.r_n[t - 1], phi) + emit;
    h.r_b[t] = log_add(h.r_b[t - 1], h.r_n[t - 1]) + at(static_cast<std::int64_t>(t), blank_);
    psi = log_add(psi, phi + emit);
  }
  h.score = psi;
  return h;
}

double CtcPrefixScorer::final_score(const State& g) const {
  const auto last = static_cast<std::size_t>(frames_ - 1);
  return log_add(g.r_n[last], g.r_b[last]);
}

}  // namespace tfm
