// beam_search against brute force on tiny random models (driven by the full-recompute
// stepper): beam 1 is greedy; a beam wide enough to hold every prefix finds exactly the
// exhaustive n-best; scores follow the documented length penalties; both stopping rules end.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "support/recompute_stepper.h"
#include "tfm/error.h"
#include "tfm/generate.h"
#include "tfm/model.h"

using namespace tfm;
using test::RecomputeStepper;

namespace {

constexpr std::int32_t kEos = 2;

// 1 layer, d 8, vocab 6; init_std 0.5 so next-token distributions are far from uniform.
Model tiny(Architecture arch, std::uint64_t seed = 7) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 6;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 1;
  c.d_ff = 16;
  c.max_positions = 16;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.init_std = 0.5;
  return Model::create(c, seed);
}

const std::vector<std::int32_t> kPrompt{1, 4, 3};

// log p(next | prompt, prefix) in double, by a full forward.
std::vector<double> next_log_probs(Model& m, const std::vector<std::int32_t>& prefix) {
  std::vector<float> l;
  if (m.config().architecture == Architecture::encoder_decoder) {
    std::vector<std::int32_t> dec{static_cast<std::int32_t>(m.config().decoder_start_token_id)};
    dec.insert(dec.end(), prefix.begin(), prefix.end());
    l = test::last_logits(m, kPrompt, dec);
  } else {
    std::vector<std::int32_t> all = kPrompt;
    all.insert(all.end(), prefix.begin(), prefix.end());
    l = test::last_logits(m, {}, all);
  }
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  std::vector<double> out;
  for (float x : l) out.push_back(x - std::log(z));
  return out;
}

double penalty(const BeamOptions& o, std::size_t len) {
  const double n = static_cast<double>(len);
  return o.penalty_form == LengthPenalty::hf ? std::pow(n, o.length_penalty) : std::pow((5 + n) / 6, o.length_penalty);
}

// Every sequence beam search can return: ended by EOS, or max_new_tokens long; best first.
std::vector<Hypothesis> exhaustive(Model& m, const BeamOptions& o) {
  std::vector<Hypothesis> all;
  std::function<void(std::vector<std::int32_t>, double)> walk = [&](std::vector<std::int32_t> seq, double lp) {
    if (!seq.empty() && (seq.back() == o.eos_id || static_cast<std::int64_t>(seq.size()) == o.max_new_tokens)) {
      all.push_back({seq, lp, lp / penalty(o, seq.size())});
      return;
    }
    const auto next = next_log_probs(m, seq);
    for (std::int32_t v = 0; v < static_cast<std::int32_t>(next.size()); ++v) {
      auto s = seq;
      s.push_back(v);
      walk(s, lp + next[v]);
    }
  };
  walk({}, 0.0);
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.score > b.score; });
  return all;
}

// Greedy decoding by stepping the recompute stepper with the argmax (ties: smaller id).
Hypothesis greedy(Model& m, std::int64_t max_new) {
  RecomputeStepper st(m, kPrompt);
  std::vector<float> l = st.first_logits();
  Hypothesis h;
  for (std::int64_t t = 0; t < max_new; ++t) {
    const auto tok = static_cast<std::int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
    h.log_prob += next_log_probs(m, h.tokens)[tok];
    h.tokens.push_back(tok);
    if (tok == kEos) break;
    l = st.step({0}, {tok}).to_floats();
  }
  return h;
}

std::vector<Hypothesis> run(Model& m, const BeamOptions& o, std::int64_t* calls = nullptr) {
  RecomputeStepper st(m, kPrompt);
  auto out = beam_search(st, st.first_logits(), o);
  if (calls) *calls = st.calls();
  return out;
}

// Sorted by score, distinct, and log_prob/score agree with a recomputation.
void expect_valid(Model& m, const std::vector<Hypothesis>& hs, const BeamOptions& o, const std::string& what) {
  ASSERT_FALSE(hs.empty()) << what;
  EXPECT_LE(static_cast<std::int64_t>(hs.size()), o.n_best) << what;
  std::set<std::vector<std::int32_t>> seen;
  for (std::size_t i = 0; i < hs.size(); ++i) {
    const auto& h = hs[i];
    EXPECT_TRUE(seen.insert(h.tokens).second) << what << ": duplicate hypothesis " << i;
    if (i > 0) {
      EXPECT_GE(hs[i - 1].score, h.score) << what << ": not sorted at " << i;
    }
    ASSERT_FALSE(h.tokens.empty()) << what;
    ASSERT_LE(static_cast<std::int64_t>(h.tokens.size()), o.max_new_tokens) << what;
    const bool ended = h.tokens.back() == o.eos_id;
    EXPECT_TRUE(ended || static_cast<std::int64_t>(h.tokens.size()) == o.max_new_tokens) << what;
    double lp = 0;
    std::vector<std::int32_t> prefix;
    for (auto t : h.tokens) {
      lp += next_log_probs(m, prefix)[t];
      prefix.push_back(t);
    }
    EXPECT_NEAR(h.log_prob, lp, 1e-9) << what << " hypothesis " << i;
    EXPECT_NEAR(h.score, lp / penalty(o, h.tokens.size()), 1e-9) << what << " hypothesis " << i;
  }
}

void expect_matches_exhaustive(Model& m, const BeamOptions& o, const std::string& what) {
  const auto got = run(m, o);
  const auto want = exhaustive(m, o);
  ASSERT_EQ(static_cast<std::int64_t>(got.size()), o.n_best) << what;
  for (std::int64_t i = 0; i < o.n_best; ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " rank " << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-9) << what << " rank " << i;
    EXPECT_NEAR(got[i].log_prob, want[i].log_prob, 1e-9) << what << " rank " << i;
  }
}

}  // namespace

TEST(BeamSearch, BeamOneIsGreedy) {
  for (auto arch : {Architecture::decoder_only, Architecture::encoder_decoder}) {
    for (std::uint64_t seed : {1, 2, 3, 4}) {
      Model m = tiny(arch, seed);
      BeamOptions o;
      o.beam_size = 1;
      o.max_new_tokens = 8;
      o.eos_id = kEos;
      const auto g = greedy(m, o.max_new_tokens);
      const auto b = run(m, o);
      ASSERT_EQ(b.size(), 1u);
      EXPECT_EQ(b[0].tokens, g.tokens) << to_string(arch) << " seed " << seed;
      EXPECT_NEAR(b[0].log_prob, g.log_prob, 1e-9);
    }
  }
}

TEST(BeamSearch, FullBeamEqualsExhaustiveSearchTwoTokens) {
  for (auto arch : {Architecture::decoder_only, Architecture::encoder_decoder}) {
    Model m = tiny(arch);
    for (auto form : {LengthPenalty::hf, LengthPenalty::gnmt}) {
      for (double alpha : {0.0, 1.0, 2.5}) {
        for (std::int32_t eos : {kEos, -1}) {
          BeamOptions o;
          o.beam_size = o.n_best = 6;  // = V
          o.max_new_tokens = 2;
          o.eos_id = eos;
          o.length_penalty = alpha;
          o.penalty_form = form;
          expect_matches_exhaustive(m, o, std::string(to_string(arch)) + " alpha " + std::to_string(alpha) +
                                              " eos " + std::to_string(eos));
        }
      }
    }
  }
}

TEST(BeamSearch, FullBeamEqualsExhaustiveSearchThreeTokens) {
  Model m = tiny(Architecture::decoder_only, 11);
  for (bool early : {true, false}) {
    BeamOptions o;
    o.beam_size = o.n_best = 36;  // = V * V
    o.max_new_tokens = 3;
    o.eos_id = kEos;
    o.length_penalty = 1.0;
    o.early_stopping = early;
    expect_matches_exhaustive(m, o, early ? "early" : "not early");
  }
}

TEST(BeamSearch, LengthPenaltyFormsGiveTheDocumentedScores) {
  Model m = tiny(Architecture::decoder_only, 5);
  for (auto form : {LengthPenalty::hf, LengthPenalty::gnmt}) {
    BeamOptions o;
    o.beam_size = 3;
    o.n_best = 3;
    o.max_new_tokens = 5;
    o.eos_id = kEos;
    o.length_penalty = 0.7;
    o.penalty_form = form;
    const auto hs = run(m, o);
    expect_valid(m, hs, o, form == LengthPenalty::hf ? "hf" : "gnmt");
    // One by hand: lp(len) = len^0.7 or ((5 + len) / 6)^0.7, len counting the EOS.
    const double n = static_cast<double>(hs[0].tokens.size());
    const double lp = form == LengthPenalty::hf ? std::pow(n, 0.7) : std::pow((5 + n) / 6, 0.7);
    EXPECT_NEAR(hs[0].score * lp, hs[0].log_prob, 1e-12);
  }
}

TEST(BeamSearch, EarlyStoppingOnAndOffBothTerminateAndOffIsNoWorse) {
  for (std::uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    Model m = tiny(Architecture::decoder_only, seed);
    BeamOptions o;
    o.beam_size = 3;
    o.n_best = 3;
    o.max_new_tokens = 10;
    o.eos_id = kEos;
    o.length_penalty = 1.0;
    std::int64_t calls_on = 0, calls_off = 0;
    o.early_stopping = true;
    const auto on = run(m, o, &calls_on);
    expect_valid(m, on, o, "early on, seed " + std::to_string(seed));
    o.early_stopping = false;
    const auto off = run(m, o, &calls_off);
    expect_valid(m, off, o, "early off, seed " + std::to_string(seed));
    // "Off" runs the same steps for at least as long, and the kept list only improves.
    EXPECT_LE(calls_on, calls_off);
    EXPECT_LE(calls_off, o.max_new_tokens - 1);
    ASSERT_GE(off.size(), on.size());
    for (std::size_t i = 0; i < on.size(); ++i) EXPECT_GE(off[i].score, on[i].score - 1e-12) << "rank " << i;
  }
}

namespace {
// Every row gets the same logits: EOS most likely, so search ends early (or not, without EOS).
class ConstantStepper : public DecodeStepper {
 public:
  explicit ConstantStepper(std::vector<float> l) : l_(std::move(l)) {}
  std::int64_t vocab_size() const override { return static_cast<std::int64_t>(l_.size()); }
  Tensor step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) override {
    ++calls;
    if (calls == 1) {
      first_parents = parents;
      first_tokens = tokens;
    }
    std::vector<float> out;
    for (std::size_t r = 0; r < parents.size(); ++r) out.insert(out.end(), l_.begin(), l_.end());
    return Tensor::from_floats(out, {static_cast<std::int64_t>(parents.size()), vocab_size()});
  }
  std::vector<float> l_;
  std::int64_t calls = 0;
  std::vector<std::int64_t> first_parents;
  std::vector<std::int32_t> first_tokens;
};
}  // namespace

TEST(BeamSearch, StopsOnceEnoughHypothesesEndAndRunsToTheLimitWithoutEos) {
  const std::vector<float> l{0.0f, 0.5f, 3.0f, 1.0f};  // EOS = 2 is most likely
  for (bool early : {true, false}) {
    ConstantStepper st(l);
    BeamOptions o;
    o.beam_size = 2;
    o.n_best = 2;
    o.max_new_tokens = 50;
    o.eos_id = kEos;
    o.early_stopping = early;
    const auto hs = beam_search(st, l, o);
    // t=1: [2] ends, beams [3], [1]; t=2: [3,2] and [1,2] end: 3 finished >= 2 -> done.
    EXPECT_EQ(st.calls, 1) << early;
    // The EOS pair took no beam slot: both rows continue (2K proposals, not K).
    EXPECT_EQ(st.first_parents, (std::vector<std::int64_t>{0, 0}));
    EXPECT_EQ(st.first_tokens, (std::vector<std::int32_t>{3, 1}));
    ASSERT_EQ(hs.size(), 2u);
    EXPECT_EQ(hs[0].tokens, (std::vector<std::int32_t>{2}));
    EXPECT_EQ(hs[1].tokens, (std::vector<std::int32_t>{3, 2}));
  }
  ConstantStepper st(l);
  BeamOptions o;
  o.beam_size = 2;
  o.max_new_tokens = 7;
  o.eos_id = -1;
  const auto hs = beam_search(st, l, o);
  EXPECT_EQ(st.calls, 6);
  ASSERT_EQ(hs.size(), 1u);
  EXPECT_EQ(hs[0].tokens, std::vector<std::int32_t>(7, 2));
}

TEST(BeamSearch, EosPairsRankedBelowBeamSizeAreDroppedAsHuggingFaceDoes) {
  // ids: 0 = x, 1 = y, 2 = EOS, 3 = z. t=1: [2] ends, beams [0], [1]. t=2 ranks: [0,2] ends,
  // [0,0] lives, [1,2] is rank 2 >= K = 2 so it is dropped, [0,1] lives. alpha = 3 favours
  // length: had [1,2] been kept it would outscore [2] and take the second place.
  const std::vector<float> l{2.5f, 1.5f, 3.0f, -3.0f};
  ConstantStepper st(l);
  BeamOptions o;
  o.beam_size = 2;
  o.n_best = 2;
  o.max_new_tokens = 10;
  o.eos_id = kEos;
  o.length_penalty = 3.0;
  const auto hs = beam_search(st, l, o);
  ASSERT_EQ(hs.size(), 2u);
  EXPECT_EQ(hs[0].tokens, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(hs[1].tokens, (std::vector<std::int32_t>{2}));
  EXPECT_EQ(st.calls, 1);
}

TEST(BeamSearch, BadOptionsAndLogitsAreErrors) {
  const std::vector<float> l{0.0f, 1.0f, 2.0f};
  auto bad = [&](auto edit, std::vector<float> first) {
    ConstantStepper st(l);
    BeamOptions o;
    o.eos_id = 1;
    edit(o);
    EXPECT_THROW(beam_search(st, first, o), Error);
  };
  bad([](BeamOptions& o) { o.beam_size = 0; }, l);
  bad([](BeamOptions& o) { o.n_best = 0; }, l);
  bad([](BeamOptions& o) { o.n_best = 5; }, l);
  bad([](BeamOptions& o) { o.max_new_tokens = 0; }, l);
  bad([](BeamOptions& o) { o.eos_id = 3; }, l);
  bad([](BeamOptions&) {}, std::vector<float>{0, 1});
  bad([](BeamOptions&) {}, std::vector<float>{0, NAN, 1});
  ConstantStepper nan_rows(std::vector<float>{0, INFINITY, 1});
  BeamOptions o;
  try {
    beam_search(nan_rows, l, o);
    ADD_FAILURE() << "Inf logits from the stepper accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("beam_search"), std::string::npos) << e.what();
  }
}
