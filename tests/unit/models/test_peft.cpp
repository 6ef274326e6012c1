// Bottleneck adapters and prefix tuning from a training config: only the adapter trains (the
// base stays bit-identical), the loss falls, the adapter is saved beside the base in PEFT's
// layout and attached again by load_model_dir or --adapter on the base; fresh adapters leave
// the output unchanged; bad configs and files are one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/test_support.h"
#include "tfm/adapter.h"
#include "tfm/tfm.h"
#include "support/train_helpers.h"

using namespace tfm;
using namespace tfm::train_test;
namespace fs = std::filesystem;

namespace {

std::string train_base(const std::string& dir) {
  TrainConfig cfg = tiny_lm(dir);
  cfg.max_steps = 4;
  TrainOptions o;
  o.quiet = true;
  o.print_sample = false;
  o.out_dir = dir + "/base";
  run_training(cfg, o);
  return o.out_dir;
}

TrainConfig adapter_config(const std::string& dir, const std::string& base, const std::string& adapter) {
  return parse_train_config(R"({"seed": 3, "init_from": ")" + base + R"(", "adapter": )" + adapter + R"(,
    "data": {"train": ")" + dir + R"(/text.txt", "block_size": 32},
    "optimizer": {"lr": 0.01}, "training": {"batch_size": 8, "max_steps": 16},
    "eval": {"every": 1000, "batches": 2, "log_every": 4}, "sample": {"prompt": "RO", "tokens": 8}})",
                            "adapter.json");
}

Tensor logits(Model& m) {
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = Tensor::from_ints({5, 9, 2, 7, 11, 3, 8, 1}, {1, 8}, DType::i64);
  return m.forward(in).logits;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(static_cast<double>(x[i]) - y[i]));
  return d;
}

// Trains `adapter` on the base and checks what every adapter kind must do.
void check_adapter_run(const std::string& dir, const std::string& base, const std::string& adapter,
                       const char* peft_type, std::size_t tensors) {
  TrainOptions o;
  o.quiet = true;
  o.print_sample = true;  // generates through the KV cache with the adapter
  o.out_dir = dir + "/" + peft_type;
  const TrainResult r = run_training(adapter_config(dir, base, adapter), o);
  ASSERT_EQ(r.losses.size(), 16u);
  EXPECT_LT(r.losses[14] + r.losses[15], r.losses[0] + r.losses[1]) << peft_type << ": the loss did not fall";

  const auto base_w = load_safetensors(base + "/model.safetensors").tensors;
  const auto out_w = load_safetensors(o.out_dir + "/model.safetensors").tensors;
  ASSERT_EQ(base_w.size(), out_w.size());
  for (const auto& [name, t] : base_w) test::expect_bitwise_equal(out_w.at(name), t, "frozen " + name);
  EXPECT_EQ(read_adapter_type(o.out_dir), peft_type);
  EXPECT_EQ(load_safetensors(o.out_dir + "/adapter_model.safetensors").tensors.size(), tensors);

  LoadedModel tuned = load_model_dir(o.out_dir);
  LoadedModel plus = load_model_dir(base);
  load_adapter(o.out_dir, plus.model);
  const Tensor adapted = logits(tuned.model);
  test::expect_bitwise_equal(logits(plus.model), adapted, "base + --adapter");
  LoadedModel plain = load_model_dir(base);
  EXPECT_GT(max_abs_diff(logits(plain.model), adapted), 1e-3) << "training the adapter changed nothing";
}

}  // namespace

TEST(Peft, BottleneckAndPrefixRunsTrainOnlyTheAdapterAndReload) {
  const std::string dir = tmp_dir("peft_ft");
  const std::string base = train_base(dir);
  // 2 layers x 2 places x 4 tensors.
  check_adapter_run(dir, base, R"({"type": "bottleneck", "placement": "houlsby", "bottleneck_size": 4})", "BOTTLENECK",
                    16);
  // The final table plus the reparameterisation kept for resuming (embedding + 2 Linear).
  check_adapter_run(dir, base, R"({"type": "prefix_tuning", "num_virtual_tokens": 4, "prefix_projection": true,
                                   "encoder_hidden_size": 16})",
                    "PREFIX_TUNING", 6);
  fs::remove_all(dir);
}

TEST(Peft, FreshAdaptersStartAtTheBaseModel) {
  ModelConfig c = parse_model_config(R"({"architecture": "decoder_only", "vocab_size": 16, "d_model": 16,
    "n_heads": 2, "n_layers": 2, "d_ff": 32, "max_positions": 16})", "fresh");
  Model m = Model::create(c, 1);
  const Tensor before = logits(m);
  for (const auto p : {BottleneckPlacement::houlsby, BottleneckPlacement::pfeiffer}) {
    Model a = Model::create(c, 1);
    BottleneckConfig b;
    b.placement = p;
    b.reduction_factor = 4;
    a.add_bottleneck(b, 9);
    EXPECT_EQ(a.adapter_parameters().size(), p == BottleneckPlacement::houlsby ? 16u : 8u);
    test::expect_bitwise_equal(logits(a), before, "identity init");
  }
  Model pm = Model::create(c, 1);
  PrefixConfig pc;
  pc.num_virtual_tokens = 3;
  pm.add_prefix(pc, 9);
  EXPECT_EQ(pm.prefix_table().shape(), (Shape{3, 2 * 2 * 16}));
  EXPECT_GT(max_abs_diff(logits(pm), before), 1e-4) << "a random prefix must change attention";
}

TEST(Peft, ConfigAndFileErrorsAreOneLine) {
  const auto cfg_error = [](const std::string& adapter) {
    return expect_error([&] {
      parse_train_config(R"({"model": {"architecture": "decoder_only"}, "adapter": )" + adapter +
                             R"(, "data": {"train": "x.txt"}})",
                         "a.json");
    });
  };
  EXPECT_NE(cfg_error(R"({"type": "ia3"})").find("bottleneck, prefix_tuning"), std::string::npos);
  EXPECT_NE(cfg_error(R"({"type": "bottleneck", "placement": "middle"})").find("houlsby"), std::string::npos);
  EXPECT_NE(cfg_error(R"({"type": "prefix_tuning", "num_tokens": 3})").find("num_tokens"), std::string::npos);
  ModelConfig c = parse_model_config(R"({"architecture": "decoder_only", "vocab_size": 16, "d_model": 16,
    "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_positions": 16, "sliding_window": 4})", "w");
  Model m = Model::create(c, 1);
  EXPECT_NE(expect_error([&] { m.add_prefix(PrefixConfig{}, 1); }).find("sliding_window"), std::string::npos);
  BottleneckConfig b;
  m.add_bottleneck(b, 1);
  EXPECT_NE(expect_error([&] { m.add_prefix(PrefixConfig{}, 1); }).find("one adapter at a time"), std::string::npos);
  std::map<std::string, Tensor> bad{{"decoder.layers.0.output_adapter.adapter_up.weight", Tensor::zeros({3, 3})}};
  Model fresh = Model::create(c, 1);
  EXPECT_NE(expect_error([&] { fresh.attach_bottleneck(b, bad); }).find("missing tensor"), std::string::npos);
}

// Activation checkpointing recomputes each layer with the prefix it was given (a non-leaf
// when the reparameterisation produces it): the gradients equal those without it.
TEST(Peft, CheckpointedLayersGiveTheSameAdapterGradients) {
  ModelConfig c = parse_model_config(R"({"architecture": "decoder_only", "vocab_size": 16, "d_model": 16,
    "n_heads": 2, "n_layers": 2, "d_ff": 32, "max_positions": 16})", "ckpt");
  std::map<std::string, Tensor> grads[2];
  for (int on = 0; on < 2; ++on) {
    Model m = Model::create(c, 1);
    PrefixConfig pc;
    pc.num_virtual_tokens = 3;
    pc.prefix_projection = true;
    pc.encoder_hidden_size = 8;
    m.add_prefix(pc, 5);
    for (auto& [n, p] : m.parameters()) p.requires_grad_(true);
    m.set_checkpoint_activations(on == 1);
    ModelInputs in;
    in.input_ids = Tensor::from_ints({5, 9, 2, 7, 11, 3}, {1, 6}, DType::i64);
    backward(sum(m.forward(in).logits));
    for (auto& [n, p] : m.parameters()) grads[on][n] = p.grad();
  }
  for (const auto& [n, g] : grads[0]) {
    ASSERT_TRUE(grads[1][n].defined()) << n;
    test::expect_close(grads[1][n], g, 1e-5, 1e-6, "checkpointed grad " + n);
  }
}
