// Speculative decoding (Generator::generate_speculative): greedy text equal to plain greedy
// decoding with a draft model and with prompt lookup; sampled text distributed as plain
// sampling's (two-sample chi-square on each position's token over thousands of seeds, with a
// draft model that often disagrees, so the residual draws are exercised); drafts adapt.
#include <gtest/gtest.h>

#include <cmath>

#include "tfm/error.h"
#include "tfm/session.h"

using namespace tfm;

namespace {

Tokenizer chars() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train({"abcdefgh ijkl"}, o);
}

ModelConfig lm(std::int64_t vocab, std::int64_t d, double init_std) {
  ModelConfig c;
  c.vocab_size = vocab; c.d_model = d; c.n_heads = 2; c.n_layers = 2; c.d_ff = 2 * d;
  c.max_positions = 128;
  c.position = PositionKind::rope;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.init_std = init_std;
  return c;
}

GenerateOptions options(double temperature, std::uint64_t seed, std::int64_t n) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.stop_at_eos = false;
  o.sampling.temperature = temperature;
  o.sampling.top_k = 0, o.sampling.top_p = 1, o.sampling.min_p = 0;
  o.sampling.seed = seed;
  return o;
}

}  // namespace

TEST(Speculative, GreedyEqualsPlainGreedy) {
  const Tokenizer tok = chars();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 1);
  Model draft = Model::create(lm(tok.vocab_size(), 16, 0.4), 2);  // another model: it often disagrees
  Generator gen(target, tok, {.ctx_size = 128, .max_batch = 1});
  for (const char* prompt : {"abc", "hijk lab", "ggg", "a b c d e f"}) {
    const GenerateResult plain = gen.generate(prompt, options(0, 1, 60));
    for (const bool with_draft : {true, false}) {
      SpeculativeOptions s;
      s.draft = with_draft ? &draft : nullptr;
      s.max_draft = 6;
      SpeculativeStats st;
      const GenerateResult spec = gen.generate_speculative(prompt, options(0, 1, 60), s, {}, &st);
      EXPECT_EQ(spec.tokens, plain.tokens) << prompt << (with_draft ? " (draft model)" : " (lookup)");
      EXPECT_EQ(spec.text, plain.text);
      EXPECT_EQ(spec.stop_reason, "length");
      EXPECT_GT(st.rounds, 0);
      EXPECT_LE(st.accepted, st.drafted);
      if (with_draft) {
        EXPECT_GT(st.drafted, 0);
      }
    }
  }
  // The target as its own draft agrees on everything: every round keeps its whole draft.
  SpeculativeOptions self;
  self.draft = &target;
  SpeculativeStats st;
  (void)gen.generate_speculative("abc", options(0, 1, 40), self, {}, &st);
  EXPECT_EQ(st.accepted, st.drafted);
  EXPECT_LT(st.rounds, 12);  // drafts grow to 8: far fewer model steps than 40 tokens
}

TEST(Speculative, SampledIsDistributedAsPlainSampling) {
  const Tokenizer tok = chars();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.6), 3);
  Model draft = Model::create(lm(tok.vocab_size(), 16, 0.6), 4);
  Generator gen(target, tok, {.ctx_size = 64, .max_batch = 1});
  const int N = 3000, positions = 4;
  const auto V = static_cast<std::size_t>(tok.vocab_size());
  std::vector<std::vector<double>> plain(positions, std::vector<double>(V)), spec(positions, std::vector<double>(V));
  SpeculativeOptions s;
  s.draft = &draft;
  s.max_draft = 3;
  SpeculativeStats st;
  for (int seed = 0; seed < N; ++seed) {
    const GenerateResult a = gen.generate("abc", options(1.0, static_cast<std::uint64_t>(seed), positions));
    const GenerateResult b = gen.generate_speculative("abc", options(1.0, static_cast<std::uint64_t>(seed) + 1000000, positions), s, {}, &st);
    ASSERT_EQ(a.tokens.size(), static_cast<std::size_t>(positions));
    ASSERT_EQ(b.tokens.size(), static_cast<std::size_t>(positions));
    for (int i = 0; i < positions; ++i) {
      plain[i][static_cast<std::size_t>(a.tokens[i])] += 1;
      spec[i][static_cast<std::size_t>(b.tokens[i])] += 1;
    }
  }
  // The draft disagrees often enough that the residual draws matter.
  EXPECT_LT(st.accepted, st.drafted * 9 / 10);
  EXPECT_GT(st.accepted, 0);
  for (int i = 0; i < positions; ++i) {
    // Two-sample chi-square over the tokens seen (equal sample sizes): sum (a - b)^2 / (a + b).
    double chi2 = 0;
    int cells = 0;
    for (std::size_t t = 0; t < V; ++t) {
      const double x = plain[i][t], y = spec[i][t];
      if (x + y == 0) continue;
      chi2 += (x - y) * (x - y) / (x + y);
      ++cells;
    }
    // Below chi-square's 99.9th percentile at df = cells - 1 (Wilson-Hilferty: z = 3.09). A rule
    // that keeps drafts twice as often as it should fails this at every drafted position.
    const double df = cells - 1, a = 2.0 / (9.0 * df);
    const double limit = df * std::pow(1.0 - a + 3.09 * std::sqrt(a), 3.0);
    EXPECT_LT(chi2, limit) << "position " << i << " over " << cells << " tokens";
  }
}

TEST(Speculative, RefusesWhatItCannotDo) {
  const Tokenizer tok = chars();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 1);
  ModelConfig other = lm(tok.vocab_size() + 3, 16, 0.4);
  Model wrong = Model::create(other, 2);
  Generator gen(target, tok, {.ctx_size = 64, .max_batch = 1});
  SpeculativeOptions s;
  s.draft = &wrong;
  EXPECT_THROW(gen.generate_speculative("abc", options(0, 1, 5), s), Error);
  s.draft = nullptr;
  GenerateOptions g = options(0, 1, 5);
  g.grammar = std::make_shared<const Grammar>(Grammar::parse("root ::= \"a\""));
  EXPECT_THROW(gen.generate_speculative("abc", g, s), Error);
  // A full context ends the text.
  const GenerateResult r = gen.generate_speculative("abc", options(0, 1, 500), s);
  EXPECT_EQ(r.stop_reason, "context");
  EXPECT_EQ(static_cast<std::int64_t>(r.prompt_tokens.size() + r.tokens.size()), 64 + 1);
}
