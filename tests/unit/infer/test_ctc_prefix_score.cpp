// CTC prefix scores against their definition, by enumerating every frame path of a small
// input: the prefix score is the probability that the collapsed path begins with the prefix,
// the final score that it equals it. The final score also equals -ctc_loss (itself checked
// against PyTorch's F.ctc_loss in tests/parity).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "infer/ctc_prefix_score.h"
#include "tfm/error.h"
#include "tfm/ops.h"

using namespace tfm;

namespace {

constexpr std::int64_t kFrames = 5, kVocab = 4;
constexpr std::int32_t kBlank = 0;

std::vector<float> random_log_probs(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.5f);
  std::vector<float> lp(static_cast<std::size_t>(kFrames * kVocab));
  for (std::int64_t t = 0; t < kFrames; ++t) {
    double z = 0;
    for (std::int64_t k = 0; k < kVocab; ++k) z += std::exp(lp[static_cast<std::size_t>(t * kVocab + k)] = n(rng));
    for (std::int64_t k = 0; k < kVocab; ++k) lp[static_cast<std::size_t>(t * kVocab + k)] -= static_cast<float>(std::log(z));
  }
  return lp;
}

// P(collapsed output begins with prefix) and P(collapsed output == prefix), by enumeration.
std::pair<double, double> enumerate(const std::vector<float>& lp, const std::vector<std::int32_t>& prefix) {
  double begins = 0, equals = 0;
  std::int64_t paths = 1;
  for (std::int64_t t = 0; t < kFrames; ++t) paths *= kVocab;
  for (std::int64_t p = 0; p < paths; ++p) {
    std::int64_t code = p;
    double logp = 0;
    std::vector<std::int32_t> out;
    std::int32_t prev = -1;
    for (std::int64_t t = 0; t < kFrames; ++t, code /= kVocab) {
      const auto k = static_cast<std::int32_t>(code % kVocab);
      logp += lp[static_cast<std::size_t>(t * kVocab + k)];
      if (k != kBlank && k != prev) out.push_back(k);
      prev = k;
    }
    if (out.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), out.begin())) begins += std::exp(logp);
    if (out == prefix) equals += std::exp(logp);
  }
  return {begins, equals};
}

}  // namespace

TEST(CtcPrefixScore, PrefixAndFinalScoresAreTheEnumeratedProbabilities) {
  const std::vector<std::vector<std::int32_t>> prefixes{{}, {1}, {2}, {1, 1}, {1, 2}, {2, 1, 2}, {3, 3, 3}, {1, 2, 3}, {1, 1, 2, 2}};
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    const std::vector<float> lp = random_log_probs(seed);
    const CtcPrefixScorer scorer(lp, kFrames, kVocab, kBlank);
    for (const auto& prefix : prefixes) {
      CtcPrefixScorer::State s = scorer.initial();
      for (std::int32_t c : prefix) s = scorer.extend(s, c);
      const auto [begins, equals] = enumerate(lp, prefix);
      const std::string what = "seed " + std::to_string(seed) + ", prefix of " + std::to_string(prefix.size());
      // float log-probabilities sum to 1 within about 3e-7 a frame
      EXPECT_NEAR(std::exp(s.score), begins, 2e-6) << what;
      EXPECT_NEAR(std::exp(scorer.final_score(s)), equals, 2e-6) << what;
    }
  }
}

TEST(CtcPrefixScore, FinalScoreIsMinusTheCtcLoss) {
  const std::vector<float> lp = random_log_probs(9);
  const CtcPrefixScorer scorer(lp, kFrames, kVocab, kBlank);
  const std::vector<std::int32_t> target{3, 1, 1};
  CtcPrefixScorer::State s = scorer.initial();
  for (std::int32_t c : target) s = scorer.extend(s, c);
  const Tensor loss = ctc_loss(Tensor::from_floats(lp, {1, kFrames, kVocab}), Tensor::from_ints({kFrames}, {1}),
                               Tensor::from_ints({3, 1, 1}, {1, 3}), Tensor::from_ints({3}, {1}), kBlank, LossReduction::none);
  EXPECT_NEAR(scorer.final_score(s), -loss.item(), 1e-5);
}

TEST(CtcPrefixScore, BadInputIsAnErrorNamingIt) {
  EXPECT_THROW(CtcPrefixScorer(std::vector<float>(7), 2, 4, 0), Error);
  EXPECT_THROW(CtcPrefixScorer(std::vector<float>(8), 2, 4, 4), Error);
  const CtcPrefixScorer scorer(std::vector<float>(8, std::log(0.25f)), 2, 4, 0);
  EXPECT_THROW(scorer.extend(scorer.initial(), 0), Error);  // the blank
  EXPECT_THROW(scorer.extend(scorer.initial(), 4), Error);
}
