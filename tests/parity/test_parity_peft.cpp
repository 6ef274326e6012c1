// Bottleneck adapters and prefix tuning against their definitions in PyTorch
// (tools/reference/ref_peft.py): logits and every gradient (base and adapter tensors) of
// sum(logits * w); the adapter saved in PEFT's layout, reloaded on a fresh base, gives the
// same logits bit for bit; with a prefix, the KV-cache decode equals the full forward.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tfm/adapter.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

const char* kCases[] = {"bottleneck_houlsby_enc_post", "bottleneck_pfeiffer_encdec_pre",
                        "prefix_dec_rope_gqa_projection", "prefix_dec_alibi", "prefix_encdec_t5rel"};

struct PeftFixture {
  SafetensorsFile f;
  ModelConfig cfg;
  nlohmann::json a;
  std::map<std::string, Tensor> params, adapter;
  ModelInputs in;
};

PeftFixture load(const std::string& name) {
  PeftFixture x;
  x.f = test::load_fixture("peft_" + name);
  x.cfg = parse_model_config(x.f.metadata.at("config"), name);
  x.a = nlohmann::json::parse(x.f.metadata.at("adapter"));
  for (const auto& [k, v] : x.f.tensors) {
    if (k.rfind("param.", 0) == 0) x.params[k.substr(6)] = v.clone().requires_grad_();
    if (k.rfind("adapter.", 0) == 0) x.adapter[k.substr(8)] = v.clone().requires_grad_();
  }
  x.in.input_ids = test::fixture_tensor(x.f, "input_ids");
  x.in.valid_lens = test::fixture_tensor(x.f, "valid_lens");
  if (x.f.tensors.count("decoder_input_ids")) {
    x.in.decoder_input_ids = test::fixture_tensor(x.f, "decoder_input_ids");
    x.in.decoder_valid_lens = test::fixture_tensor(x.f, "decoder_valid_lens");
  }
  return x;
}

Model adapted(const PeftFixture& x) {
  Model m = Model::from_parameters(x.cfg, x.params);
  if (x.a.at("kind") == "bottleneck") {
    BottleneckConfig b;
    b.placement = parse_bottleneck_placement(x.a.at("placement"), "fixture");
    b.non_linearity = parse_bottleneck_activation(x.a.at("act"), "fixture");
    b.bottleneck_size = x.a.at("m");
    m.attach_bottleneck(b, x.adapter);
  } else {
    PrefixConfig p;
    p.num_virtual_tokens = x.a.at("P");
    p.prefix_projection = x.a.at("projection");
    if (p.prefix_projection) p.encoder_hidden_size = x.a.at("hidden");
    m.attach_prefix(p, x.adapter);
  }
  return m;
}

Tensor logits(Model& m, const ModelInputs& in) {
  NoGradGuard ng;
  return m.forward(in).logits;
}

}  // namespace

TEST(ParityPeft, ForwardAndEveryGradientMatchTheReference) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    const PeftFixture x = load(name);
    for (bool fused : {true, false}) {
      Model m = adapted(x);
      m.set_fused_attention(fused);
      for (auto& [n, p] : m.parameters()) p.zero_grad();
      const ModelOutputs out = m.forward(x.in);
      test::expect_close(out.logits, test::fixture_tensor(x.f, "logits"), 1e-4, 1e-5, std::string(name) + " logits");
      backward(out.logits, test::fixture_tensor(x.f, "w"));
      for (const auto& [n, p] : m.parameters()) {
        ASSERT_TRUE(p.grad().defined()) << n;
        test::expect_close(p.grad(), test::fixture_tensor(x.f, "grad." + n), 1e-4, 2e-5, "grad " + n);
      }
    }
  }
}

TEST(ParityPeft, SavedAdapterReloadedOnAFreshBaseGivesTheSameLogits) {
  for (const char* name : kCases) {
    SCOPED_TRACE(name);
    const PeftFixture x = load(name);
    Model m = adapted(x);
    const Tensor want = logits(m, x.in);
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("tfm_peft_" + std::string(name) + std::to_string(::getpid()))).string();
    save_adapter(dir, m, "base");
    const std::string type = read_adapter_type(dir);
    EXPECT_EQ(type, x.a.at("kind") == "bottleneck" ? "BOTTLENECK" : "PREFIX_TUNING");
    if (type == "PREFIX_TUNING") {  // the final (P, L*2*kv) table PEFT reads, whatever the training form
      const auto t = load_safetensors(dir + "/adapter_model.safetensors").tensors;
      ASSERT_TRUE(t.count("prompt_embeddings"));
      EXPECT_EQ(t.at("prompt_embeddings").shape(), (Shape{x.a.at("P").get<std::int64_t>(), m.prefix_width()}));
    }
    Model again = Model::from_parameters(x.cfg, x.params);
    load_adapter(dir, again);
    test::expect_bitwise_equal(logits(again, x.in), want, "reloaded adapter");
    // The final table alone (what PEFT's inference mode loads) computes the same prefixes.
    if (type == "PREFIX_TUNING") {
      Model table_only = Model::from_parameters(x.cfg, x.params);
      PrefixConfig p;
      p.num_virtual_tokens = x.a.at("P");
      table_only.attach_prefix(p, {{"prompt_encoder.embedding.weight", m.prefix_table()}});
      test::expect_close(logits(table_only, x.in), want, 1e-5, 1e-6, "final table");
    }
    std::filesystem::remove_all(dir);
  }
}

// Prefix preloaded into the cache: decoding token by token (and in one chunk) gives the
// logits of the full forward over the same tokens, for decoder-only and encoder-decoder.
TEST(ParityPeft, CachedDecodeWithPrefixEqualsTheFullForward) {
  for (const char* name : {"prefix_dec_rope_gqa_projection", "prefix_dec_alibi", "prefix_encdec_t5rel",
                           "bottleneck_pfeiffer_encdec_pre"}) {
    SCOPED_TRACE(name);
    const PeftFixture x = load(name);
    Model m = adapted(x);
    const bool encdec = x.cfg.architecture == Architecture::encoder_decoder;
    const Tensor ids = slice(encdec ? x.in.decoder_input_ids : x.in.input_ids, 0, 0, 1);  // row 0: no padding
    const Tensor src = slice(x.in.input_ids, 0, 0, 1);
    ModelInputs in;
    in.input_ids = encdec ? src : ids;
    if (encdec) in.decoder_input_ids = ids;
    const Tensor full = logits(m, in);  // (1, T, V)
    const std::int64_t T = ids.size(1);
    KVCache cache(x.cfg, 2, 16, encdec ? 1 : 0, encdec ? 16 : 0);
    if (encdec) {
      m.encode_to_cache(src, cache, 0);
      cache.bind_source(0, 0);
      cache.bind_source(1, 0);
    }
    for (std::int64_t t = 0; t < T; ++t) {
      const Tensor step = m.decode_cached(slice(ids, 1, t, t + 1), {0}, cache);  // (1, V)
      test::expect_close(step, squeeze(slice(full, 1, t, t + 1), 1), 1e-4, 1e-5, "step " + std::to_string(t));
    }
    EXPECT_EQ(cache.length(0), T);
    const Tensor chunk = m.decode_cached(ids, {1}, cache, true);  // slot 1: all tokens at once
    test::expect_close(chunk, full, 1e-4, 1e-5, "chunk");
  }
}
