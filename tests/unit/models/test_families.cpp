// The family registry (src/models/family.h): every model_type answers from one file, and
// what the rest of the engine asks of a family holds for each of them.
#include <gtest/gtest.h>

#include <set>

#include "models/family.h"
#include "support/family_config.h"
#include "tfm/error.h"
#include "tfm/model.h"
#include "tfm/ops.h"

using namespace tfm;

namespace {

// A family's defaults at a size a test can run.
ModelConfig tiny(const Family& f) { return test::small_family_config(f, 2, 1, 1); }

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST(Families, RegistryListsEveryModelTypeOnce) {
  std::set<std::string> seen;
  for (const Family& f : model_families()) {
    EXPECT_TRUE(seen.insert(f.model_type).second) << f.model_type << " registered twice";
    EXPECT_EQ(&model_family(f.model_type), &f);
    EXPECT_TRUE(f.parameters && f.wire) << f.model_type;
    EXPECT_EQ(f.schema.base.model_type, f.model_type) << "the schema's base names its family";
  }
  for (const char* t : {"transformer", "gpt2", "llama", "mistral", "qwen2", "bert", "t5", "marian", "vit", "deit", "whisper", "retro", "clip"})
    EXPECT_EQ(seen.count(t), 1u) << t;
  const std::string e = error_of([] { model_family("gpt3", "config.json"); });
  EXPECT_NE(e.find("config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("unknown value 'gpt3'"), std::string::npos) << e;
  EXPECT_NE(e.find("transformer, gpt2, llama, mistral, qwen2, bert, t5, marian, vit, deit, whisper, retro, clip"), std::string::npos) << e;
}

TEST(Families, PresetsComeFromTheirFamilies) {
  EXPECT_EQ(model_preset_names(), (std::vector<std::string>{"vaswani", "gpt2", "llama", "bert", "t5", "vit-b16", "deit-b16-distilled",
                                                            "whisper-tiny", "whisper-base", "whisper-small", "clip-vit-b32"}));
  for (const Family& f : model_families())
    for (const auto& [name, c] : f.presets) EXPECT_EQ(model_preset(name).model_type, f.model_type) << name;
  const std::string e = error_of([] { model_preset("gtp2"); });
  EXPECT_NE(e.find("did you mean 'gpt2'"), std::string::npos) << e;
  EXPECT_NE(e.find("allowed: vaswani, gpt2, llama, bert, t5, vit-b16, deit-b16-distilled, whisper-tiny"), std::string::npos) << e;
}

// Every family builds, wires and runs a forward pass from its own parameter specs; its config
// round-trips through its key set; the parameters a family initialises match its specs.
TEST(Families, EachBuildsWiresAndRunsFromItsSpecs) {
  for (const Family& f : model_families()) {
    SCOPED_TRACE(f.model_type);
    const ModelConfig c = parse_model_config(model_config_to_json(tiny(f)), f.model_type);
    EXPECT_EQ(model_config_to_json(c), model_config_to_json(tiny(f)));
    Model m = Model::create(c, 7);
    std::int64_t n = 0;
    for (const auto& s : f.parameters(c)) {
      ASSERT_EQ(m.parameters().count(s.name), 1u) << s.name;
      EXPECT_EQ(m.parameters().at(s.name).shape(), s.shape) << s.name;
      n += shape_numel(s.shape);
    }
    EXPECT_EQ(m.parameter_count(), n);
    ModelInputs in;
    if (c.text_tower.enabled()) in.input_ids = Tensor::from_ints({3, 4, 5, 2}, {1, 4});  // CLIP reads both
    if (c.reads_images()) in.pixel_values = Tensor::randn({2, c.num_channels, c.image_size, c.image_size}, 3);
    else if (c.reads_audio()) in.input_features = Tensor::randn({1, c.num_mel_bins, 2 * c.max_source_positions - 1}, 3);
    else in.input_ids = Tensor::from_ints({3, 4, 5, 6}, {1, 4});
    if (c.architecture == Architecture::encoder_decoder) in.decoder_input_ids = Tensor::from_ints({2, 7}, {1, 2});
    const ModelOutputs out = m.forward(in);
    ASSERT_TRUE(out.logits.defined());
    for (const float v : out.logits.to_floats()) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(Families, HubNamesMapOntoTheSpecs) {
  // A hub file without the base-model prefix, with a buffer the family drops, loads as the specs.
  const Family& gpt2 = model_family("gpt2");
  const ModelConfig c = tiny(gpt2);
  std::map<std::string, Tensor> stored;
  for (const auto& s : gpt2.parameters(c)) {
    std::string name = s.name.rfind(gpt2.hub_prefix, 0) == 0 ? s.name.substr(gpt2.hub_prefix.size()) : s.name;
    stored[name] = Tensor::zeros(s.shape);
  }
  stored["h.0.attn.bias"] = Tensor::zeros({1, 1, 32, 32});
  const auto mapped = hub_checkpoint_names(c, stored);
  std::set<std::string> want, got;
  for (const auto& s : gpt2.parameters(c)) want.insert(s.name);
  for (const auto& [n, t] : mapped) got.insert(n);
  EXPECT_EQ(got, want);
}

TEST(Families, GgufArchitecturesAndEngineEquivalents) {
  for (const char* arch : {"gpt2", "llama", "qwen2"}) {
    const Family* f = gguf_family(arch);
    ASSERT_NE(f, nullptr) << arch;
    EXPECT_EQ(f->model_type, arch);
  }
  EXPECT_EQ(gguf_family("mistral"), nullptr);
  EXPECT_EQ(gguf_family("falcon"), nullptr);
  // An engine-scheme decoder with GPT-2's components computes as GPT-2, and as nothing else.
  ModelConfig e;
  e.architecture = Architecture::decoder_only;
  e.norm_placement = NormPlacement::pre;
  e.position = PositionKind::learned;
  e.activation = FfnActivation::gelu_tanh;
  std::vector<std::string> same;
  for (const Family& f : model_families())
    if (f.computes_as_engine && f.computes_as_engine(e)) same.push_back(f.model_type);
  EXPECT_EQ(same, std::vector<std::string>{"gpt2"});
}
