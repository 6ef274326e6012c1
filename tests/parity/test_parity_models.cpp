// Whole-model parity: the vaswani preset (post- and pre-norm) against torch.nn.Transformer.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

// Parameters named "param.<name>" in a fixture, as a name -> Tensor map marked for grads.
std::map<std::string, Tensor> fixture_params(const SafetensorsFile& f) {
  std::map<std::string, Tensor> p;
  for (const auto& [k, v] : f.tensors)
    if (k.rfind("param.", 0) == 0) p[k.substr(6)] = v.clone().requires_grad_();
  return p;
}

void check_vaswani(const std::string& which, NormPlacement placement) {
  const SafetensorsFile f = test::load_fixture("model_vaswani_" + which);
  ModelConfig c = model_preset("vaswani");
  c.vocab_size = 23; c.d_model = 32; c.n_heads = 4; c.d_ff = 48; c.n_layers = 2; c.max_positions = 64;
  c.norm_placement = placement;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  Model m = Model::from_parameters(c, fixture_params(f));
  ModelInputs in;
  in.input_ids = test::fixture_tensor(f, "src");
  in.valid_lens = test::fixture_tensor(f, "src_lens");
  in.decoder_input_ids = test::fixture_tensor(f, "tgt");
  in.decoder_valid_lens = test::fixture_tensor(f, "tgt_lens");
  const ModelOutputs out = m.forward(in);
  test::expect_close(out.encoder_hidden, test::fixture_tensor(f, "memory"), 1e-4, 1e-5, which + " encoder output");
  test::expect_close(out.hidden, test::fixture_tensor(f, "decoder_out"), 1e-4, 1e-5, which + " decoder output");
  test::expect_close(out.logits, test::fixture_tensor(f, "logits"), 1e-4, 1e-5, which + " logits");
  backward(out.logits, test::fixture_tensor(f, "w"));
  for (const auto& [name, p] : m.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    test::expect_close(p.grad(), test::fixture_tensor(f, "grad." + name), 1e-4, 2e-5, which + " grad " + name);
  }
}

}  // namespace

TEST(ParityModels, VaswaniPostNormMatchesTorchTransformer) { check_vaswani("post", NormPlacement::post); }
TEST(ParityModels, VaswaniPreNormMatchesTorchTransformer) { check_vaswani("pre", NormPlacement::pre); }

// Tiny models of each Hugging Face family (tools/reference/ref_presets.py), loaded under
// Hugging Face's parameter names: logits and every parameter gradient.
namespace {

void check_preset(const std::string& family, const std::string& config_json) {
  const SafetensorsFile f = test::load_fixture("preset_" + family);
  const ModelConfig c = parse_model_config(config_json, family);
  Model m = Model::from_parameters(c, fixture_params(f));
  ModelInputs in;
  in.input_ids = test::fixture_tensor(f, "input_ids");
  if (f.tensors.count("valid_lens")) in.valid_lens = test::fixture_tensor(f, "valid_lens");
  if (f.tensors.count("token_type_ids")) in.token_type_ids = test::fixture_tensor(f, "token_type_ids");
  if (f.tensors.count("decoder_input_ids")) in.decoder_input_ids = test::fixture_tensor(f, "decoder_input_ids");
  const ModelOutputs out = m.forward(in);
  test::expect_close(out.logits, test::fixture_tensor(f, "logits"), 1e-4, 1e-5, family + " logits");
  backward(out.logits, test::fixture_tensor(f, "w"));
  for (const auto& [name, p] : m.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << family << " " << name;
    test::expect_close(p.grad(), test::fixture_tensor(f, "grad." + name), 1e-4, 2e-5, family + " grad " + name);
  }
}

}  // namespace

TEST(ParityModels, Gpt2Family) {
  check_preset("gpt2", R"({"model_type":"gpt2","vocab_size":31,"n_embd":16,"n_layer":2,"n_head":4,
      "n_positions":20,"resid_pdrop":0,"attn_pdrop":0,"embd_pdrop":0})");
}
TEST(ParityModels, LlamaFamilyWithGqa) {
  check_preset("llama", R"({"model_type":"llama","vocab_size":29,"hidden_size":32,"intermediate_size":40,
      "num_hidden_layers":2,"num_attention_heads":8,"num_key_value_heads":2,"rms_norm_eps":1e-6})");
}
TEST(ParityModels, BertFamilyClassifier) {
  check_preset("bert", R"({"model_type":"bert","vocab_size":27,"hidden_size":16,"num_hidden_layers":2,
      "num_attention_heads":2,"intermediate_size":24,"max_position_embeddings":16,"num_labels":3,
      "hidden_dropout_prob":0,"attention_probs_dropout_prob":0,"architectures":["BertForSequenceClassification"]})");
}
TEST(ParityModels, T5FamilyGatedGelu) {
  check_preset("t5", R"({"model_type":"t5","vocab_size":33,"d_model":16,"d_kv":8,"d_ff":24,"num_layers":2,
      "num_heads":2,"relative_attention_num_buckets":8,"relative_attention_max_distance":20,
      "feed_forward_proj":"gated-gelu","dropout_rate":0})");
}
