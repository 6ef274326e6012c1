// Model::set_attention_capture: weights of every attention call, checked against weights
// recomputed by hand, masks, shapes for the three architectures, and outputs unchanged.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig tiny(Architecture a) {
  ModelConfig c;
  c.architecture = a;
  c.vocab_size = 23; c.d_model = 16; c.n_heads = 2; c.n_layers = 1; c.d_ff = 24; c.max_positions = 16;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  c.head = a == Architecture::encoder_only ? HeadKind::classifier : HeadKind::lm;
  return c;
}

Tensor ids(std::int64_t B, std::int64_t T, int mul) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < B * T; ++i) v.push_back((i * mul + 3) % 23);
  return Tensor::from_ints(v, {B, T}, DType::i64);
}

float at(const std::vector<float>& w, const Shape& s, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  return w[static_cast<std::size_t>(((b * s[1] + h) * s[2] + i) * s[3] + j)];
}

}  // namespace

TEST(AttentionCapture, DecoderWeightsMatchHandComputationAndMasks) {
  ModelConfig c = tiny(Architecture::decoder_only);
  Model m = Model::create(c, 7);
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = ids(2, 5, 7);
  in.valid_lens = Tensor::from_ints({5, 3}, {2}, DType::i64);
  const Tensor plain = m.forward(in).logits;
  std::vector<AttentionMap> maps;
  m.set_attention_capture(&maps);
  const Tensor captured = m.forward(in).logits;
  m.set_attention_capture(nullptr);
  EXPECT_TRUE(test::expect_close(captured, plain, 1e-5, 1e-5, "logits with capture on vs off"));
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].stack, "decoder");
  EXPECT_EQ(maps[0].kind, "self");
  EXPECT_EQ(maps[0].layer, 0);
  const Shape s = maps[0].weights.shape();
  ASSERT_EQ(s, (Shape{2, 2, 5, 5}));

  // By hand: pre-norm layer 0 of the engine's scheme: h = LN(tok + pos); q, k = h W^T + b.
  auto& P = m.parameters();
  const Tensor x = add(embedding(in.input_ids, P.at("embed_tokens.weight")),
                       embedding(position_ids(5), P.at("embed_positions.weight")));
  const Tensor h = layer_norm(x, P.at("decoder.layers.0.self_attn_norm.weight"), P.at("decoder.layers.0.self_attn_norm.bias"),
                              static_cast<float>(c.norm_eps));
  const std::vector<float> q = contiguous(linear(h, P.at("decoder.layers.0.self_attn.q_proj.weight"),
                                                 P.at("decoder.layers.0.self_attn.q_proj.bias"))).to_floats();
  const std::vector<float> k = contiguous(linear(h, P.at("decoder.layers.0.self_attn.k_proj.weight"),
                                                 P.at("decoder.layers.0.self_attn.k_proj.bias"))).to_floats();
  const std::vector<float> w = contiguous(maps[0].weights).to_floats();
  const std::int64_t lens[2] = {5, 3}, D = 8;
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t hd = 0; hd < 2; ++hd)
      for (std::int64_t i = 0; i < 5; ++i) {
        std::vector<double> sc;
        double mx = -1e30, z = 0, row_sum = 0;
        for (std::int64_t j = 0; j < 5; ++j) {
          double d = 0;
          for (std::int64_t e = 0; e < D; ++e)
            d += static_cast<double>(q[static_cast<std::size_t>((b * 5 + i) * 16 + hd * D + e)]) *
                 k[static_cast<std::size_t>((b * 5 + j) * 16 + hd * D + e)];
          sc.push_back(d / std::sqrt(static_cast<double>(D)));
          if (j <= i && j < lens[b]) mx = std::max(mx, sc.back());
        }
        for (std::int64_t j = 0; j < 5; ++j)
          if (j <= i && j < lens[b]) z += std::exp(sc[static_cast<std::size_t>(j)] - mx);
        for (std::int64_t j = 0; j < 5; ++j) {
          const bool seen = j <= i && j < lens[b];
          const double want = seen ? std::exp(sc[static_cast<std::size_t>(j)] - mx) / z : 0.0;
          const float got = at(w, s, b, hd, i, j);
          if (!seen) {
            EXPECT_EQ(got, 0.0f) << "masked weight b" << b << " h" << hd << " (" << i << "," << j << ")";
          }
          EXPECT_NEAR(got, want, 1e-5) << "b" << b << " h" << hd << " (" << i << "," << j << ")";
          row_sum += got;
        }
        EXPECT_NEAR(row_sum, 1.0, 1e-5);
      }
}

TEST(AttentionCapture, EncoderPaddingColumnsAndClassifierOutput) {
  Model m = Model::create(tiny(Architecture::encoder_only), 8);
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = ids(2, 6, 5);
  in.valid_lens = Tensor::from_ints({6, 4}, {2}, DType::i64);
  m.set_fused_attention(true);
  const Tensor plain = m.forward(in).logits;
  std::vector<AttentionMap> maps;
  m.set_attention_capture(&maps);
  const Tensor captured = m.forward(in).logits;
  EXPECT_TRUE(test::expect_close(captured, plain, 1e-5, 1e-5, "classifier logits with capture on vs off"));
  ASSERT_EQ(maps.size(), 1u);
  EXPECT_EQ(maps[0].stack, "encoder");
  EXPECT_EQ(maps[0].kind, "self");
  const Shape s = maps[0].weights.shape();
  ASSERT_EQ(s, (Shape{2, 2, 6, 6}));
  const std::vector<float> w = contiguous(maps[0].weights).to_floats();
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < 6; ++i) {
        double sum = 0;
        bool upper_nonzero = false;
        for (std::int64_t j = 0; j < 6; ++j) {
          sum += at(w, s, b, h, i, j);
          if (j > i && at(w, s, b, h, i, j) > 0) upper_nonzero = true;
          if (b == 1 && j >= 4) {
            EXPECT_EQ(at(w, s, b, h, i, j), 0.0f) << "padding column " << j;
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
        if (i < 3) {
          EXPECT_TRUE(upper_nonzero) << "an encoder is not causal";
        }
      }
}

TEST(AttentionCapture, EncoderDecoderRecordsEveryCallInOrder) {
  ModelConfig c = tiny(Architecture::encoder_decoder);
  c.n_layers = 2;
  c.n_decoder_layers = 3;
  c.position = PositionKind::sinusoidal;
  Model m = Model::create(c, 9);
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = ids(2, 7, 3);
  in.valid_lens = Tensor::from_ints({7, 5}, {2}, DType::i64);
  in.decoder_input_ids = ids(2, 4, 11);
  const Tensor plain = m.forward(in).logits;
  std::vector<AttentionMap> maps;
  m.set_attention_capture(&maps);
  const Tensor captured = m.forward(in).logits;
  m.set_attention_capture(nullptr);
  EXPECT_TRUE(test::expect_close(captured, plain, 1e-5, 1e-5, "seq2seq logits with capture on vs off"));
  ASSERT_EQ(maps.size(), 2u + 3u * 2u);
  const char* want[][2] = {{"encoder", "self"}, {"encoder", "self"}, {"decoder", "self"}, {"decoder", "cross"},
                           {"decoder", "self"}, {"decoder", "cross"}, {"decoder", "self"}, {"decoder", "cross"}};
  const std::int64_t layer[] = {0, 1, 0, 0, 1, 1, 2, 2};
  for (std::size_t i = 0; i < maps.size(); ++i) {
    EXPECT_EQ(maps[i].stack, want[i][0]) << i;
    EXPECT_EQ(maps[i].kind, want[i][1]) << i;
    EXPECT_EQ(maps[i].layer, layer[i]) << i;
    const Shape s = maps[i].weights.shape();
    const bool enc = maps[i].stack == "encoder", cross = maps[i].kind == "cross";
    EXPECT_EQ(s, (Shape{2, 2, enc ? 7 : 4, enc || cross ? 7 : 4})) << i;
    const std::vector<float> w = contiguous(maps[i].weights).to_floats();
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t r = 0; r < s[2]; ++r) {
        double sum = 0;
        for (std::int64_t j = 0; j < s[3]; ++j) {
          sum += at(w, s, b, 1, r, j);
          if (!enc && !cross && j > r) {
            EXPECT_EQ(at(w, s, b, 1, r, j), 0.0f) << "causal";
          }
          if ((enc || cross) && b == 1 && j >= 5) {
            EXPECT_EQ(at(w, s, b, 1, r, j), 0.0f) << "source padding";
          }
        }
        EXPECT_NEAR(sum, 1.0, 1e-5);
      }
  }
  // Capture off again: nothing more is recorded.
  m.forward(in);
  EXPECT_EQ(maps.size(), 8u);
}
