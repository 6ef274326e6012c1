// LoRA against PEFT's definition (tools/reference/ref_lora.py): an encoder-decoder whose
// q/v projections, cross-attention output and FFN down projections carry factors. Logits,
// every gradient (base weights and factors) of sum(logits * w), the PEFT adapter files
// round-tripped, and the merged model's logits, all at fp32 tolerance.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tfm/adapter.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

struct LoraFixture {
  SafetensorsFile f;
  ModelConfig cfg;
  LoraConfig lora;
  std::map<std::string, Tensor> params, factors;
  ModelInputs in;
};

LoraFixture load() {
  LoraFixture x;
  x.f = test::load_fixture("lora_engine");
  x.cfg = parse_model_config(x.f.metadata.at("config"), "lora_engine");
  x.lora.r = std::stoll(x.f.metadata.at("r"));
  x.lora.alpha = std::stod(x.f.metadata.at("alpha"));
  x.lora.target_modules = nlohmann::json::parse(x.f.metadata.at("targets")).get<std::vector<std::string>>();
  for (const auto& [k, v] : x.f.tensors) {
    if (k.rfind("param.", 0) == 0) x.params[k.substr(6)] = v.clone().requires_grad_();
    if (k.rfind("lora.", 0) == 0) x.factors[k.substr(5)] = v.clone().requires_grad_();
  }
  x.in.input_ids = test::fixture_tensor(x.f, "input_ids");
  x.in.valid_lens = test::fixture_tensor(x.f, "valid_lens");
  x.in.decoder_input_ids = test::fixture_tensor(x.f, "decoder_input_ids");
  x.in.decoder_valid_lens = test::fixture_tensor(x.f, "decoder_valid_lens");
  return x;
}

Tensor logits(Model& m, const ModelInputs& in) {
  NoGradGuard ng;
  return m.forward(in).logits;
}

}  // namespace

TEST(ParityLora, ForwardAndEveryGradientMatchPeft) {
  LoraFixture x = load();
  Model m = Model::from_parameters(x.cfg, x.params);
  m.attach_lora(x.lora, x.factors);
  EXPECT_EQ(m.lora_parameters().size(), x.factors.size());
  const ModelOutputs out = m.forward(x.in);
  test::expect_close(out.logits, test::fixture_tensor(x.f, "logits"), 1e-4, 1e-5, "lora logits");
  backward(out.logits, test::fixture_tensor(x.f, "w"));
  for (const auto& [name, p] : m.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    test::expect_close(p.grad(), test::fixture_tensor(x.f, "grad." + name), 1e-4, 2e-5, "grad " + name);
  }
}

TEST(ParityLora, AdapterFilesRoundTripAndMergeEqualsPeftMerge) {
  LoraFixture x = load();
  Model m = Model::from_parameters(x.cfg, x.params);
  m.attach_lora(x.lora, x.factors);
  const Tensor adapted = logits(m, x.in);

  const std::string dir = (std::filesystem::temp_directory_path() / ("tfm_lora_" + std::to_string(::getpid()))).string();
  save_lora_adapter(dir, m, "base");
  const auto j = nlohmann::json::parse(read_file(dir + "/adapter_config.json"));
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("r"), x.lora.r);
  const auto names = load_safetensors(dir + "/adapter_model.safetensors").tensors;
  EXPECT_EQ(names.size(), x.factors.size());
  EXPECT_TRUE(names.count("base_model.model.decoder.layers.1.cross_attn.o_proj.lora_B.weight"));

  // A fresh base model with the adapter loaded computes exactly what the first one did.
  Model again = Model::from_parameters(x.cfg, x.params);
  load_lora_adapter(dir, again);
  test::expect_bitwise_equal(logits(again, x.in), adapted, "reloaded adapter");
  std::filesystem::remove_all(dir);

  // Merged: W + (alpha/r) B A, against PyTorch's float64 merge.
  again.merge_lora();
  EXPECT_FALSE(again.has_lora());
  EXPECT_TRUE(again.lora_parameters().empty());
  EXPECT_EQ(again.parameters().size(), x.params.size());
  test::expect_close(logits(again, x.in), test::fixture_tensor(x.f, "merged_logits"), 1e-4, 1e-5, "merged logits");
}
