// KV-cache decoding (Model::decode_cached) against full recomputation (Model::forward), for
// every family and position scheme, and batch invariance: a sequence decoded beside seven
// others is bit-identical to the same sequence decoded alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/test_support.h"
#include "support/train_helpers.h"
#include "tfm/autograd.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/ops.h"

using namespace tfm;

namespace {

struct Case {
  std::string name;
  ModelConfig cfg;
};

ModelConfig shrink(ModelConfig c) {
  c.vocab_size = 29; c.d_model = 32; c.n_heads = 4; c.d_ff = 48; c.n_layers = 2; c.max_positions = 40;
  if (c.n_kv_heads > c.n_heads) c.n_kv_heads = 0;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  c.pad_token_id = 0; c.bos_token_id = 1; c.eos_token_id = 2; c.decoder_start_token_id = 1;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"gpt2", shrink(model_preset("gpt2"))});
  ModelConfig llama = shrink(model_preset("llama"));
  llama.n_kv_heads = 2;  // GQA
  out.push_back({"llama_gqa_rope", llama});
  ModelConfig e = shrink(ModelConfig{});
  e.position = PositionKind::alibi;
  out.push_back({"alibi", e});
  e.position = PositionKind::rope;
  e.rope_pairing = RopePairing::adjacent;
  e.sliding_window = 4;
  e.n_kv_heads = 1;  // MQA
  out.push_back({"rope_adjacent_window4_mqa", e});
  e = shrink(ModelConfig{});
  e.position = PositionKind::sinusoidal;
  e.norm_placement = NormPlacement::post;
  e.norm = NormKind::rms_norm;
  e.activation = FfnActivation::geglu;
  out.push_back({"sinusoidal_postnorm_rms_geglu", e});
  out.push_back({"t5_buckets", shrink(model_preset("t5"))});
  out.push_back({"vaswani", shrink(model_preset("vaswani"))});
  return out;
}

bool enc_dec(const ModelConfig& c) { return c.architecture == Architecture::encoder_decoder; }

std::vector<std::int64_t> tokens(std::int64_t n, std::int64_t seed, std::int64_t vocab) {
  std::vector<std::int64_t> t;
  for (std::int64_t i = 0; i < n; ++i) t.push_back(3 + (i * 7 + seed * 13 + i * i) % (vocab - 3));
  return t;
}

// Logits (T, V) of the whole sequence by full recomputation.
Tensor full_logits(Model& m, const std::vector<std::int64_t>& seq, const std::vector<std::int64_t>& src) {
  NoGradGuard g;
  ModelInputs in;
  const auto T = static_cast<std::int64_t>(seq.size());
  if (enc_dec(m.config())) {
    in.input_ids = Tensor::from_ints(src, {1, static_cast<std::int64_t>(src.size())});
    in.decoder_input_ids = Tensor::from_ints(seq, {1, T});
  } else {
    in.input_ids = Tensor::from_ints(seq, {1, T});
  }
  return squeeze(m.forward(in).logits, 0);
}

// Logits (T, V) by a prefill of `prefill` tokens then one token per step, in cache slot `slot`.
Tensor cached_logits(Model& m, KVCache& cache, std::int64_t slot, const std::vector<std::int64_t>& seq,
                     std::int64_t prefill) {
  std::vector<Tensor> parts;
  const std::vector<std::int64_t> first(seq.begin(), seq.begin() + prefill);
  parts.push_back(squeeze(m.decode_cached(Tensor::from_ints(first, {1, prefill}), {slot}, cache, true), 0));
  for (std::size_t t = static_cast<std::size_t>(prefill); t < seq.size(); ++t)
    parts.push_back(m.decode_cached(Tensor::from_ints({seq[t]}, {1, 1}), {slot}, cache));  // (1, V)
  return concat(parts, 0);
}

}  // namespace

TEST(KVCache, CachedDecodingEqualsFullRecomputationForEveryFamily) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    Model m = Model::create(k.cfg, 11);
    const auto src = tokens(9, 1, k.cfg.vocab_size);
    for (const std::int64_t prefill : {1, 5}) {
      const auto seq = tokens(14, 2, k.cfg.vocab_size);
      KVCache cache(k.cfg, 2, 20, 1, 16);
      if (enc_dec(k.cfg)) m.encode_to_cache(Tensor::from_ints(src, {1, 9}), cache, 0);
      const Tensor got = cached_logits(m, cache, 1, seq, prefill);
      test::expect_close(got, full_logits(m, seq, src), 1e-5, 1e-5, k.name + " prefill " + std::to_string(prefill));
      EXPECT_EQ(cache.length(1), 14);
      EXPECT_EQ(cache.length(0), 0);
    }
  }
}

TEST(KVCache, GreedyTokensMatchRecomputation) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    Model m = Model::create(k.cfg, 12);
    const auto src = tokens(7, 3, k.cfg.vocab_size);
    KVCache cache(k.cfg, 1, 24, 1, 8);
    if (enc_dec(k.cfg)) m.encode_to_cache(Tensor::from_ints(src, {1, 7}), cache, 0);
    std::vector<std::int64_t> seq = {1, 5, 9}, full = seq;
    Tensor logits = m.decode_cached(Tensor::from_ints(seq, {1, 3}), {0}, cache);
    for (int step = 0; step < 12; ++step) {
      const std::int64_t next = argmax(logits, -1).to_ints()[0];
      const Tensor ref = full_logits(m, full, src);
      const std::int64_t ref_next = argmax(slice(ref, 0, -1, ref.size(0)), -1).to_ints()[0];
      ASSERT_EQ(next, ref_next) << "step " << step;
      seq.push_back(next);
      full.push_back(ref_next);
      logits = m.decode_cached(Tensor::from_ints({next}, {1, 1}), {0}, cache);
    }
  }
}

TEST(KVCache, BatchOfEightMixedLengthsIsBitIdenticalToEachSequenceAlone) {
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    Model m = Model::create(k.cfg, 13);
    const std::int64_t B = 8, steps = 6;
    KVCache batch(k.cfg, B, 32, B, 12);
    std::vector<std::vector<std::int64_t>> prompts, srcs;
    std::vector<Tensor> batch_out(static_cast<std::size_t>(B));
    for (std::int64_t b = 0; b < B; ++b) {
      prompts.push_back(tokens(1 + (b * 5) % 17, b, k.cfg.vocab_size));
      srcs.push_back(tokens(2 + (b * 3) % 10, b + 20, k.cfg.vocab_size));
      if (enc_dec(k.cfg)) {
        m.encode_to_cache(Tensor::from_ints(srcs.back(), {1, static_cast<std::int64_t>(srcs.back().size())}), batch, b);
        batch.bind_source(b, b);
      }
      const auto& p = prompts.back();
      batch_out[static_cast<std::size_t>(b)] =
          m.decode_cached(Tensor::from_ints(p, {1, static_cast<std::int64_t>(p.size())}), {b}, batch);
    }
    // Decode all eight together, one token each per step; each row feeds its own argmax.
    std::vector<std::int64_t> slots;
    for (std::int64_t b = 0; b < B; ++b) slots.push_back(b);
    std::vector<std::vector<std::int64_t>> fed(static_cast<std::size_t>(B));
    std::vector<Tensor> batch_logits;  // per step (B, V)
    Tensor last = concat(batch_out, 0);
    for (std::int64_t s = 0; s < steps; ++s) {
      const auto next = argmax(last, -1).to_ints();
      for (std::int64_t b = 0; b < B; ++b) fed[static_cast<std::size_t>(b)].push_back(next[static_cast<std::size_t>(b)]);
      last = m.decode_cached(Tensor::from_ints(next, {B, 1}), slots, batch);
      batch_logits.push_back(last);
    }
    // Each sequence alone, in a cache of its own.
    for (std::int64_t b = 0; b < B; ++b) {
      KVCache alone(k.cfg, 1, 32, 1, 12);
      const auto& src = srcs[static_cast<std::size_t>(b)];
      if (enc_dec(k.cfg)) m.encode_to_cache(Tensor::from_ints(src, {1, static_cast<std::int64_t>(src.size())}), alone, 0);
      const auto& p = prompts[static_cast<std::size_t>(b)];
      m.decode_cached(Tensor::from_ints(p, {1, static_cast<std::int64_t>(p.size())}), {0}, alone);
      for (std::int64_t s = 0; s < steps; ++s) {
        const Tensor one = m.decode_cached(Tensor::from_ints({fed[static_cast<std::size_t>(b)][static_cast<std::size_t>(s)]}, {1, 1}), {0}, alone);
        test::expect_bitwise_equal(one, slice(batch_logits[static_cast<std::size_t>(s)], 0, b, b + 1),
                                   k.name + " row " + std::to_string(b) + " step " + std::to_string(s));
      }
    }
  }
}

TEST(KVCache, ReorderCopiesSlotsLikeBeamSearchNeeds) {
  ModelConfig c = cases()[1].cfg;
  Model m = Model::create(c, 14);
  KVCache cache(c, 3, 16);
  const auto a = tokens(4, 1, c.vocab_size), b = tokens(6, 2, c.vocab_size);
  m.decode_cached(Tensor::from_ints(a, {1, 4}), {0}, cache);
  m.decode_cached(Tensor::from_ints(b, {1, 6}), {1}, cache);
  cache.reorder({1, 1, 0});  // slot 0 <- old 1, slot 1 <- old 1, slot 2 <- old 0
  EXPECT_EQ(cache.length(0), 6);
  EXPECT_EQ(cache.length(2), 4);
  const Tensor x = m.decode_cached(Tensor::from_ints({7, 7, 7}, {3, 1}), {0, 1, 2}, cache);
  auto with = [&](std::vector<std::int64_t> seq) { seq.push_back(7); return slice(full_logits(m, seq, {}), 0, -1, static_cast<std::int64_t>(seq.size())); };
  test::expect_close(slice(x, 0, 0, 1), with(b), 1e-5, 1e-5, "slot 0 = old slot 1");
  test::expect_close(slice(x, 0, 1, 2), with(b), 1e-5, 1e-5, "slot 1 = old slot 1");
  test::expect_close(slice(x, 0, 2, 3), with(a), 1e-5, 1e-5, "slot 2 = old slot 0");
}

TEST(KVCache, ContextOverflowAndBadSlotsAreClearErrors) {
  ModelConfig c = cases()[0].cfg;
  Model m = Model::create(c, 15);
  KVCache cache(c, 1, 8);
  EXPECT_NE(train_test::expect_error([&] { m.decode_cached(Tensor::from_ints(tokens(9, 1, 29), {1, 9}), {0}, cache); })
                .find("past the context size 8"), std::string::npos);
  EXPECT_NE(train_test::expect_error([&] { m.decode_cached(Tensor::from_ints({3}, {1, 1}), {1}, cache); }).find("slot 1 out of range"),
            std::string::npos);
  EXPECT_EQ(KVCache::bytes_needed(c, 1, 8), cache.bytes());
  EXPECT_EQ(cache.bytes(), 2 * 2 * 4 * 8 * 8 * 4);  // layers, k/v, kv heads, positions, head dim, f32
}
