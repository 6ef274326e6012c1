// LoRA on a Model: which modules a target list selects, PEFT's initialisation (the output is
// unchanged until B moves), merging in GPT-2's transposed Conv1D layout, dropout on the LoRA
// branch only in training, and the errors of bad factors and adapter files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "support/test_support.h"
#include "tfm/adapter.h"
#include "tfm/safetensors.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig tiny_gpt2() {
  ModelConfig c = model_preset("gpt2");
  c.vocab_size = 31; c.d_model = 16; c.n_heads = 2; c.n_layers = 2; c.d_ff = 32; c.max_positions = 16;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  return c;
}

ModelInputs ids() {
  ModelInputs in;
  in.input_ids = Tensor::from_ints({3, 7, 1, 9, 4, 4, 2, 8, 5, 6}, {2, 5}, DType::i64);
  return in;
}

Tensor logits(Model& m) {
  NoGradGuard ng;
  return m.forward(ids()).logits;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

LoraConfig on(std::vector<std::string> targets, std::int64_t r = 4) {
  LoraConfig c;
  c.r = r;
  c.alpha = 8;
  c.target_modules = std::move(targets);
  return c;
}

}  // namespace

TEST(Lora, TargetRuleMatchesWholeDottedSuffixesAndGlobs) {
  const LoraConfig c = on({"c_attn", "*.h.1.mlp.*"});
  EXPECT_TRUE(lora_targets(c, "transformer.h.0.attn.c_attn"));
  EXPECT_TRUE(lora_targets(c, "c_attn"));
  EXPECT_FALSE(lora_targets(c, "transformer.h.0.attn.xc_attn"));  // not at a dot boundary
  EXPECT_TRUE(lora_targets(c, "transformer.h.1.mlp.c_fc"));
  EXPECT_FALSE(lora_targets(c, "transformer.h.0.mlp.c_fc"));
}

TEST(Lora, FreshFactorsLeaveTheOutputAndMergeIsTheIdentityUntilTrained) {
  Model m = Model::create(tiny_gpt2(), 3);
  const Tensor before = logits(m);
  m.add_lora(on({"c_attn", "c_proj"}), 9);
  // 2 layers x (attn.c_attn, attn.c_proj, mlp.c_proj): "c_proj" matches both c_proj modules.
  EXPECT_EQ(m.lora_parameters().size(), 2u * 2 * 3);
  const Tensor a = m.lora_parameters().at("transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(a.shape(), (Shape{4, 16}));  // (r, in) although c_attn's weight is (in, out)
  EXPECT_EQ(m.lora_parameters().at("transformer.h.0.attn.c_attn.lora_B.weight").shape(), (Shape{48, 4}));
  float amax = 0;
  for (float v : a.to_floats()) amax = std::max(amax, std::abs(v));
  EXPECT_GT(amax, 0.05f);
  EXPECT_LE(amax, 0.25f);  // Kaiming-uniform bound 1/sqrt(16)
  test::expect_bitwise_equal(logits(m), before, "B = 0: the adapted model computes the base model");
}

TEST(Lora, MergeInGpt2ConvLayoutEqualsTheAdaptedModel) {
  Model m = Model::create(tiny_gpt2(), 3);
  m.add_lora(on({"c_attn", "mlp.c_fc"}), 9);
  for (auto& [name, t] : m.lora_parameters())
    if (name.find("lora_B") != std::string::npos) t.copy_(test::random_tensor(t.shape(), 17, -0.5f, 0.5f));
  const Tensor adapted = logits(m);
  m.merge_lora();
  EXPECT_FALSE(m.has_lora());
  test::expect_close(logits(m), adapted, 1e-5, 1e-5, "merged vs adapted (transposed Conv1D weights)");
}

TEST(Lora, DropoutOnTheBranchOnlyInTraining) {
  ModelConfig c = tiny_gpt2();
  Model m = Model::create(c, 3);
  LoraConfig l = on({"c_attn"});
  l.dropout = 0.5;
  m.add_lora(l, 9);
  for (auto& [name, t] : m.lora_parameters())
    if (name.find("lora_B") != std::string::npos) t.copy_(test::random_tensor(t.shape(), 17, -0.5f, 0.5f));
  const Tensor eval = logits(m);
  m.set_training(true);  // every other dropout rate is 0: only the LoRA branch can differ
  m.set_dropout_seed(1, 0);
  const Tensor train = logits(m);
  EXPECT_NE(train.to_floats(), eval.to_floats());
  m.set_dropout_seed(1, 0);
  test::expect_bitwise_equal(logits(m), train, "same seed and step");
}

TEST(Lora, BadFactorsAndAdapterFilesAreClearErrors) {
  Model m = Model::create(tiny_gpt2(), 3);
  EXPECT_NE(error_of([&] { m.add_lora(on({"q_proj"}), 1); }).find("no linear module matches"), std::string::npos);
  EXPECT_NE(error_of([&] { m.add_lora(on({"c_attn"}, 0), 1); }).find("r must be >= 1"), std::string::npos);
  std::map<std::string, Tensor> bad{{"transformer.h.0.attn.c_attn.lora_A.weight", Tensor::zeros({4, 15})},
                                    {"transformer.h.0.attn.c_attn.lora_B.weight", Tensor::zeros({48, 4})}};
  EXPECT_NE(error_of([&] { m.attach_lora(on({"c_attn"}), bad); }).find("has shape (4,15)"), std::string::npos);
  bad.erase("transformer.h.0.attn.c_attn.lora_B.weight");
  bad["transformer.h.0.attn.c_attn.lora_A.weight"] = Tensor::zeros({4, 16});
  EXPECT_NE(error_of([&] { m.attach_lora(on({"c_attn"}), bad); }).find("no lora_B partner"), std::string::npos);
  std::map<std::string, Tensor> unknown{{"transformer.h.0.attn.nope.lora_A.weight", Tensor::zeros({4, 16})}};
  EXPECT_NE(error_of([&] { m.attach_lora(on({"c_attn"}), unknown); }).find("no linear module 'transformer.h.0.attn.nope'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { m.merge_lora(); }).find("no LoRA factors"), std::string::npos);

  const std::string dir = (std::filesystem::temp_directory_path() / ("tfm_lora_u" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  EXPECT_NE(error_of([&] { load_lora_adapter(dir, m); }).find("no adapter_config.json"), std::string::npos);
  write_file_atomic(dir + "/adapter_config.json", R"({"peft_type": "IA3", "r": 4, "target_modules": ["c_attn"]})");
  EXPECT_NE(error_of([&] { load_lora_adapter(dir, m); }).find("peft_type 'IA3' is not supported"), std::string::npos);
  write_file_atomic(dir + "/adapter_config.json", R"({"peft_type": "LORA", "r": 4, "target_modules": ["c_attn"]})");
  EXPECT_NE(error_of([&] { load_lora_adapter(dir, m); }).find("adapter_model.bin is pickle"), std::string::npos);
  write_file_atomic(dir + "/adapter_config.json", R"({"peft_type": "LORA", "r": "four"})");
  EXPECT_NE(error_of([&] { load_lora_adapter(dir, m); }).find("key 'r' has the wrong type: \"four\""), std::string::npos);
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(m.has_lora());  // nothing half-attached by the failures
}
