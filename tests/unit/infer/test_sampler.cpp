// Sampler: each filter keeps exactly the documented set (boundaries and ties included),
// temperature reshapes only the survivors, the penalty touches exactly the recent tokens,
// draws are reproducible from (seed, stream, draw) and follow the candidates' probabilities.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "tfm/error.h"
#include "tfm/generate.h"

using namespace tfm;

namespace {

SamplingOptions off() {  // every filter off, temperature 1
  SamplingOptions o;
  o.temperature = 1.0;
  o.top_k = 0;
  o.top_p = 1.0;
  o.min_p = 0.0;
  o.repeat_penalty = 1.0;
  return o;
}

std::vector<std::int32_t> ids(const std::vector<Candidate>& c) {
  std::vector<std::int32_t> out;
  for (const auto& x : c) out.push_back(x.id);
  return out;
}

std::vector<std::int32_t> kept(const SamplingOptions& o, const std::vector<float>& logits,
                               const std::vector<std::int32_t>& history = {}) {
  return ids(Sampler(o).candidates(logits, history));
}

// softmax(l / T) of the listed ids, in the listed order, by hand.
std::vector<double> softmax_of(const std::vector<double>& l, const std::vector<std::int32_t>& keep, double T) {
  double z = 0;
  std::vector<double> p;
  for (auto i : keep) z += std::exp(l[i] / T);
  for (auto i : keep) p.push_back(std::exp(l[i] / T) / z);
  return p;
}

void expect_probs(const std::vector<Candidate>& c, const std::vector<double>& want, const std::string& what,
                  double tol = 1e-12) {
  ASSERT_EQ(c.size(), want.size()) << what;
  for (std::size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i].prob, want[i], tol) << what << " candidate " << i;
}

std::vector<float> random_logits(int V, std::uint32_t seed) {
  std::vector<float> l;
  std::uint32_t s = seed;
  for (int i = 0; i < V; ++i) {
    s = s * 1664525u + 1013904223u;
    l.push_back(static_cast<float>((s >> 8) % 10000) / 1000.0f - 5.0f);
  }
  return l;
}

}  // namespace

TEST(Sampler, GreedyIsArgmaxWithTiesToSmallestId) {
  SamplingOptions o = off();
  o.temperature = 0;
  for (std::uint32_t seed = 1; seed < 20; ++seed) {
    const auto l = random_logits(50, seed);
    const auto want = static_cast<std::int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(Sampler(o).sample(l, {}, 0, seed), want);
    const auto c = Sampler(o).candidates(l, {});
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].prob, 1.0);
  }
  EXPECT_EQ(Sampler(o).sample(std::vector<float>{1, 3, 0, 3, 3}, {}, 0, 0), 1);
  o.temperature = -1;  // any temperature <= 0 is greedy
  EXPECT_EQ(Sampler(o).sample(std::vector<float>{1, 3, 0, 4}, {}, 0, 0), 3);
}

TEST(Sampler, GreedyArgmaxIsTakenAfterThePenalty) {
  SamplingOptions o = off();
  o.temperature = 0;
  o.repeat_penalty = 2.0;
  // 4 / 2 = 2 < 3: the recent token 0 loses its lead.
  EXPECT_EQ(Sampler(o).sample(std::vector<float>{4, 3, 1}, std::vector<std::int32_t>{0}, 0, 0), 1);
  EXPECT_EQ(Sampler(o).sample(std::vector<float>{4, 3, 1}, std::vector<std::int32_t>{2}, 0, 0), 0);
}

TEST(Sampler, CandidatesAreSortedAndNormalised) {
  const auto l = random_logits(30, 7);
  const auto c = Sampler(off()).candidates(l, {});
  ASSERT_EQ(c.size(), 30u);
  double s = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    s += c[i].prob;
    if (i > 0) {
      EXPECT_TRUE(l[c[i - 1].id] > l[c[i].id] || (l[c[i - 1].id] == l[c[i].id] && c[i - 1].id < c[i].id));
    }
  }
  EXPECT_NEAR(s, 1.0, 1e-12);
}

TEST(Sampler, TopKKeepsExactlyKWithTiesToSmallerIds) {
  const std::vector<float> l{3, 1, 2, 2, 0};  // order: 0, 2, 3, 1, 4
  SamplingOptions o = off();
  o.top_k = 1;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0}));
  o.top_k = 2;  // 2 and 3 tie at the 2nd place: the smaller id stays
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 2}));
  o.top_k = 3;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 2, 3}));
  o.top_k = 5;
  EXPECT_EQ(kept(o, l).size(), 5u);
  o.top_k = 100;  // k >= V: off
  EXPECT_EQ(kept(o, l).size(), 5u);
  o.top_k = 3;
  expect_probs(Sampler(o).candidates(l, {}), softmax_of({3, 1, 2, 2, 0}, {0, 2, 3}, 1.0), "top-k renormalised");
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  // Four equal logits: p = 1/4 each exactly, cumulative 0.25, 0.5, 0.75, 1 exactly.
  const std::vector<float> u{0.5f, 0.5f, 0.5f, 0.5f};
  SamplingOptions o = off();
  o.top_p = 0.5;  // reached exactly at the 2nd token: keep 2
  EXPECT_EQ(kept(o, u), (std::vector<std::int32_t>{0, 1}));
  o.top_p = std::nextafter(0.5, 1.0);  // just above: needs the 3rd
  EXPECT_EQ(kept(o, u), (std::vector<std::int32_t>{0, 1, 2}));
  o.top_p = 0.75;
  EXPECT_EQ(kept(o, u).size(), 3u);
  o.top_p = 1e-9;  // always at least one
  EXPECT_EQ(kept(o, u), (std::vector<std::int32_t>{0}));
  // Probabilities 0.6, 0.3, 0.1 (as logs), shuffled ids.
  const std::vector<float> l{std::log(0.1f), std::log(0.6f), std::log(0.3f)};
  o.top_p = 0.55;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1}));
  o.top_p = 0.85;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1, 2}));
  expect_probs(Sampler(o).candidates(l, {}), {2.0 / 3.0, 1.0 / 3.0}, "top-p renormalised", 1e-6);
  o.top_p = 0.95;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1, 2, 0}));
}

TEST(Sampler, MinPKeepsRatioAtLeastMinP) {
  const std::vector<float> l{-2, 0, -1, -3};  // ratios to the max: e^-2, 1, e^-1, e^-3
  SamplingOptions o = off();
  o.min_p = std::exp(-2.0);  // exactly on the threshold: kept
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1, 2, 0}));
  o.min_p = std::nextafter(std::exp(-2.0), 1.0);
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1, 2}));
  o.min_p = 0.5;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{1}));
  o.min_p = 1.0;  // only the maxima, ties included
  EXPECT_EQ(kept(o, std::vector<float>{1, 2, 2, 0}), (std::vector<std::int32_t>{1, 2}));
}

TEST(Sampler, FiltersChainInLlamaCppOrder) {
  // top-k first, then top-p over the top-k survivors' renormalised probabilities.
  const std::vector<float> l{std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingOptions o = off();
  o.top_p = 0.8;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 1, 2}));  // 0.4+0.3 < 0.8 <= 0.9
  o.top_k = 2;  // renormalised 4/7, 3/7: 4/7 < 0.8 so both stay
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 1}));
  o.top_k = 3;
  o.top_p = 0.75;  // over 4/9, 3/9, 2/9: 7/9 >= 0.75 -> two (without top-k, 0.7 < 0.75 -> three)
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 1}));
  o.top_k = 0;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 1, 2}));
  // min-p after top-p: top-p keeps 3, min-p 0.6 drops 0.2/0.4 = 0.5.
  o.top_p = 0.85;
  o.min_p = 0.6;
  EXPECT_EQ(kept(o, l), (std::vector<std::int32_t>{0, 1}));
}

TEST(Sampler, TemperatureReshapesOnlyTheSurvivors) {
  const std::vector<float> l{2, 1, 0};
  SamplingOptions o = off();
  o.temperature = 0.5;
  expect_probs(Sampler(o).candidates(l, {}), softmax_of({2, 1, 0}, {0, 1, 2}, 0.5), "T=0.5");
  o.temperature = 2.0;
  expect_probs(Sampler(o).candidates(l, {}), softmax_of({2, 1, 0}, {0, 1, 2}, 2.0), "T=2");
  // The filters see temperature-1 probabilities: ratio e^-1 = 0.37 >= 0.3 keeps token 1,
  // though at T = 0.5 its ratio would be e^-2 = 0.14.
  o.temperature = 0.5;
  o.min_p = 0.3;
  const auto c = Sampler(o).candidates(std::vector<float>{0, -1, -5}, {});
  ASSERT_EQ(ids(c), (std::vector<std::int32_t>{0, 1}));
  expect_probs(c, {1.0 / (1.0 + std::exp(-2.0)), std::exp(-2.0) / (1.0 + std::exp(-2.0))}, "tempered survivors");
}

TEST(Sampler, RepetitionPenaltyTouchesExactlyTheRecentTokens) {
  const std::vector<float> l{2.0f, -1.0f, 0.5f, -0.25f, 1.5f, 0.0f};
  SamplingOptions o = off();
  o.repeat_penalty = 2.0;
  o.repeat_last_n = 4;
  // Window = the last 4: {3, 0, 1, 0}; token 4 (outside) and 2 (never) stay; 0 twice is
  // penalised once.
  const std::vector<std::int32_t> history{4, 2, 3, 0, 1, 0};
  const std::vector<double> want_l{1.0, -2.0, 0.5, -0.5, 1.5, 0.0};
  const auto c = Sampler(o).candidates(l, history);
  std::vector<std::int32_t> order{4, 0, 2, 5, 3, 1};
  ASSERT_EQ(ids(c), order);
  expect_probs(c, softmax_of(want_l, order, 1.0), "penalised");
  // -1: the whole history (token 4 too); 0: nothing.
  o.repeat_last_n = -1;
  const std::vector<double> all_l{1.0, -2.0, 0.25, -0.5, 0.75, 0.0};
  order = {0, 4, 2, 5, 3, 1};
  ASSERT_EQ(kept(o, l, history), order);
  expect_probs(Sampler(o).candidates(l, history), softmax_of(all_l, order, 1.0), "whole history");
  o.repeat_last_n = 0;
  const auto none = Sampler(o).candidates(l, history);
  const auto plain = Sampler(off()).candidates(l, {});
  ASSERT_EQ(ids(none), ids(plain));
  for (std::size_t i = 0; i < none.size(); ++i) EXPECT_EQ(none[i].prob, plain[i].prob);
  // r < 1 rewards instead: 2 / 0.5 = 4.
  o.repeat_penalty = 0.5;
  o.repeat_last_n = 1;
  EXPECT_EQ(ids(Sampler(o).candidates(std::vector<float>{3, 2}, std::vector<std::int32_t>{1}))[0], 1);
}

TEST(Sampler, SameCounterSameTokenDifferentSeedsDiffer) {
  const auto l = random_logits(40, 3);
  SamplingOptions o = off();
  o.seed = 11;
  const Sampler a(o);
  o.seed = 12;
  const Sampler b(o);
  int differ_seed = 0, differ_stream = 0;
  for (std::uint64_t d = 0; d < 200; ++d) {
    EXPECT_EQ(a.sample(l, {}, 5, d), a.sample(l, {}, 5, d));
    EXPECT_EQ(a.sample(l, {}, 5, d), Sampler(a.options()).sample(l, {}, 5, d));
    differ_seed += a.sample(l, {}, 5, d) != b.sample(l, {}, 5, d);
    differ_stream += a.sample(l, {}, 5, d) != a.sample(l, {}, 6, d);
  }
  // The top token has p ~ 0.2 here; independent draws agree well under half the time.
  EXPECT_GT(differ_seed, 100);
  EXPECT_GT(differ_stream, 100);
}

TEST(Sampler, DrawFrequenciesFollowTheCandidates) {
  const auto l = random_logits(12, 9);
  SamplingOptions o = off();
  o.temperature = 0.7;
  o.top_k = 8;
  o.top_p = 0.97;
  o.min_p = 0.02;
  o.seed = 2024;
  const Sampler s(o);
  const auto c = s.candidates(l, {});
  ASSERT_GE(c.size(), 3u);
  const int n = 20000;
  std::vector<int> count(12, 0);
  for (int d = 0; d < n; ++d) ++count[s.sample(l, {}, 0, static_cast<std::uint64_t>(d))];
  int in_set = 0;
  for (const auto& x : c) {
    const double f = count[x.id] / static_cast<double>(n);
    const double se = std::sqrt(x.prob * (1 - x.prob) / n);
    EXPECT_NEAR(f, x.prob, 5 * se + 1e-4) << "token " << x.id;
    in_set += count[x.id];
  }
  EXPECT_EQ(in_set, n) << "a filtered-out token was drawn";
}

TEST(Sampler, BadOptionsAndLogitsAreErrors) {
  auto bad = [](auto edit) {
    SamplingOptions o;
    edit(o);
    EXPECT_THROW(Sampler{o}, Error);
  };
  bad([](SamplingOptions& o) { o.top_p = 0; });
  bad([](SamplingOptions& o) { o.top_p = 1.5; });
  bad([](SamplingOptions& o) { o.min_p = -0.1; });
  bad([](SamplingOptions& o) { o.min_p = 1.1; });
  bad([](SamplingOptions& o) { o.top_k = -1; });
  bad([](SamplingOptions& o) { o.repeat_penalty = 0; });
  bad([](SamplingOptions& o) { o.repeat_last_n = -2; });
  bad([](SamplingOptions& o) { o.temperature = std::nan(""); });
  const Sampler s(off());
  try {
    s.sample(std::vector<float>{0, std::nanf(""), 1}, {}, 0, 0);
    ADD_FAILURE() << "NaN logits accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sampler"), std::string::npos) << e.what();
  }
  EXPECT_THROW(s.sample(std::vector<float>{0, INFINITY}, {}, 0, 0), Error);
  EXPECT_THROW(s.sample(std::vector<float>{}, {}, 0, 0), Error);
  EXPECT_THROW(s.sample(std::vector<float>{0, 1}, std::vector<std::int32_t>{2}, 0, 0), Error);
}
