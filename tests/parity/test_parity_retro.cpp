// RETRO's chunked cross-attention (model_type "retro") against the PyTorch reference
// tools/reference/ref_retro.py, which computes it a chunk at a time from the definition: logits
// and every parameter's gradient of sum(logits * w) (the retrieval encoder's, the chunked
// cross-attention's, the shared embedding's), fp32 at rtol 1e-4.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

void check_retro(const std::string& name) {
  const SafetensorsFile f = test::load_fixture("retro_" + name);
  const ModelConfig c = parse_model_config(f.metadata.at("config"), name);
  ASSERT_EQ(c.model_type, "retro");
  ASSERT_TRUE(c.retrieval.enabled());
  std::map<std::string, Tensor> params;
  for (const auto& [k, v] : f.tensors)
    if (k.rfind("param.", 0) == 0) params[k.substr(6)] = v.clone().requires_grad_();
  Model m = Model::from_parameters(c, params);  // names and shapes against the family's specs

  ModelInputs in;
  in.input_ids = test::fixture_tensor(f, "input_ids");
  in.neighbours = test::fixture_tensor(f, "neighbours");
  for (bool fused : {true, false}) {
    m.set_fused_attention(fused);
    for (auto& [pname, p] : m.parameters()) p.zero_grad();
    const ModelOutputs out = m.forward(in);
    test::expect_close(out.logits, test::fixture_tensor(f, "logits"), 1e-4, 1e-5, name + " logits");
    backward(out.logits, test::fixture_tensor(f, "w"));
    std::size_t checked = 0;
    for (const auto& [pname, p] : m.parameters()) {
      ASSERT_TRUE(p.grad().defined()) << name << " " << pname;
      test::expect_close(p.grad(), test::fixture_tensor(f, "grad." + pname), 1e-4, 2e-5, name + " grad " + pname);
      ++checked;
    }
    EXPECT_EQ(checked, params.size());
  }
}

}  // namespace

// Pre-LN, learned positions, GQA, a short last chunk, two chunked cross-attention layers.
TEST(ParityRetro, PreLearnedGqaShortLastChunk) { check_retro("pre_learned_gqa_short_last_chunk"); }
// Post-RMSNorm, RoPE in the decoder and the retrieval encoder, SwiGLU, no biases, untied head.
TEST(ParityRetro, PostRmsRopeSwigluUntied) { check_retro("post_rms_rope_swiglu_untied"); }
