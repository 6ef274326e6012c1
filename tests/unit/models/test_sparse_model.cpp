// "sparse_attention" in a model config: parsing and its errors, the round trip through
// config.json, the pattern reaching every layer (fused == plain, != dense), and KV-cached
// decoding reproducing the uncached sparse pattern.
#include <gtest/gtest.h>

#include <string>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig tiny(Architecture a) {
  ModelConfig c;
  c.architecture = a;
  c.vocab_size = 31; c.d_model = 16; c.n_heads = 2; c.n_layers = 2; c.d_ff = 24; c.max_positions = 64;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  c.head = a == Architecture::encoder_only ? HeadKind::classifier : HeadKind::lm;
  c.sparse_attention.window = 2;
  c.sparse_attention.global_first = 1;
  c.sparse_attention.global_tokens = {20, 500};  // 500: past every sequence here, ignored
  c.sparse_attention.random_blocks = 1;
  c.sparse_attention.block_size = 4;
  c.sparse_attention.seed = 9;
  return c;
}

Tensor ids(std::int64_t B, std::int64_t T) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < B * T; ++i) v.push_back(3 + (i * 7 + i * i) % 28);
  return Tensor::from_ints(v, {B, T}, DType::i64);
}

}  // namespace

TEST(SparseAttentionModel, ConfigParsesRoundTripsAndRefusesBadPatterns) {
  const std::string ok = R"({"model_type": "transformer", "architecture": "encoder_only", "head": "classifier",
    "sparse_attention": {"window": 8, "global_tokens": [0, 5], "global_first": 2, "random_blocks": 3,
                         "block_size": 16, "seed": 4}})";
  const ModelConfig c = parse_model_config(ok, "test");
  EXPECT_EQ(c.sparse_attention.window, 8);
  EXPECT_EQ(c.sparse_attention.global_tokens, (std::vector<std::int64_t>{0, 5}));
  EXPECT_EQ(c.sparse_attention.global_first, 2);
  EXPECT_EQ(c.sparse_attention.random_blocks, 3);
  EXPECT_EQ(c.sparse_attention.block_size, 16);
  EXPECT_EQ(c.sparse_attention.seed, 4u);
  const ModelConfig back = parse_model_config(model_config_to_json(c), "round trip");
  EXPECT_EQ(back.sparse_attention.global_tokens, c.sparse_attention.global_tokens);
  EXPECT_EQ(back.sparse_attention.random_blocks, 3);
  EXPECT_EQ(model_config_to_json(parse_model_config(R"({"model_type": "transformer"})", "t")).find("sparse"),
            std::string::npos) << "off: not written";
  const auto error_of = [](const std::string& text) {
    try {
      (void)parse_model_config(text, "cfg.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(R"({"sparse_attention": {"global_first": 1}})").find("sparse_attention.window"), std::string::npos);
  EXPECT_NE(error_of(R"({"sparse_attention": {"window": 4, "stride": 2}})").find("sparse_attention.stride"), std::string::npos);
  EXPECT_NE(error_of(R"({"sparse_attention": {"window": 4, "block_size": 0}})").find("block_size"), std::string::npos);
  EXPECT_NE(error_of(R"({"sliding_window": 4, "sparse_attention": {"window": 4}})").find("sliding_window"), std::string::npos);
}

TEST(SparseAttentionModel, EncoderFusedEqualsPlainAndThePatternIsApplied) {
  ModelConfig c = tiny(Architecture::encoder_only);
  Model m = Model::create(c, 3);
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = ids(2, 37);
  in.valid_lens = Tensor::from_ints({37, 29}, {2}, DType::i64);
  const Tensor fused = m.forward(in).hidden;
  m.set_fused_attention(false);
  const Tensor plain = m.forward(in).hidden;
  test::expect_close(fused, plain, 1e-4, 1e-5, "fused vs plain");
  ModelConfig dense_cfg = c;
  dense_cfg.sparse_attention = SparseAttentionConfig{};
  Model dense = Model::from_parameters(dense_cfg, m.parameters());
  const Tensor d = dense.forward(in).hidden;
  EXPECT_GT(max(abs(sub(d, fused))).item(), 1e-3) << "the sparse pattern must change the output";
}

TEST(SparseAttentionModel, CachedDecodingEqualsFullRecomputation) {
  const ModelConfig c = tiny(Architecture::decoder_only);
  Model m = Model::create(c, 5);
  NoGradGuard ng;
  std::vector<std::int64_t> seq;
  for (std::int64_t i = 0; i < 26; ++i) seq.push_back(3 + (i * 5 + i * i) % 28);
  ModelInputs in;
  in.input_ids = Tensor::from_ints(seq, {1, 26});
  const Tensor full = squeeze(m.forward(in).logits, 0);  // (T, V)
  KVCache cache(c, 1, 32, 1, 16);
  std::vector<Tensor> parts;
  const std::vector<std::int64_t> first(seq.begin(), seq.begin() + 6);
  parts.push_back(squeeze(m.decode_cached(Tensor::from_ints(first, {1, 6}), {0}, cache, true), 0));
  for (std::size_t t = 6; t < seq.size(); ++t) parts.push_back(m.decode_cached(Tensor::from_ints({seq[t]}, {1, 1}), {0}, cache));
  test::expect_close(concat(parts, 0), full, 1e-4, 1e-5, "cached vs full");
}
