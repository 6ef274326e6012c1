// The seeds' remaining regularisers: stochastic depth (drop path over whole residual branches,
// rate rising linearly with depth) and annealed gradient noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "nn/modules.h"
#include "support/test_support.h"
#include "tfm/tfm.h"
#include "support/train_helpers.h"

using namespace tfm;

namespace {

ModelConfig deep_config(double stochastic_depth) {
  ModelConfig c;
  c.architecture = Architecture::decoder_only;
  c.vocab_size = 29; c.d_model = 16; c.n_heads = 2; c.n_layers = 4; c.d_ff = 32; c.max_positions = 16;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  c.stochastic_depth = stochastic_depth;
  return c;
}

ModelInputs ids(std::int64_t B, std::int64_t T) {
  ModelInputs in;
  std::vector<std::int64_t> v;
  for (std::int64_t i = 0; i < B * T; ++i) v.push_back((i % T * 7 + 3) % 29);  // every row the same
  in.input_ids = Tensor::from_ints(v, {B, T}, DType::i64);
  return in;
}

}  // namespace

TEST(DropPath, WholeSequencesKeptScaledOrDroppedAtTheRate) {
  const std::int64_t B = 4000, T = 3, C = 5;
  const Tensor x = Tensor::randn({B, T, C}, 3).requires_grad_();
  nn::DropoutStream rng(true, 11);
  const double rate = 0.3;
  const Tensor y = nn::drop_path(x, rate, rng);
  const auto xv = x.to_floats(), yv = y.to_floats();
  std::int64_t dropped = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::size_t row = static_cast<std::size_t>(b * T * C);
    const bool drop = yv[row] == 0.0f;
    dropped += drop;
    for (std::size_t k = row; k < row + static_cast<std::size_t>(T * C); ++k) {
      if (drop) ASSERT_EQ(yv[k], 0.0f) << "sequence " << b << " partly dropped";
      else ASSERT_FLOAT_EQ(yv[k], xv[k] / 0.7f) << "sequence " << b;
    }
  }
  // Binomial(4000, 0.3): standard deviation 0.0072 of the fraction.
  EXPECT_NEAR(static_cast<double>(dropped) / B, rate, 0.03);
  // The gradient is the mask: 0 or 1 / (1 - rate) for every element of a sequence.
  backward(sum(y));
  const auto g = x.grad().to_floats();
  for (std::int64_t b = 0; b < B; ++b) {
    const std::size_t row = static_cast<std::size_t>(b * T * C);
    EXPECT_FLOAT_EQ(g[row], yv[row] == 0.0f ? 0.0f : 1.0f / 0.7f);
  }
  // Outside training, and at rate 0, it is the identity (the same tensor).
  nn::DropoutStream eval(false, 11);
  EXPECT_EQ(nn::drop_path(x, rate, eval).data<float>(), x.data<float>());
  EXPECT_EQ(nn::drop_path(x, 0.0, rng).data<float>(), x.data<float>());
}

TEST(StochasticDepth, IdentityAtInferenceAndRandomPerSequenceInTraining) {
  Model plain = Model::create(deep_config(0.0), 1);
  Model sd = Model::create(deep_config(0.5), 1);  // the same weights: the rate is not a parameter
  const ModelInputs in = ids(64, 8);
  NoGradGuard ng;
  test::expect_bitwise_equal(sd.forward(in).logits, plain.forward(in).logits, "inference with stochastic depth");
  plain.set_training(true);
  sd.set_training(true);
  plain.set_dropout_seed(5, 0);
  sd.set_dropout_seed(5, 0);
  const auto a = plain.forward(in).logits.to_floats(), b = sd.forward(in).logits.to_floats();
  // Every sequence holds the same tokens. With every dropout rate 0, plain training gives 64
  // equal outputs; with stochastic depth each sequence draws its own masks for the six branches
  // of layers 1..3 (layer 0's rate is 0), so the outputs split into many distinct groups.
  const std::size_t per_seq = a.size() / 64;
  std::set<std::vector<float>> plain_outputs, sd_outputs;
  for (std::size_t s = 0; s < 64; ++s) {
    plain_outputs.insert(std::vector<float>(a.begin() + static_cast<std::ptrdiff_t>(s * per_seq),
                                            a.begin() + static_cast<std::ptrdiff_t>((s + 1) * per_seq)));
    sd_outputs.insert(std::vector<float>(b.begin() + static_cast<std::ptrdiff_t>(s * per_seq),
                                         b.begin() + static_cast<std::ptrdiff_t>((s + 1) * per_seq)));
  }
  EXPECT_EQ(plain_outputs.size(), 1u);
  EXPECT_GT(sd_outputs.size(), 16u);
  // Reproducible from (seed, step); another step draws other masks.
  sd.set_dropout_seed(5, 0);
  test::expect_bitwise_equal(sd.forward(in).logits, Tensor::from_floats(b, {64, 8, 29}), "same seed and step");
  sd.set_dropout_seed(5, 1);
  EXPECT_NE(sd.forward(in).logits.to_floats(), b);
}

TEST(StochasticDepth, ConfigKeyRoundTripsAndIsRangeChecked) {
  const ModelConfig c = parse_model_config(R"({"model_type": "gpt2", "n_layer": 2, "stochastic_depth": 0.1})", "c.json");
  EXPECT_DOUBLE_EQ(c.stochastic_depth, 0.1);
  EXPECT_DOUBLE_EQ(parse_model_config(model_config_to_json(c), "again").stochastic_depth, 0.1);
  const std::string err = train_test::expect_error(
      [] { parse_model_config(R"({"model_type": "transformer", "stochastic_depth": 1.5})", "c.json"); });
  EXPECT_NE(err.find("stochastic_depth"), std::string::npos) << err;
}

TEST(GradientNoise, AnnealedGaussianReproducibleFromSeedAndStep) {
  std::map<std::string, Tensor> params;
  params["a"] = Tensor::zeros({300, 500}).requires_grad_();
  params["b"] = Tensor::zeros({7}).requires_grad_();   // no gradient: left alone
  params["c"] = Tensor::zeros({1000}).requires_grad_();
  const auto noise = [&](std::int64_t step, std::uint64_t seed) {
    params["a"].zero_grad();
    params["c"].zero_grad();
    autograd::accumulate(params["a"], Tensor::zeros({300, 500}));
    autograd::accumulate(params["c"], Tensor::zeros({1000}));
    const double sigma = add_gradient_noise(params, 0.3, 0.55, step, seed);
    return std::make_pair(sigma, params["a"].grad().to_floats());
  };
  const auto [s9, g9] = noise(9, 42);
  EXPECT_DOUBLE_EQ(s9, std::sqrt(0.3 / std::pow(10.0, 0.55)));
  double mean = 0, sq = 0;
  for (float v : g9) mean += v;
  mean /= static_cast<double>(g9.size());
  for (float v : g9) sq += (v - mean) * (v - mean);
  const double sd = std::sqrt(sq / static_cast<double>(g9.size()));
  EXPECT_NEAR(sd / s9, 1.0, 0.01);     // 150,000 draws: the sample std is within 0.2% at 1 sigma
  EXPECT_NEAR(mean / s9, 0.0, 0.01);
  EXPECT_FALSE(params["b"].grad().defined());
  EXPECT_EQ(noise(9, 42).second, g9);  // the same (seed, step): the same noise
  EXPECT_NE(noise(10, 42).second, g9);
  EXPECT_NE(noise(9, 43).second, g9);
  EXPECT_LT(noise(999, 42).first, s9 / 3);  // annealed: (1000 / 10)^(0.55 / 2) = 3.55x smaller
  EXPECT_EQ(add_gradient_noise(params, 0.0, 0.55, 3, 1), 0.0);
}

TEST(Regularisers, ShortRunWithBothLowersTheLoss) {
  const std::string dir = train_test::tmp_dir("regularisers");
  TrainConfig cfg = train_test::tiny_lm(dir);
  cfg = parse_train_config(
      std::string(R"({"seed": 7, "model": {"architecture": "decoder_only", "d_model": 32, "n_heads": 2,
        "n_layers": 3, "d_ff": 64, "max_positions": 32, "stochastic_depth": 0.2},
        "data": {"train": ")") + dir + R"(/text.txt", "block_size": 32},
        "optimizer": {"lr": 0.005}, "training": {"batch_size": 8, "max_steps": 40,
        "gradient_noise": 0.01, "gradient_noise_gamma": 0.55},
        "eval": {"every": 40, "batches": 2, "log_every": 10}, "sample": {"tokens": 0}})",
      "regularisers.json");
  EXPECT_DOUBLE_EQ(cfg.gradient_noise, 0.01);
  TrainOptions opt;
  opt.out_dir = dir + "/run";
  opt.quiet = true;
  const TrainResult r = run_training(cfg, opt);
  ASSERT_EQ(r.losses.size(), 40u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.losses[static_cast<std::size_t>(i)], last += r.losses[r.losses.size() - 1 - static_cast<std::size_t>(i)];
  EXPECT_LT(last, first * 0.85) << "first five " << first / 5 << ", last five " << last / 5;
  std::filesystem::remove_all(dir);
}

// The promise the StochasticDepth test leans on, stated for itself: in training mode a sequence's
// outputs are the same bits whatever batch it is in — 3 sequences (24 rows) or 64 (512 rows) —
// on every ISA (oneDNN's AVX2 sgemm broke it: rows in its M-tail kernels rounded differently).
TEST(TrainingRows, ASequenceGivesTheSameBitsInABatchOf3AndOf64OnEveryIsa) {
  const Isa saved = active_isa();
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu_best_isa())) continue;
    set_active_isa(isa);
    Model m = Model::create(deep_config(0.0), 1);
    m.set_training(true);
    m.set_dropout_seed(5, 0);
    NoGradGuard ng;
    const auto small = m.forward(ids(3, 8)).logits.to_floats(), big = m.forward(ids(64, 8)).logits.to_floats();
    const std::size_t per_seq = small.size() / 3;
    for (std::size_t s = 0; s < 64; ++s)
      ASSERT_EQ(0, std::memcmp(small.data(), big.data() + s * per_seq, per_seq * sizeof(float)))
          << isa_name(isa) << ": sequence " << s << " of 64 differs from the batch of 3";
  }
  set_active_isa(saved);
}
