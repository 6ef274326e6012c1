// ContinuousBatch (continuous_batch.h): requests joining a running batch at different steps
// give Generator's tokens for a prompt alone (one inference path); chunked prefill gives the
// same tokens whatever runs beside it; cancel frees a slot. Also OpenAI's frequency/presence
// penalties in the sampler, against their published formula.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tfm/continuous_batch.h"
#include "tfm/error.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"

using namespace tfm;

namespace {

Tokenizer char_tokenizer() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train({"the quick brown fox jumps over the lazy dog", "pack my box with five dozen liquor jugs"}, o);
}

ModelConfig lm_config(std::int64_t vocab) {
  ModelConfig c;
  c.vocab_size = vocab; c.d_model = 32; c.n_heads = 4; c.n_kv_heads = 2; c.n_layers = 2; c.d_ff = 64;
  c.max_positions = 64;
  c.position = PositionKind::rope;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.init_std = 0.3;
  return c;
}

GenerateOptions sampling(std::uint64_t seed, std::int64_t n) {
  GenerateOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 1.0;
  o.sampling.seed = seed;
  o.sampling.repeat_penalty = 1.1;
  o.stop_at_eos = false;
  o.context_shift = false;
  return o;
}

// Runs requests joining at the given steps; returns each request's tokens and streamed text.
struct BatchRun {
  std::vector<std::vector<std::int32_t>> tokens;
  std::vector<std::string> streamed;
};
BatchRun run_staggered(ContinuousBatch& cb, const std::vector<BatchRequest>& reqs, const std::vector<int>& join_step) {
  BatchRun r{std::vector<std::vector<std::int32_t>>(reqs.size()), std::vector<std::string>(reqs.size())};
  std::map<std::int64_t, std::size_t> which;
  std::size_t added = 0;
  for (int step = 0; added < reqs.size() || !cb.idle(); ++step) {
    while (added < reqs.size() && join_step[added] <= step && cb.has_free_slot()) which[cb.add(reqs[added])] = added, ++added;
    for (const BatchEvent& e : cb.step()) {
      r.streamed[which[e.id]] += e.text;
      if (e.finished) r.tokens[which[e.id]] = e.result.tokens;
    }
  }
  return r;
}

}  // namespace

TEST(ContinuousBatch, StaggeredRequestsEqualGeneratorAlone) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 5);
  const std::vector<std::string> prompts = {"the", "pack my", "q", "over the lazy", "jumps", "five dozen"};
  ContinuousBatch cb(m, tok, {.ctx_size = 64, .max_batch = 3}, 16);  // every prompt fits one chunk
  std::vector<BatchRequest> reqs;
  for (std::size_t i = 0; i < prompts.size(); ++i)
    reqs.push_back({cb.encode_prompt(prompts[i]), sampling(100 + i, 5 + 3 * static_cast<std::int64_t>(i)), 0, -1});
  const BatchRun r = run_staggered(cb, reqs, {0, 0, 2, 3, 3, 7});
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    Generator alone(m, tok, {.ctx_size = 64, .max_batch = 1});
    const GenerateResult g = alone.generate(prompts[i], reqs[i].options);
    EXPECT_EQ(r.tokens[i], g.tokens) << prompts[i];
    EXPECT_EQ(r.streamed[i], g.text) << prompts[i];
  }
}

TEST(ContinuousBatch, ChunkedPrefillIsTheSameWhateverRunsBeside) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 6);
  const std::vector<std::string> prompts = {"the quick brown fox jumps", "pack my box with five dozen", "lazy dog"};
  std::vector<std::vector<std::int32_t>> alone;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    ContinuousBatch one(m, tok, {.ctx_size = 64, .max_batch = 1}, 4);
    alone.push_back(run_staggered(one, {{one.encode_prompt(prompts[i]), sampling(7 + i, 12), 0, -1}}, {0}).tokens[0]);
  }
  ContinuousBatch cb(m, tok, {.ctx_size = 64, .max_batch = 3}, 4);  // prompts take 2..7 chunks
  std::vector<BatchRequest> reqs;
  for (std::size_t i = 0; i < prompts.size(); ++i) reqs.push_back({cb.encode_prompt(prompts[i]), sampling(7 + i, 12), 0, -1});
  const BatchRun r = run_staggered(cb, reqs, {0, 1, 4});
  for (std::size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(r.tokens[i], alone[i]) << prompts[i];
}

TEST(ContinuousBatch, StreamsDifferAndCancelFreesTheSlot) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 7);
  ContinuousBatch cb(m, tok, {.ctx_size = 64, .max_batch = 2}, 16);
  const auto p = cb.encode_prompt("the");
  const std::int64_t a = cb.add({p, sampling(1, 30), 0, 2});
  cb.add({p, sampling(1, 30), 1, -1});
  EXPECT_FALSE(cb.has_free_slot());
  EXPECT_THROW(cb.add({p, sampling(1, 30), 2, -1}), tfm::Error);
  std::vector<std::int32_t> s0, s1;
  for (int i = 0; i < 5; ++i)
    for (const BatchEvent& e : cb.step()) {
      (e.id == a ? s0 : s1).push_back(e.token);
      if (e.id == a) {
        ASSERT_EQ(e.top.size(), 2u);
        EXPECT_LE(e.chosen.logprob, 0);
        EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
      }
    }
  EXPECT_NE(s0, s1);  // stream 0 and stream 1 draw differently
  cb.cancel(a);
  EXPECT_TRUE(cb.has_free_slot());
  EXPECT_EQ(cb.active(), 1);
}

TEST(Sampler, FrequencyAndPresencePenaltiesFollowOpenAIsFormula) {
  // logit - count * frequency - (count > 0) * presence; greedy picks the larger.
  const std::vector<float> logits = {1.0f, 0.9f, 0.0f};
  const std::vector<std::int32_t> history = {0, 0, 2};
  auto pick = [&](double freq, double pres) {
    SamplingOptions o;
    o.temperature = 0;
    o.frequency_penalty = freq;
    o.presence_penalty = pres;
    return Sampler(o).sample(logits, history, 0, 0);
  };
  EXPECT_EQ(pick(0, 0), 0);
  EXPECT_EQ(pick(0.04, 0), 0);   // 1 - 0.08 = 0.92 > 0.9
  EXPECT_EQ(pick(0.06, 0), 1);   // 1 - 0.12 = 0.88 < 0.9
  EXPECT_EQ(pick(0, 0.05), 0);   // 0.95
  EXPECT_EQ(pick(0, 0.15), 1);   // 0.85
  EXPECT_EQ(pick(-0.5, 0), 0);   // negative: encourages repeats
  const auto c = Sampler({.temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0, .frequency_penalty = 0.5}).candidates(logits, history);
  // p ∝ exp(0), exp(0.9), exp(-0.5): token 1 first
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].id, 1);
  const double l1 = static_cast<double>(0.9f);  // the logit as stored (f32)
  const double z = std::exp(0.0) + std::exp(l1) + std::exp(-0.5);
  EXPECT_NEAR(c[0].prob, std::exp(l1) / z, 1e-12);
}

// Constrained decoding: every sample of an untrained model fits the grammar, the batch gives
// the tokens of a request alone, a complete text ends with reason "stop", and a trigger
// leaves the text free until it appears.
TEST(ContinuousBatch, GrammarConstrainsEveryRequestAsAlone) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 8);
  const auto g = std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "the " [a-z]{2,5} (" " [a-z]{2,5})? " ok")"));
  ContinuousBatch cb(m, tok, {.ctx_size = 64, .max_batch = 3}, 16);
  std::vector<BatchRequest> reqs;
  for (std::uint64_t i = 0; i < 6; ++i) {
    GenerateOptions o = sampling(40 + i, 20);
    o.grammar = g;
    reqs.push_back({cb.encode_prompt("pack"), o, 0, -1});
  }
  const BatchRun r = run_staggered(cb, reqs, {0, 0, 1, 2, 5, 5});
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    Generator alone(m, tok, {.ctx_size = 64, .max_batch = 1});
    const GenerateResult gr = alone.generate("pack", reqs[i].options);
    EXPECT_EQ(r.tokens[i], gr.tokens);
    EXPECT_EQ(gr.stop_reason, "stop");
    GrammarMatcher check(*g, std::make_shared<const TokenTrie>(token_bytes(tok)));
    EXPECT_TRUE(check.accept_bytes(gr.text) && check.accepting()) << gr.text;
  }
  // A character no token of the vocabulary writes ('.' is not in it): ends with "grammar".
  GenerateOptions dot = sampling(1, 20);
  dot.grammar = std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "the" ".")"));
  Generator gen_dot(m, tok, {.ctx_size = 64, .max_batch = 1});
  const GenerateResult stuck = gen_dot.generate("pack", dot);
  EXPECT_EQ(stuck.text, "the");
  EXPECT_EQ(stuck.stop_reason, "grammar");
  // The trigger: free text, then from the first "w" on the grammar's sentence.
  GenerateOptions o = sampling(3, 40);
  o.grammar = std::make_shared<const Grammar>(Grammar::parse(R"(root ::= "w" ("abc" | "cab"))"));
  o.grammar_trigger = "w";
  bool triggered = false;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    o.sampling.seed = seed;
    Generator gen(m, tok, {.ctx_size = 64, .max_batch = 1});
    const GenerateResult gr = gen.generate("the", o);
    const auto at = gr.text.find('w');
    if (at == std::string::npos) continue;
    triggered = true;
    EXPECT_TRUE(gr.text.substr(at) == "wabc" || gr.text.substr(at) == "wcab") << gr.text;
    EXPECT_EQ(gr.stop_reason, "stop");
  }
  EXPECT_TRUE(triggered);
}

// The prompt cache: a prompt sharing whole chunks with an earlier one reads them from the cache,
// and its tokens are bit-identical to a run without the cache; the chunk holding the last token
// is always computed; the budget evicts least recently used blocks.
TEST(ContinuousBatch, PromptCacheReusesWholeChunksBitIdentically) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 9);
  const std::string shared = "the quick brown fox jumps over the lazy dog ";  // 44 chars
  const std::vector<std::string> prompts = {shared + "pack", shared + "five dozen", shared.substr(0, 16), "pack my box"};
  const std::int64_t chunk = 8;
  auto run = [&](ContinuousBatch& cb, const std::string& p) {
    return run_staggered(cb, {{cb.encode_prompt(p), sampling(11, 6), 0, -1}}, {0}).tokens[0];
  };
  ContinuousBatch plain(m, tok, {.ctx_size = 64, .max_batch = 2}, chunk);
  ContinuousBatch cached(m, tok, {.ctx_size = 64, .max_batch = 2}, chunk);
  cached.enable_prompt_cache(1 << 20);
  std::vector<std::int64_t> reused;
  for (const auto& p : prompts) {
    EXPECT_EQ(run(cached, p), run(plain, p)) << p;
    // the cached_tokens of the request just run
    std::int64_t got = -1;
    const auto id = cached.add({cached.encode_prompt(p), sampling(11, 1), 0, -1});
    while (!cached.idle())
      for (const BatchEvent& e : cached.step())
        if (e.finished && e.id == id) got = e.result.cached_tokens;
    reused.push_back(got);
  }
  // Second runs: "<shared>pack" (48 tokens) reuses 40 (5 chunks; the 6th holds the last token);
  // "<shared>five dozen" (54) 48, its first run having added "dog five"; 16 tokens: 8; "pack my
  // box": its own first chunk (8). (The first runs above reused the shared chunks already.)
  EXPECT_EQ(reused, (std::vector<std::int64_t>{40, 48, 8, 8}));
  EXPECT_GT(cached.prompt_cache()->hits(), 0);
  // A budget of two blocks keeps the latest two only.
  ContinuousBatch small(m, tok, {.ctx_size = 64, .max_batch = 1}, chunk);
  small.enable_prompt_cache(2 * (cached.cache().bytes_per_position() * chunk + chunk * 4));
  (void)run(small, prompts[0]);
  EXPECT_EQ(small.prompt_cache()->blocks(), 2);
  EXPECT_GT(small.prompt_cache()->evictions(), 0);
}
