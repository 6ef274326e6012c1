// ModelConfig: presets (parameter counts of the published models), HF key sets, errors.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/model_config.h"

using namespace tfm;

namespace {
std::int64_t count(const ModelConfig& c) {
  std::int64_t n = 0;
  for (const auto& p : parameter_specs(c)) n += shape_numel(p.shape);
  return n;
}
std::string error_of(const std::string& json) {
  try {
    parse_model_config(json, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(ModelConfig, PresetParameterCountsMatchThePublishedModels) {
  EXPECT_EQ(count(model_preset("gpt2")), 124439808);   // GPT-2 small, tied head
  EXPECT_EQ(count(model_preset("llama")), 6738415616);  // Llama-2-7B
  ModelConfig bert = model_preset("bert");
  bert.head = HeadKind::none;
  EXPECT_EQ(count(bert), 109482240 - 768 * 768 - 768);  // bert-base-uncased without the pooler
  EXPECT_EQ(count(model_preset("t5")), 222903552);      // t5-base
  // Vaswani base: the paper's "65M" with a 37000-token shared vocabulary.
  const std::int64_t v = count(model_preset("vaswani"));
  EXPECT_GT(v, 60000000);
  EXPECT_LT(v, 66000000);
}

TEST(ModelConfig, HuggingFaceKeysParse) {
  const ModelConfig c = parse_model_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":172,
      "num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,"vocab_size":100,
      "rms_norm_eps":1e-6,"rope_theta":500000.0,"tie_word_embeddings":false,"torch_dtype":"float32",
      "architectures":["LlamaForCausalLM"],"rope_scaling":null,"hidden_act":"silu"})",
                                           "t");
  EXPECT_EQ(c.kv_heads(), 2);
  EXPECT_EQ(c.dim_head(), 8);
  EXPECT_EQ(c.activation, FfnActivation::swiglu);
  EXPECT_EQ(c.norm, NormKind::rms_norm);
  EXPECT_EQ(c.position, PositionKind::rope);
  EXPECT_DOUBLE_EQ(c.rope_base, 500000.0);
  const ModelConfig g = parse_model_config(R"({"model_type":"gpt2","n_embd":32,"n_layer":1,"n_head":4,
      "n_positions":64,"vocab_size":50,"n_inner":null,"activation_function":"gelu_new"})", "t");
  EXPECT_EQ(g.d_ff, 128);
  EXPECT_EQ(g.activation, FfnActivation::gelu_tanh);
  const ModelConfig b = parse_model_config(R"({"model_type":"bert","architectures":["BertForMaskedLM"],
      "hidden_size":32,"num_hidden_layers":1,"num_attention_heads":4,"intermediate_size":64,"vocab_size":99})", "t");
  EXPECT_EQ(b.head, HeadKind::masked_lm);
  EXPECT_EQ(b.norm_placement, NormPlacement::post);
}

TEST(ModelConfig, PresetWithOverrides) {
  const ModelConfig c = parse_model_config(R"({"preset":"vaswani","d_model":64,"n_heads":4,"n_layers":2,
      "norm_placement":"pre","vocab_size":1000})", "t");
  EXPECT_EQ(c.architecture, Architecture::encoder_decoder);
  EXPECT_EQ(c.norm_placement, NormPlacement::pre);
  EXPECT_EQ(c.position, PositionKind::sinusoidal);
  EXPECT_TRUE(c.scale_embeddings);
}

TEST(ModelConfig, RoundTripsThroughJson) {
  for (const auto& name : model_preset_names()) {
    const ModelConfig c = model_preset(name);
    const ModelConfig r = parse_model_config(model_config_to_json(c), name);
    EXPECT_EQ(model_config_to_json(r), model_config_to_json(c)) << name;
    EXPECT_EQ(count(r), count(c)) << name;
  }
}

TEST(ModelConfig, ErrorsNameTheKeyAndTheAllowedValues) {
  std::string e = error_of(R"({"d_model": 64, "n_head": 4})");
  EXPECT_NE(e.find("unknown key 'n_head'"), std::string::npos) << e;
  EXPECT_NE(e.find("n_heads"), std::string::npos) << e;
  e = error_of(R"({"norm": "batch_norm"})");
  EXPECT_NE(e.find("key 'norm'"), std::string::npos) << e;
  EXPECT_NE(e.find("layer_norm, rms_norm, scale_norm"), std::string::npos) << e;
  e = error_of(R"({"d_model": "big"})");
  EXPECT_NE(e.find("key 'd_model' must be an integer"), std::string::npos) << e;
  e = error_of(R"({"d_model": 30, "n_heads": 4})");
  EXPECT_NE(e.find("not divisible"), std::string::npos) << e;
  e = error_of(R"({"n_heads": 4, "n_kv_heads": 3})");
  EXPECT_NE(e.find("n_kv_heads"), std::string::npos) << e;
  e = error_of(R"({"model_type": "mamba"})");
  EXPECT_NE(e.find("allowed: transformer, gpt2, llama, mistral, qwen2, bert, t5, marian"), std::string::npos) << e;
  e = error_of(R"({"dropout": 1.5})");
  EXPECT_NE(e.find("[0, 0.999]"), std::string::npos) << e;
  e = error_of("{\"d_model\": 64,");
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  e = error_of(R"({"architecture":"encoder_only","head":"lm"})");
  EXPECT_NE(e.find("encoder_only"), std::string::npos) << e;
}

TEST(ModelConfig, EngineSchemeNamesGqaAndGatedShapes) {
  ModelConfig c;
  c.d_model = 64; c.n_heads = 8; c.n_kv_heads = 2; c.activation = FfnActivation::swiglu; c.d_ff = 96;
  c.n_layers = 1; c.bias = false; c.position = PositionKind::rope; c.norm = NormKind::rms_norm;
  bool saw_k = false, saw_gate = false;
  for (const auto& p : parameter_specs(c)) {
    if (p.name == "decoder.layers.0.self_attn.k_proj.weight") { saw_k = true; EXPECT_EQ(p.shape, (Shape{16, 64})); }
    if (p.name == "decoder.layers.0.ffn.gate_proj.weight") { saw_gate = true; EXPECT_EQ(p.shape, (Shape{96, 64})); }
    EXPECT_EQ(p.name.find(".bias"), std::string::npos) << p.name;
  }
  EXPECT_TRUE(saw_k);
  EXPECT_TRUE(saw_gate);
}
