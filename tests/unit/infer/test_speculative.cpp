// Speculative decoding (Generator::generate_speculative): greedy text equal to plain greedy
// decoding with a draft model and with prompt lookup; sampled text distributed as plain
// sampling's (two-sample chi-square on each position's token over thousands of seeds, with a
// draft model that often disagrees, so the residual draws are exercised); drafts adapt.
// The same in the continuous batch (ContinuousBatch::enable_speculative, the server's path):
// greedy requests joining at different steps give plain decoding's tokens with prompt lookup
// and with a draft model, a grammar included (its mask applies at every scored position);
// sampled tokens are distributed as plain sampling's; requests that opt out decode plainly
// beside speculative ones; drafts are refused when they cannot fit.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tfm/continuous_batch.h"
#include "tfm/error.h"
#include "tfm/grammar.h"
#include "tfm/session.h"

using namespace tfm;

namespace {

Tokenizer chars() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train({"abcdefgh ijkl"}, o);
}

Tokenizer words() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train({"the quick brown fox jumps over the lazy dog", "abcabc abcab"}, o);
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

struct Finished {
  std::vector<std::int32_t> tokens;
  std::string text, streamed, stop_reason;
};

// Every request to the end; requests join at the given steps.
std::vector<Finished> run(ContinuousBatch& cb, const std::vector<BatchRequest>& reqs, const std::vector<int>& join) {
  std::vector<Finished> out(reqs.size());
  std::map<std::int64_t, std::size_t> which;
  std::size_t added = 0;
  for (int step = 0; added < reqs.size() || !cb.idle(); ++step) {
    while (added < reqs.size() && join[added] <= step && cb.has_free_slot()) which[cb.add(reqs[added])] = added, ++added;
    for (const BatchEvent& e : cb.step()) {
      Finished& f = out[which.at(e.id)];
      f.streamed += e.text;
      if (e.finished) f.tokens = e.result.tokens, f.text = e.result.text, f.stop_reason = e.result.stop_reason;
    }
  }
  return out;
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

TEST(ContinuousBatchSpeculative, GreedyEqualsPlainDecodingWithLookupAndADraftModel) {
  const Tokenizer tok = words();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 1);
  Model draft = Model::create(lm(tok.vocab_size(), 16, 0.4), 2);  // another model: it often disagrees
  const std::vector<std::string> prompts = {"abc", "the quick", "abcabc ab", "lazy dog", "o"};
  const std::vector<int> join = {0, 0, 1, 4, 9};
  auto requests = [&](ContinuousBatch& cb, bool speculative) {
    std::vector<BatchRequest> reqs;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      BatchRequest r{cb.encode_prompt(prompts[i]), options(0, 1, 30 + 7 * static_cast<std::int64_t>(i)), 0, -1};
      r.speculative = speculative;
      reqs.push_back(r);
    }
    return reqs;
  };
  ContinuousBatch plain(target, tok, {.ctx_size = 96, .max_batch = 3}, 8);
  const std::vector<Finished> want = run(plain, requests(plain, true), join);  // not enabled: plain
  for (Model* d : {static_cast<Model*>(nullptr), &draft}) {
    ContinuousBatch cb(target, tok, {.ctx_size = 96, .max_batch = 3}, 8);
    cb.enable_speculative({.draft = d, .max_draft = 6, .ngram = 3});
    std::vector<BatchRequest> reqs = requests(cb, true);
    reqs[1].speculative = false;  // one request decodes plainly beside the others
    const std::vector<Finished> got = run(cb, reqs, join);
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i].tokens) << prompts[i] << (d ? " (draft model)" : " (lookup)");
      EXPECT_EQ(got[i].streamed, want[i].text) << prompts[i];
      EXPECT_EQ(got[i].stop_reason, "length");
    }
    const SpeculativeStats& st = cb.speculative_stats();
    EXPECT_GT(st.rounds, 0);
    EXPECT_LT(st.steps, st.rounds) << "the rounds of concurrent slots share the model's steps";
    EXPECT_GT(st.drafted, 0);
    EXPECT_GT(st.accepted, 0);
    EXPECT_LE(st.accepted, st.drafted);
  }
  // The target as its own draft keeps every draft: far fewer rounds than tokens.
  ContinuousBatch self(target, tok, {.ctx_size = 96, .max_batch = 1}, 8);
  self.enable_speculative({.draft = &target, .max_draft = 8, .ngram = 3});
  const std::vector<Finished> s = run(self, {{self.encode_prompt("abc"), options(0, 1, 40), 0, -1}}, {0});
  EXPECT_EQ(self.speculative_stats().accepted, self.speculative_stats().drafted);
  EXPECT_LT(self.speculative_stats().rounds, 12);
  Generator alone(target, tok, {.ctx_size = 96, .max_batch = 1});
  EXPECT_EQ(s[0].tokens, alone.generate("abc", options(0, 1, 40)).tokens);
}

TEST(ContinuousBatchSpeculative, RoundsNearTheContextsEndAreScoredAlone) {
  // A slot close to the end of its context drafts less than the others, and padding its feed
  // to theirs would overrun the context: it is scored in a step of its own, and every text is
  // still plain decoding's up to the context's end.
  const Tokenizer tok = words();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 1);
  const std::vector<std::string> prompts = {"abcabc abcabc abcabc ab", "abc", "the quick"};
  auto requests = [&](ContinuousBatch& cb) {
    std::vector<BatchRequest> reqs;
    for (const auto& p : prompts) reqs.push_back({cb.encode_prompt(p), options(0, 1, 40), 0, -1});
    return reqs;
  };
  ContinuousBatch plain(target, tok, {.ctx_size = 32, .max_batch = 3}, 8);
  const std::vector<Finished> want = run(plain, requests(plain), {0, 0, 0});
  ContinuousBatch cb(target, tok, {.ctx_size = 32, .max_batch = 3}, 8);
  cb.enable_speculative({.draft = &target, .max_draft = 8, .ngram = 3});
  const std::vector<Finished> got = run(cb, requests(cb), {0, 0, 0});
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << prompts[i];
    EXPECT_EQ(got[i].stop_reason, want[i].stop_reason) << prompts[i];
  }
  EXPECT_EQ(want[0].stop_reason, "context");
  EXPECT_LT(cb.speculative_stats().steps, cb.speculative_stats().rounds);
}

TEST(ContinuousBatchSpeculative, AGrammarHoldsAtEveryScoredPosition) {
  const Tokenizer tok = words();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 3);
  const auto g = std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "the " ("abc" | "ab" | "c")+ " ok")"));
  for (const double temperature : {0.0, 1.0}) {
    std::vector<BatchRequest> reqs;
    ContinuousBatch plain(target, tok, {.ctx_size = 96, .max_batch = 2}, 8);
    for (std::uint64_t i = 0; i < 4; ++i) {
      GenerateOptions o = options(temperature, 10 + i, 40);
      o.grammar = g;
      reqs.push_back({plain.encode_prompt("abcabc"), o, 0, -1});
    }
    const std::vector<Finished> want = run(plain, reqs, {0, 0, 2, 3});
    ContinuousBatch cb(target, tok, {.ctx_size = 96, .max_batch = 2}, 8);
    cb.enable_speculative({.draft = nullptr, .max_draft = 6, .ngram = 3});
    const std::vector<Finished> got = run(cb, reqs, {0, 0, 2, 3});
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      GrammarMatcher check(*g, std::make_shared<const TokenTrie>(token_bytes(tok)));
      EXPECT_TRUE(check.accept_bytes(got[i].text) && check.accepting()) << got[i].text;
      if (temperature == 0) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << i;
        EXPECT_EQ(got[i].stop_reason, want[i].stop_reason) << i;
      }
    }
    EXPECT_GT(cb.speculative_stats().drafted, 0);
  }
}

TEST(ContinuousBatchSpeculative, SampledIsDistributedAsPlainSampling) {
  const Tokenizer tok = words();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.6), 3);
  Model draft = Model::create(lm(tok.vocab_size(), 16, 0.6), 4);
  const int N = 2000, positions = 4;
  const auto V = static_cast<std::size_t>(tok.vocab_size());
  ContinuousBatch plain(target, tok, {.ctx_size = 32, .max_batch = 8}, 8);
  ContinuousBatch spec(target, tok, {.ctx_size = 32, .max_batch = 8}, 8);
  spec.enable_speculative({.draft = &draft, .max_draft = 3, .ngram = 3});
  std::vector<BatchRequest> a, b;
  std::vector<int> join;
  for (int seed = 0; seed < N; ++seed) {
    a.push_back({plain.encode_prompt("abc"), options(1.0, static_cast<std::uint64_t>(seed), positions), 0, -1});
    b.push_back({spec.encode_prompt("abc"), options(1.0, static_cast<std::uint64_t>(seed) + 1000000, positions), 0, -1});
    join.push_back(0);
  }
  const std::vector<Finished> ra = run(plain, a, join), rb = run(spec, b, join);
  std::vector<std::vector<double>> ca(positions, std::vector<double>(V)), cb(positions, std::vector<double>(V));
  for (int s = 0; s < N; ++s) {
    ASSERT_EQ(ra[static_cast<std::size_t>(s)].tokens.size(), static_cast<std::size_t>(positions));
    ASSERT_EQ(rb[static_cast<std::size_t>(s)].tokens.size(), static_cast<std::size_t>(positions));
    for (int i = 0; i < positions; ++i) {
      ca[static_cast<std::size_t>(i)][static_cast<std::size_t>(ra[static_cast<std::size_t>(s)].tokens[static_cast<std::size_t>(i)])] += 1;
      cb[static_cast<std::size_t>(i)][static_cast<std::size_t>(rb[static_cast<std::size_t>(s)].tokens[static_cast<std::size_t>(i)])] += 1;
    }
  }
  const SpeculativeStats& st = spec.speculative_stats();
  EXPECT_LT(st.accepted, st.drafted * 9 / 10);  // the residual draws matter
  EXPECT_GT(st.accepted, 0);
  for (int i = 0; i < positions; ++i) {
    double chi2 = 0;
    int cells = 0;
    for (std::size_t t = 0; t < V; ++t) {
      const double x = ca[static_cast<std::size_t>(i)][t], y = cb[static_cast<std::size_t>(i)][t];
      if (x + y == 0) continue;
      chi2 += (x - y) * (x - y) / (x + y);
      ++cells;
    }
    // Below chi-square's 99.9th percentile at df = cells - 1 (Wilson-Hilferty, z = 3.09).
    const double df = cells - 1, w = 2.0 / (9.0 * df);
    EXPECT_LT(chi2, df * std::pow(1.0 - w + 3.09 * std::sqrt(w), 3.0)) << "position " << i << " over " << cells << " tokens";
  }
}

TEST(ContinuousBatchSpeculative, RefusesDraftsThatCannotServe) {
  const Tokenizer tok = words();
  Model target = Model::create(lm(tok.vocab_size(), 32, 0.4), 1);
  Model wrong = Model::create(lm(tok.vocab_size() + 3, 16, 0.4), 2);
  ContinuousBatch cb(target, tok, {.ctx_size = 64, .max_batch = 2}, 8);
  EXPECT_THROW(cb.enable_speculative({.draft = &wrong, .max_draft = 4, .ngram = 3}), Error);
  EXPECT_THROW(cb.enable_speculative({.draft = nullptr, .max_draft = 0, .ngram = 3}), Error);
  // A full context ends a speculative request as a plain one.
  cb.enable_speculative({.draft = nullptr, .max_draft = 8, .ngram = 2});
  const std::vector<Finished> r = run(cb, {{cb.encode_prompt("abcabc"), options(0, 1, 500), 0, -1}}, {0});
  ContinuousBatch plain(target, tok, {.ctx_size = 64, .max_batch = 2}, 8);
  const std::vector<Finished> p = run(plain, {{plain.encode_prompt("abcabc"), options(0, 1, 500), 0, -1}}, {0});
  EXPECT_EQ(r[0].stop_reason, "context");
  EXPECT_EQ(r[0].tokens, p[0].tokens);
}
