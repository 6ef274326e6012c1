// Generator / Translator (session.h): batch invariance of whole generations (sampling
// included), seeds, beam 1 == greedy, context shift, stop strings, and bad input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"
#include "support/train_helpers.h"

using namespace tfm;
using train_test::expect_error;

namespace {

const std::vector<std::string> kCorpus = {"the quick brown fox jumps over the lazy dog",
                                          "pack my box with five dozen liquor jugs", "how vexingly quick daft zebras jump",
                                          "Sphinx of black quartz, judge my vow!"};

Tokenizer char_tokenizer() {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::char_level;
  return Tokenizer::train(kCorpus, o);
}

ModelConfig lm_config(std::int64_t vocab) {
  ModelConfig c;
  c.vocab_size = vocab; c.d_model = 32; c.n_heads = 4; c.n_kv_heads = 2; c.n_layers = 2; c.d_ff = 64;
  c.max_positions = 48;
  c.position = PositionKind::rope;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.init_std = 0.3;  // a peaky random model, so greedy and sampling do different things
  return c;
}

ModelConfig s2s_config(std::int64_t vocab) {
  ModelConfig c = model_preset("vaswani");
  c.vocab_size = vocab; c.d_model = 32; c.n_heads = 4; c.d_ff = 64; c.n_layers = 2; c.max_positions = 48;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.init_std = 0.3;
  return c;
}

const std::vector<std::string> kPrompts = {"the", "pack my box", "q", "how vexingly quick", "Sphinx of",
                                           "jump", "five dozen liquor", "over the lazy dog and"};

}  // namespace

TEST(Session, BatchedGenerationEqualsEachPromptAloneForGreedyAndSampling) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 3);
  for (const double temp : {0.0, 1.0}) {
    GenerateOptions o;
    o.max_new_tokens = 20;
    o.sampling.temperature = temp;
    o.sampling.seed = 42;
    o.sampling.repeat_penalty = 1.1;
    Generator batch(m, tok, {.ctx_size = 48, .max_batch = 8});
    const auto together = batch.generate_batch(kPrompts, o);
    Generator three(m, tok, {.ctx_size = 48, .max_batch = 3});  // other batch sizes and neighbours
    const auto by_three = three.generate_batch(kPrompts, o);
    for (std::size_t i = 0; i < kPrompts.size(); ++i) {
      Generator alone(m, tok, {.ctx_size = 48, .max_batch = 1});
      const auto one = alone.generate(kPrompts[i], o);
      EXPECT_EQ(together[i].tokens, one.tokens) << "temp " << temp << " prompt '" << kPrompts[i] << "'";
      EXPECT_EQ(by_three[i].tokens, one.tokens) << "temp " << temp << " prompt '" << kPrompts[i] << "'";
      EXPECT_EQ(together[i].text, one.text);
    }
  }
}

TEST(Session, SeedsReproduceAndDiffer) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 4);
  Generator g(m, tok, {.ctx_size = 48});
  GenerateOptions o;
  o.max_new_tokens = 30;
  o.sampling.temperature = 1.5;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0;
  o.sampling.min_p = 0;
  o.sampling.seed = 7;
  const auto a = g.generate("the", o), b = g.generate("the", o);
  EXPECT_EQ(a.tokens, b.tokens);
  o.sampling.seed = 8;
  EXPECT_NE(g.generate("the", o).tokens, a.tokens);
}

TEST(Session, BeamOneEqualsGreedyAndNBestIsSortedAndDistinct) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 5);
  Generator g(m, tok, {.ctx_size = 48, .max_batch = 4});
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 0;
  o.stop_at_eos = false;
  const auto greedy = g.generate("pack", o);
  BeamOptions b;
  b.beam_size = 1;
  b.max_new_tokens = 12;
  b.eos_id = -1;
  EXPECT_EQ(g.beam("pack", b)[0].tokens, greedy.tokens);
  b.beam_size = 4;
  b.n_best = 4;
  const auto hyps = g.beam("pack", b);
  ASSERT_EQ(hyps.size(), 4u);
  for (std::size_t i = 1; i < hyps.size(); ++i) {
    EXPECT_GE(hyps[i - 1].score, hyps[i].score);
    for (std::size_t j = 0; j < i; ++j) EXPECT_NE(hyps[i].tokens, hyps[j].tokens);
  }
}

TEST(Session, ContextShiftKeepsGoingAndStopStringsCut) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(lm_config(tok.vocab_size()), 6);
  Generator g(m, tok, {.ctx_size = 16});
  GenerateOptions o;
  o.max_new_tokens = 40;
  o.sampling.temperature = 0;
  o.stop_at_eos = false;
  const auto r = g.generate("the quick", o);
  EXPECT_EQ(r.tokens.size(), 40u);
  EXPECT_EQ(r.stop_reason, "length");
  EXPECT_GT(r.context_shifts, 0);
  o.context_shift = false;
  const auto full = g.generate("the quick", o);
  EXPECT_EQ(full.stop_reason, "context");
  // 9 prompt positions + 7 generated ones fill the 16; the 8th comes from the last logits.
  EXPECT_EQ(full.tokens.size(), 16u - 9u + 1u);
  // A stop string taken from the greedy text: the output ends right before it.
  o.context_shift = true;
  ASSERT_GE(r.text.size(), 12u);
  o.stop = {r.text.substr(8, 3)};
  const auto cut = g.generate("the quick", o);
  EXPECT_EQ(cut.stop_reason, "stop");
  EXPECT_EQ(cut.text, r.text.substr(0, r.text.find(o.stop[0]))) << "full text '" << r.text << "', stop '" << o.stop[0] << "'";
  // Streaming pieces add up to the text.
  std::string streamed;
  const auto s = g.generate("the quick", o, [&](std::string_view p) { streamed += p; });
  EXPECT_EQ(streamed, s.text);
}

TEST(Session, TranslatorBatchedGreedyEqualsOneByOneAndBeamOneEqualsGreedy) {
  const Tokenizer tok = char_tokenizer();
  Model m = Model::create(s2s_config(tok.vocab_size()), 7);
  BeamOptions greedy;
  greedy.beam_size = 1;
  greedy.max_new_tokens = 15;
  Translator batch(m, tok, {.ctx_size = 32, .max_batch = 8});
  const auto all = batch.translate(kPrompts, greedy);
  Translator single(m, tok, {.ctx_size = 32, .max_batch = 4});
  for (std::size_t i = 0; i < kPrompts.size(); ++i) {
    const auto one = single.translate({kPrompts[i]}, greedy)[0];
    EXPECT_EQ(all[i].hypotheses[0].tokens, one.hypotheses[0].tokens) << kPrompts[i];
    // Beam search with one beam over the same cache machinery gives the greedy tokens.
    const auto src = single.encode_source(kPrompts[i]);
    KVCache cache(m.config(), 1, 32, 1, 48);
    m.encode_to_cache(Tensor::from_ints(std::vector<std::int64_t>(src.begin(), src.end()),
                                        {1, static_cast<std::int64_t>(src.size())}),
                      cache, 0);
    const auto first = m.decode_cached(Tensor::from_ints({tok.bos_id()}, {1, 1}), {0}, cache).to_floats();
    CacheStepper stepper(m, cache);
    BeamOptions single_beam = greedy;
    single_beam.eos_id = tok.eos_id();
    EXPECT_EQ(beam_search(stepper, first, single_beam)[0].tokens, one.hypotheses[0].tokens) << kPrompts[i];
  }
}

TEST(Session, BadInputIsAClearError) {
  const Tokenizer tok = char_tokenizer();
  Model lm = Model::create(lm_config(tok.vocab_size()), 8);
  Generator g(lm, tok, {.ctx_size = 8});
  GenerateOptions o;
  EXPECT_NE(expect_error([&] { g.generate("", o); }).find("prompt is empty"), std::string::npos);
  EXPECT_NE(expect_error([&] { g.generate("the quick brown", o); }).find("the context holds 8"), std::string::npos);
  EXPECT_NE(expect_error([&] { Translator t(lm, tok, {}); }).find("encoder-decoder"), std::string::npos);
  Model s2s = Model::create(s2s_config(tok.vocab_size()), 9);
  EXPECT_NE(expect_error([&] { Generator x(s2s, tok, {}); }).find("tfm translate"), std::string::npos);
  ModelConfig learned = lm_config(tok.vocab_size());
  learned.position = PositionKind::learned;
  Model lm_learned = Model::create(learned, 10);
  EXPECT_NE(expect_error([&] { Generator x(lm_learned, tok, {.ctx_size = 100}); }).find("learned position"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { load_model_dir("/nonexistent/model"); }).find("does not exist"), std::string::npos);
  EXPECT_NE(expect_error([&] { check_utf8(std::string("ab\xff"), "-p"); }).find("[-p] invalid UTF-8 at byte 2"),
            std::string::npos);
}

TEST(Session, CompleteUtf8PrefixHoldsBackCutCharacters) {
  const std::string zh = "\xe4\xbd\xa0\xe5\xa5\xbd";  // 你好
  EXPECT_EQ(complete_utf8_prefix(zh), 6u);
  EXPECT_EQ(complete_utf8_prefix(zh.substr(0, 5)), 3u);
  EXPECT_EQ(complete_utf8_prefix(zh.substr(0, 4)), 3u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
}
