// Fine-tuning: init_from a trained model directory, LoRA with the base frozen, a new head on
// a loaded body, trainable patterns, the adapter saved beside the base, merge, and resume.
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

// A base LM trained for a few steps on the first 40k characters of tiny Shakespeare.
std::string train_base(const std::string& dir) {
  TrainConfig cfg = tiny_lm(dir);
  TrainOptions o;
  o.quiet = true;
  o.print_sample = false;
  o.out_dir = dir + "/base";
  run_training(cfg, o);
  return o.out_dir;
}

TrainConfig lora_config(const std::string& dir, const std::string& base, std::int64_t steps) {
  return parse_train_config(R"({"seed": 3, "init_from": ")" + base + R"(",
    "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj", "ffn.down_proj"]},
    "data": {"train": ")" + dir + R"(/text.txt", "block_size": 32},
    "optimizer": {"lr": 0.01}, "training": {"batch_size": 8, "max_steps": )" + std::to_string(steps) + R"(},
    "eval": {"every": 1000, "batches": 2, "log_every": 5}, "sample": {"tokens": 0}})",
                            "lora.json");
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(static_cast<double>(x[i]) - y[i]));
  return d;
}

Tensor logits(Model& m) {
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = Tensor::from_ints({5, 9, 2, 7, 11, 3, 8, 1}, {1, 8}, DType::i64);
  return m.forward(in).logits;
}

}  // namespace

TEST(FineTune, LoraTrainsOnlyTheFactorsSavesThemBesideTheBaseAndMerges) {
  const std::string dir = tmp_dir("lora_ft");
  const std::string base = train_base(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/lora";
  const TrainResult r = run_training(lora_config(dir, base, 24), o);
  ASSERT_EQ(r.losses.size(), 24u);
  EXPECT_LT(r.losses.back() + r.losses[22], r.losses[0] + r.losses[1]) << "the loss did not fall";

  // The output directory: the base weights untouched, the factors in PEFT's files.
  const auto base_w = load_safetensors(base + "/model.safetensors").tensors;
  const auto out_w = load_safetensors(o.out_dir + "/model.safetensors").tensors;
  ASSERT_EQ(base_w.size(), out_w.size());
  for (const auto& [name, t] : base_w) test::expect_bitwise_equal(out_w.at(name), t, "frozen " + name);
  ASSERT_TRUE(fs::exists(o.out_dir + "/adapter_config.json"));
  // 2 layers x (q, v, down) x (A, B)
  EXPECT_EQ(load_safetensors(o.out_dir + "/adapter_model.safetensors").tensors.size(), 12u);

  // Loading the directory attaches the adapter; the same adapter on the base gives the same
  // model; merging it gives the same logits without one.
  LoadedModel tuned = load_model_dir(o.out_dir);
  ASSERT_TRUE(tuned.model.has_lora());
  LoadedModel plus = load_model_dir(base);
  load_lora_adapter(o.out_dir, plus.model);
  const Tensor adapted = logits(tuned.model);
  test::expect_bitwise_equal(logits(plus.model), adapted, "base + --adapter");
  LoadedModel plain = load_model_dir(base);
  EXPECT_GT(max_abs_diff(logits(plain.model), adapted), 1e-3) << "training the factors changed nothing";
  tuned.model.merge_lora();
  test::expect_close(logits(tuned.model), adapted, 1e-5, 1e-5, "merged");
  fs::remove_all(dir);
}

TEST(FineTune, LoraRunResumesToTheSameLosses) {
  const std::string dir = tmp_dir("lora_resume");
  const std::string base = train_base(dir);
  TrainOptions full;
  full.quiet = true;
  full.out_dir = dir + "/full";
  const TrainResult whole = run_training(lora_config(dir, base, 10), full);
  TrainOptions part = full;
  part.out_dir = dir + "/part";
  part.on_step = [](std::int64_t step, double) { return step < 4; };
  run_training(lora_config(dir, base, 10), part);
  TrainOptions rest = part;
  rest.on_step = nullptr;
  rest.resume_dir = part.out_dir;
  const TrainResult second = run_training(lora_config(dir, base, 10), rest);
  ASSERT_EQ(second.losses.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(second.losses[i], whole.losses[4 + i]) << "step " << 5 + i;
  fs::remove_all(dir);
}

TEST(FineTune, NewClassifierHeadOnALoadedBodyWithTrainablePatterns) {
  const std::string dir = tmp_dir("head_ft");
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string root = src ? src : ".";
  // A body: the SMS encoder config trained for 3 steps (any encoder directory would do).
  TrainConfig body_cfg = load_train_config(root + "/configs/sms-spam-bert.json");
  body_cfg.train_file = root + "/data/sms-spam.tsv";
  body_cfg.max_steps = 3;
  body_cfg.eval_every = 1000;
  TrainOptions bo;
  bo.quiet = true;
  bo.out_dir = dir + "/body";
  run_training(body_cfg, bo);

  // Three labels instead of two: the classifier is new, the body is loaded; only the top
  // layer and the head train.
  std::string tsv = "label\ttext\n";
  const std::vector<std::string> lines = {"a\tgood morning to you", "b\tcall now to win a prize", "c\tsee you at lunch"};
  for (int i = 0; i < 40; ++i) tsv += lines[static_cast<std::size_t>(i % 3)] + "\n";
  write_file_atomic(dir + "/three.tsv", tsv);
  const TrainConfig cfg = parse_train_config(R"({"task": "classifier", "seed": 2, "init_from": ")" + bo.out_dir + R"(",
    "model": {"num_labels": 3},
    "trainable": ["classifier.*", "*.layers.1.*"],
    "data": {"train": ")" + dir + R"(/three.tsv", "header": true, "max_length": 16},
    "optimizer": {"lr": 0.003}, "training": {"batch_size": 8, "max_steps": 12},
    "eval": {"every": 1000}, "sample": {"tokens": 0}})", "head.json");
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/three";
  const TrainResult r = run_training(cfg, o);
  EXPECT_LT(r.losses.back(), r.losses.front());
  const auto before = load_safetensors(bo.out_dir + "/model.safetensors").tensors;
  const auto after = load_safetensors(o.out_dir + "/model.safetensors").tensors;
  EXPECT_EQ(after.at("classifier.weight").shape(), (Shape{3, before.at("classifier.weight").size(1)}));
  for (const auto& [name, t] : after) {
    const bool trains = name.rfind("classifier.", 0) == 0 || name.find(".layers.1.") != std::string::npos;
    if (!trains && before.count(name)) {
      test::expect_bitwise_equal(t, before.at(name), "frozen " + name);
    } else if (trains && name.rfind("classifier.", 0) != 0) {
      EXPECT_GT(max_abs_diff(t, before.at(name)), 0.0) << name << " did not train";
    }
  }
  fs::remove_all(dir);
}

TEST(FineTune, ConfigErrors) {
  EXPECT_NE(expect_error([] { parse_train_config(R"({"data": {"train": "x"}})", "c.json"); }).find("init_from"),
            std::string::npos);
  // A tokenizer beside init_from is a new vocabulary (adapting to a new script), not an error.
  EXPECT_TRUE(parse_train_config(R"({"init_from": "d", "tokenizer": {"kind": "char"}, "data": {"train": "x"}})",
                                 "c.json").init_from_new_tokenizer);
  EXPECT_NE(expect_error([] {
              parse_train_config(R"({"init_from": "d", "lora": {"r": 4}, "data": {"train": "x"}})", "c.json");
            }).find("c.json.lora.target_modules"),
            std::string::npos);
}
