// Beam search (Hugging Face's BeamSearchScorer, one batch entry) over a DecodeStepper.
//
// Each step, every live beam proposes its 2K best next tokens (K = beam_size); of the 2K
// best (beam, token) pairs overall, by summed log-probability:
//   - an EOS pair ranked among the first K ends a hypothesis (EOS pairs ranked lower are
//     dropped, as HF does: they could not have been in the beam);
//   - the others fill the next beam up to K. Taking 2K pairs keeps K live beams even when
//     up to K of the best pairs end in EOS.
// Finished hypotheses keep the K best by score = log_prob / lp(len), where len counts the
// generated tokens INCLUDING the EOS (so an EOS-ended and a live hypothesis of equal length
// get the same penalty) and lp is len^alpha (hf) or ((5 + len) / 6)^alpha (gnmt).
// Stopping:
//   early_stopping = true:  once K hypotheses are finished.
//   early_stopping = false: once K are finished and the worst of them scores at least the
//     best live beam's log_prob / lp(its current length) (HF's heuristic: a bound only for
//     alpha <= 0; with alpha > 0 a longer continuation can still score higher).
//   max_new_tokens: the live beams are finished too (always, whatever the above said).
// Ties between pairs go to the smaller beam index, then the smaller token id, so a run is
// deterministic. Hypotheses are distinct by construction: live beams are distinct prefixes.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tfm/error.h"
#include "tfm/generate.h"

namespace tfm {
namespace {

constexpr const char* kOp = "beam_search";

struct Beam {
  std::vector<std::int32_t> tokens;
  double log_prob = 0;
};

struct Pair {  // a proposed extension: row `beam` appends `token`
  double log_prob;
  std::int64_t beam;
  std::int32_t token;
};

double length_penalty(const BeamOptions& o, std::int64_t len) {
  const double n = static_cast<double>(len);
  return o.penalty_form == LengthPenalty::hf ? std::pow(n, o.length_penalty)
                                             : std::pow((5.0 + n) / 6.0, o.length_penalty);
}

// log_softmax of one row in double. (V)
std::vector<double> log_softmax(const float* logits, std::int64_t V, std::int64_t row) {
  std::vector<double> lp(logits, logits + V);
  double mx = lp[0];
  for (std::int64_t v = 0; v < V; ++v) {
    TFM_CHECK(std::isfinite(lp[v]), kOp, "row ", row, " logit ", v, " is ", logits[v]);
    mx = std::max(mx, lp[v]);
  }
  double s = 0;
  for (double x : lp) s += std::exp(x - mx);
  const double lse = mx + std::log(s);
  for (double& x : lp) x -= lse;
  return lp;
}

// The K best finished hypotheses, best first; an equal score does not displace an earlier one.
class Finished {
 public:
  explicit Finished(const BeamOptions& o) : o_(o) {}
  void add(std::vector<std::int32_t> tokens, double log_prob) {
    Hypothesis h{std::move(tokens), log_prob, 0};
    h.score = log_prob / length_penalty(o_, static_cast<std::int64_t>(h.tokens.size()));
    auto at = std::upper_bound(list_.begin(), list_.end(), h.score,
                               [](double s, const Hypothesis& x) { return s > x.score; });
    list_.insert(at, std::move(h));
    if (static_cast<std::int64_t>(list_.size()) > o_.beam_size) list_.pop_back();
  }
  std::int64_t size() const { return static_cast<std::int64_t>(list_.size()); }
  double worst() const { return list_.back().score; }
  std::vector<Hypothesis> take(std::int64_t n) {
    if (static_cast<std::int64_t>(list_.size()) > n) list_.resize(static_cast<std::size_t>(n));
    return std::move(list_);
  }

 private:
  const BeamOptions& o_;
  std::vector<Hypothesis> list_;  // sorted by score desc
};

void validate(const BeamOptions& o, std::int64_t V, std::size_t first) {
  TFM_CHECK(o.beam_size >= 1, kOp, "beam_size must be >= 1, got ", o.beam_size);
  TFM_CHECK(o.n_best >= 1 && o.n_best <= o.beam_size, kOp, "n_best must be in [1, beam_size = ", o.beam_size,
            "], got ", o.n_best);
  TFM_CHECK(o.max_new_tokens >= 1, kOp, "max_new_tokens must be >= 1, got ", o.max_new_tokens);
  TFM_CHECK(std::isfinite(o.length_penalty), kOp, "length_penalty must be finite, got ", o.length_penalty);
  TFM_CHECK(V >= 1, kOp, "the stepper's vocabulary is empty");
  TFM_CHECK(o.eos_id < V, kOp, "eos_id ", o.eos_id, " is outside the vocabulary of ", V);
  TFM_CHECK(static_cast<std::int64_t>(first) == V, kOp, "first_logits has ", first,
            " entries, the stepper's vocabulary ", V);
}

}  // namespace

std::vector<Hypothesis> beam_search(DecodeStepper& stepper, std::span<const float> first_logits,
                                    const BeamOptions& o) {
  const std::int64_t V = stepper.vocab_size();
  validate(o, V, first_logits.size());
  const std::int64_t K = o.beam_size;
  const std::int64_t per_beam = std::min<std::int64_t>(2 * K, V);
  Finished finished(o);
  std::vector<Beam> live(1);                                                 // the prompt's row
  std::vector<float> logits(first_logits.begin(), first_logits.end());      // (rows, V)
  for (std::int64_t t = 1; t <= o.max_new_tokens; ++t) {
    // Every live beam's best `per_beam` extensions, then the 2K best overall.
    std::vector<Pair> pairs;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(V));
    for (std::int64_t r = 0; r < static_cast<std::int64_t>(live.size()); ++r) {
      const std::vector<double> lp = log_softmax(logits.data() + r * V, V, r);
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + per_beam, ids.end(),
                        [&](std::int32_t a, std::int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); });
      for (std::int64_t i = 0; i < per_beam; ++i) pairs.push_back({live[r].log_prob + lp[ids[i]], r, ids[i]});
    }
    auto better = [](const Pair& a, const Pair& b) {
      if (a.log_prob != b.log_prob) return a.log_prob > b.log_prob;
      return a.beam != b.beam ? a.beam < b.beam : a.token < b.token;
    };
    const auto n_pairs = std::min<std::int64_t>(2 * K, static_cast<std::int64_t>(pairs.size()));
    std::partial_sort(pairs.begin(), pairs.begin() + n_pairs, pairs.end(), better);

    std::vector<Beam> next;
    std::vector<std::int64_t> parents;
    std::vector<std::int32_t> tokens;
    for (std::int64_t rank = 0; rank < n_pairs && static_cast<std::int64_t>(next.size()) < K; ++rank) {
      const Pair& p = pairs[rank];
      const bool eos = o.ends_on(p.token);
      if (eos && rank >= K) continue;
      std::vector<std::int32_t> seq = live[p.beam].tokens;
      seq.push_back(p.token);
      if (eos) {
        finished.add(std::move(seq), p.log_prob);
        continue;
      }
      next.push_back({std::move(seq), p.log_prob});
      parents.push_back(p.beam);
      tokens.push_back(p.token);
    }
    if (next.empty()) break;  // every proposal ended in EOS
    if (t == o.max_new_tokens) {
      for (auto& b : next) finished.add(std::move(b.tokens), b.log_prob);
      break;
    }
    if (finished.size() >= K) {
      if (o.early_stopping) break;
      // next[0] is the best live beam: pairs were taken in order.
      if (finished.worst() >= next[0].log_prob / length_penalty(o, t)) break;
    }
    const Tensor out = stepper.step(parents, tokens);
    const auto rows = static_cast<std::int64_t>(next.size());
    TFM_CHECK(out.dim() == 2 && out.size(0) == rows && out.size(1) == V, kOp, "the stepper returned logits of shape ",
              shape_str(out.shape()), ", expected (", rows, ", ", V, ")");
    logits = out.to_floats();
    live = std::move(next);
  }
  return finished.take(o.n_best);
}

}  // namespace tfm
