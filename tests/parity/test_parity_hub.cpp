// Hugging Face hub directories as published (tools/reference/ref_hub.py writes them with
// torch): each is loaded with load_model_weights and its logits and greedy continuation
// compared with the PyTorch reference of the family's modeling code.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

std::string hub_dir(const std::string& name) {
  const char* d = std::getenv("TFM_FIXTURE_DIR");
  return std::string(d ? d : "fixtures") + "/hub/" + name;
}

SafetensorsFile reference(const std::string& name) { return load_safetensors(hub_dir(name) + ".ref.safetensors"); }

std::int64_t argmax(const Tensor& row) {
  const std::vector<float> v = row.to_floats();
  std::size_t best = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<std::int64_t>(best);
}

// Greedy continuation through the KV-cache path (decode_cached), as tfm generate runs it.
std::vector<std::int64_t> greedy_decoder(Model& m, const Tensor& prompt, std::int64_t n) {
  const std::int64_t T = prompt.size(1);
  KVCache cache(m.config(), 1, T + n + 1);
  Tensor logits = m.decode_cached(prompt, {0}, cache);  // (1, V)
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = m.decode_cached(Tensor::from_ints({out.back()}, {1, 1}), {0}, cache);
  }
  return out;
}

std::vector<std::int64_t> greedy_seq2seq(Model& m, const Tensor& src, std::int64_t start, std::int64_t n) {
  KVCache cache(m.config(), 1, n + 2, 1, src.size(1));
  m.encode_to_cache(src, cache, 0);
  cache.bind_source(0, 0);
  Tensor logits = m.decode_cached(Tensor::from_ints({start}, {1, 1}), {0}, cache);
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i) {
    out.push_back(argmax(logits));
    logits = m.decode_cached(Tensor::from_ints({out.back()}, {1, 1}), {0}, cache);
  }
  return out;
}

void check_decoder(const std::string& name) {
  SCOPED_TRACE(name);
  LoadedWeights w = load_model_weights(hub_dir(name));
  const SafetensorsFile r = reference(name);
  ModelInputs in;
  in.input_ids = test::fixture_tensor(r, "input_ids");
  test::expect_close(w.model.forward(in).logits, test::fixture_tensor(r, "logits"), 1e-4, 1e-4, name + " logits");
  const std::vector<std::int64_t> want = test::fixture_tensor(r, "greedy").to_ints();
  EXPECT_EQ(greedy_decoder(w.model, in.input_ids, static_cast<std::int64_t>(want.size())), want) << name;
}

void check_seq2seq(const std::string& name) {
  SCOPED_TRACE(name);
  LoadedWeights w = load_model_weights(hub_dir(name));
  const SafetensorsFile r = reference(name);
  ModelInputs in;
  in.input_ids = test::fixture_tensor(r, "input_ids");
  in.decoder_input_ids = test::fixture_tensor(r, "decoder_input_ids");
  test::expect_close(w.model.forward(in).logits, test::fixture_tensor(r, "logits"), 1e-4, 1e-4, name + " logits");
  const std::vector<std::int64_t> want = test::fixture_tensor(r, "greedy").to_ints();
  EXPECT_EQ(greedy_seq2seq(w.model, in.input_ids, w.config.decoder_start_token_id, static_cast<std::int64_t>(want.size())),
            want)
      << name;
}

void check_encoder(const std::string& name) {
  SCOPED_TRACE(name);
  LoadedWeights w = load_model_weights(hub_dir(name));
  const SafetensorsFile r = reference(name);
  ModelInputs in;
  in.input_ids = test::fixture_tensor(r, "input_ids");
  in.token_type_ids = test::fixture_tensor(r, "token_type_ids");
  in.valid_lens = test::fixture_tensor(r, "valid_lens");
  Tensor got = w.model.forward(in).logits;
  Tensor want = test::fixture_tensor(r, "logits");
  if (got.dim() == 3) {  // per-token outputs: padded positions are not compared
    const std::int64_t n = in.valid_lens.to_ints()[1];
    test::expect_close(slice(got, 0, 0, 1), slice(want, 0, 0, 1), 1e-4, 1e-4, name + " row 0");
    test::expect_close(slice(slice(got, 0, 1, 2), 1, 0, n), slice(slice(want, 0, 1, 2), 1, 0, n), 1e-4, 1e-4,
                       name + " row 1");
  } else {
    test::expect_close(got, want, 1e-4, 1e-4, name + " logits");
  }
}

// Fusion-in-Decoder training (ModelInputs::fused_parts): two examples of two parts each, padded
// into one batch of four encoder rows; the logits, the summed loss and its gradient on the tied
// table against ref_hub.fid_training_reference (each part encoded alone, the parts joined).
void check_fusion_in_decoder_training() {
  LoadedWeights w = load_model_weights(hub_dir("t5"));
  const SafetensorsFile r = reference("t5");
  ModelInputs in;
  in.input_ids = test::fixture_tensor(r, "fid_input_ids");
  in.valid_lens = test::fixture_tensor(r, "fid_valid_lens");
  in.decoder_input_ids = test::fixture_tensor(r, "fid_decoder_input_ids");
  in.fused_parts = 2;
  const std::int64_t V = w.config.vocab_size, C = w.config.d_model;
  Tensor table;
  for (auto& [name, p] : w.model.parameters()) {
    if (p.dim() == 2 && p.size(0) == V && p.size(1) == C) {
      ASSERT_FALSE(table.defined()) << "a second (V, C) parameter: " << name;
      table = p;
    }
  }
  ASSERT_TRUE(table.defined());
  table.requires_grad_();
  w.model.set_training(false);  // no dropout; gradients still flow
  const Tensor logits = w.model.forward(in).logits;
  test::expect_close(logits, test::fixture_tensor(r, "fid_logits"), 1e-4, 1e-4, "fused logits");
  const Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(test::fixture_tensor(r, "fid_labels"), {-1}), -100, 0.0f,
                                    LossReduction::sum);
  EXPECT_NEAR(loss.item(), test::fixture_tensor(r, "fid_loss").to_floats()[0], 1e-4);
  backward(loss);
  test::expect_close(table.grad(), test::fixture_tensor(r, "fid_grad_shared"), 1e-4, 1e-4, "gradient of the shared table");
}

}  // namespace

TEST(ParityHub, T5FusionInDecoderTrainingLossAndGradient) { check_fusion_in_decoder_training(); }
TEST(ParityHub, Gpt2AsPublishedUnprefixedWithBuffersTied) { check_decoder("gpt2"); }
TEST(ParityHub, Gpt2PrefixedUntiedF16Sharded) { check_decoder("gpt2_f16_sharded"); }
TEST(ParityHub, LlamaBf16UntiedWithRotaryBuffers) { check_decoder("llama_bf16"); }
TEST(ParityHub, LlamaAttentionBiasTiedUnprefixed) { check_decoder("llama_bias_tied"); }
TEST(ParityHub, MistralSlidingWindow) { check_decoder("mistral"); }
TEST(ParityHub, Qwen2QkvBiasTiedF16ThreeShards) { check_decoder("qwen2_f16"); }
TEST(ParityHub, BertModelUnprefixedHiddenStates) { check_encoder("bert_model"); }
TEST(ParityHub, BertForMaskedLmWithTiedDecoderCopiesAndGammaBeta) { check_encoder("bert_mlm"); }
TEST(ParityHub, BertForSequenceClassification) { check_encoder("bert_cls"); }
TEST(ParityHub, T5TiedWithEmbedCopies) { check_seq2seq("t5"); }
TEST(ParityHub, T5V11GatedGeluUntiedBf16) { check_seq2seq("t5_v1_1_bf16"); }

TEST(ParityHub, ConfigAndGenerationDefaultsAreRead) {
  const LoadedWeights g = load_model_weights(hub_dir("gpt2"));
  EXPECT_EQ(g.config.head, HeadKind::lm);
  EXPECT_EQ(g.config.eos_token_id, 40);
  EXPECT_EQ(g.generation.eos_token_ids, std::vector<std::int64_t>{40});
  const LoadedWeights l = load_model_weights(hub_dir("llama_bf16"));
  EXPECT_EQ(l.generation.eos_token_ids, (std::vector<std::int64_t>{2, 36}));
  EXPECT_EQ(l.generation.do_sample, true);
  EXPECT_DOUBLE_EQ(l.generation.temperature.value_or(0), 0.6);
  EXPECT_EQ(l.generation.max_length, 64);
  const LoadedWeights c = load_model_weights(hub_dir("bert_cls"));
  EXPECT_EQ(c.config.head, HeadKind::classifier);
  EXPECT_EQ(c.config.id2label, (std::vector<std::string>{"NEGATIVE", "NEUTRAL", "POSITIVE"}));
  const LoadedWeights m = load_model_weights(hub_dir("mistral"));
  EXPECT_EQ(m.config.sliding_window, 4);
  const LoadedWeights q = load_model_weights(hub_dir("qwen2_f16"));
  EXPECT_EQ(q.config.sliding_window, 0);  // use_sliding_window: false
  EXPECT_TRUE(q.config.qkv_bias);
}

// The f32 tensors of a file stay in its mapping: loading does not copy them.
TEST(ParityHub, F32TensorsViewTheFileMapping) {
  const LoadedWeights g = load_model_weights(hub_dir("gpt2"));
  const auto& p = g.model.parameters();
  const Tensor& a = p.at("transformer.h.0.attn.c_attn.weight");
  const Tensor& b = p.at("transformer.h.1.attn.c_attn.weight");
  EXPECT_EQ(a.storage().get(), b.storage().get()) << "two tensors of one file share the mapping's storage";
}

// GPT-2's Conv1D weights are used as stored, (in, out), memory-mapped: at decode time (few
// rows) they run through gemm_rows' non-transposed path. Every cached decode step's logits,
// one sequence alone and two side by side, equal PyTorch's full-sequence logits there.
TEST(ParityHub, Gpt2Conv1DDecodeStepsMatchTheReferenceLogits) {
  LoadedWeights w = load_model_weights(hub_dir("gpt2"));
  const SafetensorsFile r = reference("gpt2");
  const std::vector<std::int64_t> ids = test::fixture_tensor(r, "input_ids").to_ints();
  const std::vector<float> want = test::fixture_tensor(r, "logits").to_floats();  // (1, T, V)
  const std::int64_t T = static_cast<std::int64_t>(ids.size()), V = w.config.vocab_size;
  ASSERT_EQ(static_cast<std::int64_t>(want.size()), T * V);
  for (const std::int64_t rows : {1, 2}) {
    KVCache cache(w.model.config(), rows, T + 1);
    std::vector<std::int64_t> slots;
    for (std::int64_t b = 0; b < rows; ++b) slots.push_back(b);
    for (std::int64_t t = 0; t < T; ++t) {
      const std::vector<std::int64_t> step(static_cast<std::size_t>(rows), ids[static_cast<std::size_t>(t)]);
      const Tensor logits = w.model.decode_cached(Tensor::from_ints(step, {rows, 1}), slots, cache);
      const std::vector<float> got = logits.to_floats();
      ASSERT_EQ(static_cast<std::int64_t>(got.size()), rows * V);
      for (std::int64_t b = 0; b < rows; ++b)
        for (std::int64_t v = 0; v < V; ++v) {
          const float g = got[static_cast<std::size_t>(b * V + v)], e = want[static_cast<std::size_t>(t * V + v)];
          ASSERT_NEAR(g, e, 1e-4 + 1e-4 * std::abs(e))
              << "rows " << rows << ", row " << b << ", step " << t << ", logit " << v;
        }
    }
  }
}

TEST(ParityHub, MarianOpusMtWithStaticTablesAndFinalLogitsBias) { check_seq2seq("marian"); }

// tfm eval --stride: perplexity equal to transformers' perplexity guide run on the reference.
TEST(ParityHub, StridedPerplexityFollowsTheGuide) {
  LoadedWeights w = load_model_weights(hub_dir("gpt2"));
  const SafetensorsFile r = reference("gpt2");
  std::vector<std::int32_t> ids;
  for (const std::int64_t x : test::fixture_tensor(r, "stream").to_ints()) ids.push_back(static_cast<std::int32_t>(x));
  for (const auto& [ctx, stride] : std::vector<std::pair<std::int64_t, std::int64_t>>{{8, 3}, {8, 8}, {24, 5}}) {
    const auto want = test::fixture_tensor(r, "ppl_" + std::to_string(ctx) + "_" + std::to_string(stride)).to_floats();
    const PerplexityResult got = strided_perplexity(w.model, ids, ctx, stride);
    EXPECT_EQ(got.predicted, static_cast<std::int64_t>(want[1])) << ctx << "/" << stride;
    EXPECT_NEAR(got.nll_sum, want[0], 1e-4 * std::abs(want[0])) << ctx << "/" << stride;
  }
}
