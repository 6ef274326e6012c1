// Model::create: reproducible from the seed, and each family's init convention holds
// statistically (sample std within a few standard errors of the convention).
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

struct Moments {
  double mean = 0, std = 0, min = 0, max = 0;
  std::int64_t n = 0;
};

Moments moments(const Tensor& t) {
  const auto v = contiguous(t).to_floats();
  Moments m;
  m.n = static_cast<std::int64_t>(v.size());
  double s = 0, s2 = 0;
  m.min = m.max = v.empty() ? 0.0 : v[0];
  for (float x : v) {
    s += x;
    s2 += static_cast<double>(x) * x;
    m.min = std::min<double>(m.min, x);
    m.max = std::max<double>(m.max, x);
  }
  m.mean = s / static_cast<double>(m.n);
  m.std = std::sqrt(std::max(0.0, s2 / static_cast<double>(m.n) - m.mean * m.mean));
  return m;
}

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// Sample std of n normal draws has relative standard error ~ 1/sqrt(2n); allow 5 of them.
void expect_normal(const Tensor& t, double want_std, const std::string& what, bool tails = true) {
  const Moments m = moments(t);
  const double rel = 5.0 / std::sqrt(2.0 * static_cast<double>(m.n));
  EXPECT_NEAR(m.std, want_std, rel * want_std) << what << " n=" << m.n;
  EXPECT_NEAR(m.mean, 0.0, 5.0 * want_std / std::sqrt(static_cast<double>(m.n))) << what;
  if (tails) {
    EXPECT_GT(m.max, 2.0 * want_std) << what << ": a normal sample of this size has tails";
  }
}

void expect_constant(const Tensor& t, float value, const std::string& what) {
  for (float x : contiguous(t).to_floats()) ASSERT_EQ(x, value) << what;
}

ModelConfig parse(const std::string& json) { return parse_model_config(json, "test"); }

ModelConfig small_engine() {
  return parse(R"({"model_type":"transformer","architecture":"encoder_decoder","vocab_size":50,"d_model":32,
      "n_heads":4,"n_kv_heads":2,"n_layers":2,"d_ff":64,"activation":"swiglu","position":"t5_relative",
      "relative_buckets":8,"tie_embeddings":false})");
}

}  // namespace

TEST(ModelInit, SameSeedIsBitwiseReproducible) {
  for (const ModelConfig& c : {small_engine(), parse(R"({"model_type":"gpt2","vocab_size":40,"n_embd":16,
                                    "n_layer":2,"n_head":2,"n_positions":16})")}) {
    const Model a = Model::create(c, 1234), b = Model::create(c, 1234);
    ASSERT_EQ(a.parameters().size(), b.parameters().size());
    for (const auto& [name, t] : a.parameters()) test::expect_bitwise_equal(t, b.parameters().at(name), name);
  }
}

TEST(ModelInit, DifferentSeedsAndDifferentTensorsDiffer) {
  const ModelConfig c = small_engine();
  const Model a = Model::create(c, 1), b = Model::create(c, 2);
  int random = 0;
  for (const auto& [name, t] : a.parameters()) {
    const Moments m = moments(t);
    if (m.min == m.max) continue;  // constants (norm weights, biases) are seed-independent
    ++random;
    const auto x = t.to_floats(), y = b.parameters().at(name).to_floats();
    std::size_t same = 0;
    for (std::size_t i = 0; i < x.size(); ++i) same += x[i] == y[i];
    EXPECT_LT(same, x.size() / 100 + 1) << name << " barely changed with the seed";
  }
  EXPECT_GT(random, 10);
  // Two same-shaped weights of one model draw from different streams.
  const auto q0 = a.parameters().at("encoder.layers.0.self_attn.k_proj.weight").to_floats();
  const auto q1 = a.parameters().at("encoder.layers.0.self_attn.v_proj.weight").to_floats();
  EXPECT_NE(q0, q1);
}

TEST(ModelInit, Gpt2ScalesResidualProjections) {
  const std::int64_t layers = 4;
  const ModelConfig c = parse(R"({"model_type":"gpt2","vocab_size":200,"n_embd":64,"n_layer":4,"n_head":4,
      "n_positions":64})");
  const Model m = Model::create(c, 7);
  const double f = 0.02, proj = f / std::sqrt(2.0 * layers);
  int checked_proj = 0;
  for (const auto& [name, t] : m.parameters()) {
    if (ends_with(name, ".bias")) {
      expect_constant(t, 0.0f, name);
    } else if (name.find("ln_") != std::string::npos) {
      expect_constant(t, 1.0f, name);
    } else if (ends_with(name, "c_proj.weight")) {
      expect_normal(t, proj, name);
      ++checked_proj;
    } else {
      expect_normal(t, f, name);  // wte, wpe, c_attn, c_fc
    }
  }
  EXPECT_EQ(checked_proj, 2 * layers);  // attn.c_proj and mlp.c_proj of every layer
}

TEST(ModelInit, T5FollowsInitializerFactor) {
  const ModelConfig c = parse(R"({"model_type":"t5","vocab_size":128,"d_model":64,"d_kv":16,"d_ff":96,
      "num_layers":2,"num_heads":4,"relative_attention_num_buckets":32,"feed_forward_proj":"gated-gelu"})");
  const Model m = Model::create(c, 3);
  const double d = 64, dkv = 16, h = 4, ff = 96;
  for (const auto& [name, t] : m.parameters()) {
    if (name.find("layer_norm") != std::string::npos) {
      expect_constant(t, 1.0f, name);
    } else if (name == "shared.weight") {
      expect_normal(t, 1.0, name);
    } else if (ends_with(name, ".q.weight")) {
      expect_normal(t, 1.0 / std::sqrt(d * dkv), name);
    } else if (ends_with(name, ".k.weight") || ends_with(name, ".v.weight")) {
      expect_normal(t, 1.0 / std::sqrt(d), name);
    } else if (ends_with(name, ".o.weight")) {
      expect_normal(t, 1.0 / std::sqrt(h * dkv), name);
    } else if (ends_with(name, ".wo.weight")) {
      expect_normal(t, 1.0 / std::sqrt(ff), name);
    } else if (ends_with(name, ".wi_0.weight") || ends_with(name, ".wi_1.weight")) {
      expect_normal(t, 1.0 / std::sqrt(d), name);
    } else {
      ASSERT_NE(name.find("relative_attention_bias"), std::string::npos) << "unexpected " << name;
      expect_normal(t, 1.0 / std::sqrt(d), name, /*tails=*/false);  // a (32, 4) table: too few for tails
    }
  }
}

TEST(ModelInit, VaswaniXavierUniformMatrices) {
  ModelConfig c = model_preset("vaswani");
  c.vocab_size = 300; c.d_model = 64; c.n_heads = 4; c.d_ff = 128; c.n_layers = 1; c.max_positions = 64;
  const Model m = Model::create(c, 11);
  int matrices = 0;
  for (const auto& [name, t] : m.parameters()) {
    if (ends_with(name, ".bias")) {
      expect_constant(t, 0.0f, name);
    } else if (name.find("norm") != std::string::npos) {
      expect_constant(t, 1.0f, name);
    } else if (name == "embed_tokens.weight") {
      expect_normal(t, 1.0 / std::sqrt(64.0), name);  // N(0, d^-1/2): it is multiplied by sqrt(d)
    } else {
      ASSERT_EQ(t.dim(), 2) << name;
      ++matrices;
      // q/k/v: the bound of nn.MultiheadAttention's packed (3C, C) in_proj, as nn.Transformer.
      const bool qkv = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos ||
                       name.find("v_proj") != std::string::npos;
      const double bound = std::sqrt(6.0 / static_cast<double>(qkv ? 4 * 64 : t.size(0) + t.size(1)));
      const Moments s = moments(t);
      EXPECT_GE(s.min, -bound) << name;
      EXPECT_LE(s.max, bound) << name;
      EXPECT_GT(s.max, 0.95 * bound) << name << ": a uniform sample reaches near its bound";
      EXPECT_LT(s.min, -0.95 * bound) << name;
      const double want = bound / std::sqrt(3.0);  // std of U(-a, a)
      EXPECT_NEAR(s.std, want, 5.0 * want / std::sqrt(static_cast<double>(s.n))) << name;
    }
  }
  EXPECT_EQ(matrices, 4 + 2 + 8 + 2);  // encoder attn q/k/v/o + ffn; decoder self + cross + ffn
}

TEST(ModelInit, EngineNormsAndScaleNorm) {
  const ModelConfig c = parse(R"({"model_type":"transformer","vocab_size":50,"d_model":36,"n_heads":4,
      "n_layers":1,"d_ff":64,"norm":"scale_norm","embedding_norm":true,"activation":"relu"})");
  const Model m = Model::create(c, 5);
  int norms = 0;
  for (const auto& [name, t] : m.parameters()) {
    if (ends_with(name, ".bias")) {
      expect_constant(t, 0.0f, name);
    } else if (name.find("norm") != std::string::npos) {
      ASSERT_EQ(t.shape(), Shape{1}) << name;
      expect_constant(t, 6.0f, name);  // ScaleNorm's g starts at sqrt(d_model)
      ++norms;
    } else {
      expect_normal(t, 0.02, name);  // init_std
    }
  }
  EXPECT_EQ(norms, 4);  // embed_norm, self_attn_norm, ffn_norm, final norm
}

TEST(ModelInit, BertAndLlamaNormalWithZeroPaddingRow) {
  const ModelConfig bert = parse(R"({"model_type":"bert","vocab_size":300,"hidden_size":32,"num_hidden_layers":1,
      "num_attention_heads":2,"intermediate_size":64,"max_position_embeddings":64,"pad_token_id":3})");
  const ModelConfig llama = parse(R"({"model_type":"llama","vocab_size":300,"hidden_size":32,"intermediate_size":64,
      "num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"pad_token_id":5})");
  for (const ModelConfig& c : {bert, llama}) {
    const Model m = Model::create(c, 9);
    for (const auto& [name, t] : m.parameters()) {
      if (ends_with(name, ".bias")) {
        expect_constant(t, 0.0f, name);
      } else if (name.find("LayerNorm") != std::string::npos || name.find("layernorm") != std::string::npos ||
                 name == "model.norm.weight") {
        expect_constant(t, 1.0f, name);
      } else if (name == "bert.embeddings.word_embeddings.weight" || name == "model.embed_tokens.weight") {
        // nn.Embedding(padding_idx): the pad row starts at zero, the others are N(0, 0.02).
        const std::int64_t pad = c.pad_token_id, C = t.size(1);
        const auto v = t.to_floats();
        for (std::int64_t j = 0; j < C; ++j) ASSERT_EQ(v[static_cast<std::size_t>(pad * C + j)], 0.0f) << name;
        EXPECT_NE(v[static_cast<std::size_t>((pad + 1) * C)], 0.0f) << name;
        expect_normal(t, 0.02 * std::sqrt(1.0 - 1.0 / 300.0), name);
      } else {
        expect_normal(t, 0.02, name, t.numel() >= 1000);
      }
    }
  }
}
