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
