// Hub directories and the safetensors reader's strictness: every malformed input is a
// one-line error naming the file, the tensor (or key) and the rule.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;
namespace fs = std::filesystem;

namespace {

std::string with_header(const std::string& json, const std::string& data) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((json.size() >> (8 * i)) & 0xff));
  return out + json + data;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string parse_error(const std::string& bytes) {
  return error_of([&] { parse_safetensors(bytes, "t.safetensors"); });
}

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

const char* kGpt2Config = R"({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 11,
  "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 16, "n_ctx": 16, "torch_dtype": "float32",
  "transformers_version": "4.40.0", "_name_or_path": "tiny", "task_specific_params": {"x": {"max_length": 5}}})";

// A tiny GPT-2 hub directory; `edit` changes the tensors before they are written.
fs::path gpt2_dir(const std::string& name, const std::function<void(std::map<std::string, Tensor>&)>& edit = {}) {
  const fs::path d = fs::path(::testing::TempDir()) / ("hub_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  write(d / "config.json", kGpt2Config);
  Model m = Model::create(parse_model_config(kGpt2Config, "config.json"), 5);
  std::map<std::string, Tensor> t = m.parameters();
  if (edit) edit(t);
  save_safetensors((d / "model.safetensors").string(), t);
  return d;
}

}  // namespace

TEST(SafetensorsStrict, RefusesWhatTheReferenceParserRefuses) {
  const std::string one = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_EQ(parse_error(with_header(one, std::string(4, '\0'))), "no error");
  // Bytes after the last tensor: a polyglot file hides a second payload there.
  EXPECT_NE(parse_error(with_header(one, std::string(8, '\0'))).find("4 bytes follow the last tensor"), std::string::npos);
  // NUL padding in the header (only spaces may pad it).
  EXPECT_NE(parse_error(with_header(one + std::string(3, '\0'), std::string(4, '\0'))).find("NUL byte"), std::string::npos);
  EXPECT_EQ(parse_error(with_header(one + "   ", std::string(4, '\0'))), "no error");
  // Duplicate keys, at the top and inside an entry.
  const std::string dup = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  EXPECT_NE(parse_error(with_header(dup, std::string(8, '\0'))).find("key 'a' twice"), std::string::npos);
  const std::string inner = R"({"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})";
  EXPECT_NE(parse_error(with_header(inner, std::string(4, '\0'))).find("key 'dtype' twice"), std::string::npos);
  // Overlapping and gapped ranges.
  const std::string overlap = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  const std::string e1 = parse_error(with_header(overlap, std::string(8, '\0')));
  EXPECT_NE(e1.find("overlap"), std::string::npos) << e1;
  EXPECT_NE(e1.find("tensor 'b'"), std::string::npos) << e1;
  const std::string gap = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  EXPECT_NE(parse_error(with_header(gap, std::string(12, '\0'))).find("gap of 4 bytes"), std::string::npos);
  // Counts that overflow 64 bits, and fields the format does not have.
  const std::string big = R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,4]}})";
  EXPECT_NE(parse_error(with_header(big, std::string(4, '\0'))).find("overflows 64 bits"), std::string::npos);
  const std::string extra = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"offset":0}})";
  EXPECT_NE(parse_error(with_header(extra, std::string(4, '\0'))).find("unknown field 'offset'"), std::string::npos);
  // Every message is one line naming the file.
  EXPECT_EQ(e1.find('\n'), std::string::npos);
  EXPECT_NE(e1.find("t.safetensors"), std::string::npos);
}

// Loading maps the file privately: an f32 tensor views it, and writing into it leaves the file alone.
TEST(SafetensorsStrict, MappedTensorsAreCopyOnWrite) {
  const std::string path = ::testing::TempDir() + "/cow.safetensors";
  save_safetensors(path, {{"w", Tensor::from_floats({1, 2, 3, 4}, {4})}});
  const std::string before = read_file(path);
  SafetensorsFile f = load_safetensors(path);
  f.tensors.at("w").data<float>()[0] = 42.0f;
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(load_safetensors(path).tensors.at("w").to_floats()[0], 1.0f);
  fs::remove(path);
}

TEST(HubDir, UnprefixedNamesBuffersAndTiedCopiesLoad) {
  const fs::path d = gpt2_dir("plain", [](std::map<std::string, Tensor>& t) {
    std::map<std::string, Tensor> out;
    for (auto& [k, v] : t) out[k.substr(std::string("transformer.").size())] = v;  // GPT2Model's names
    out["h.0.attn.bias"] = Tensor::ones({1, 1, 16, 16});
    out["h.0.attn.masked_bias"] = Tensor::full({}, -1e4f);
    out["lm_head.weight"] = out["wte.weight"];  // a tied copy
    t = out;
  });
  const LoadedWeights w = load_model_weights(d.string());
  EXPECT_TRUE(w.model.parameters().count("transformer.wte.weight"));
  EXPECT_FALSE(w.model.parameters().count("lm_head.weight"));
}

TEST(HubDir, ErrorsNameTheFileTheTensorAndTheRule) {
  // An unknown tensor is refused by name.
  fs::path d = gpt2_dir("extra", [](auto& t) { t["transformer.h.0.adapter.weight"] = Tensor::zeros({2}); });
  std::string e = error_of([&] { load_model_weights(d.string()); });
  EXPECT_NE(e.find("unexpected tensor 'transformer.h.0.adapter.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("model.safetensors"), std::string::npos) << e;
  // Pickle checkpoints are refused with the fix.
  d = gpt2_dir("pickle");
  fs::rename(d / "model.safetensors", d / "pytorch_model.bin");
  e = error_of([&] { load_model_weights(d.string()); });
  EXPECT_NE(e.find("pytorch_model.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("arbitrary code"), std::string::npos) << e;
  EXPECT_NE(e.find("safe_serialization=True"), std::string::npos) << e;
  // Structural values the engine does not implement.
  d = gpt2_dir("structural");
  std::string cfg = kGpt2Config;
  write(d / "config.json", cfg.substr(0, cfg.size() - 1) + R"(, "scale_attn_weights": false})");
  e = error_of([&] { load_model_weights(d.string()); });
  EXPECT_NE(e.find("key 'scale_attn_weights': only true is supported"), std::string::npos) << e;
  write(d / "config.json", R"({"model_type": "gpt2", "architectures": ["GPT2ForTokenClassification"]})");
  e = error_of([&] { load_model_weights(d.string()); });
  EXPECT_NE(e.find("unsupported value 'GPT2ForTokenClassification'"), std::string::npos) << e;
}

TEST(HubDir, ShardedWeightsFollowTheirIndex) {
  const fs::path d = gpt2_dir("sharded");
  const SafetensorsFile all = load_safetensors((d / "model.safetensors").string());
  fs::remove(d / "model.safetensors");
  std::map<std::string, Tensor> a, b;
  nlohmann::json map = nlohmann::json::object();
  bool first = true;
  for (const auto& [k, v] : all.tensors) {
    (first ? a : b)[k] = v;
    map[k] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    first = !first;
  }
  save_safetensors((d / "model-00001-of-00002.safetensors").string(), a);
  save_safetensors((d / "model-00002-of-00002.safetensors").string(), b);
  const auto index = [&](const nlohmann::json& m) {
    write(d / "model.safetensors.index.json", nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", m}}.dump());
  };
  index(map);
  EXPECT_EQ(load_model_weights(d.string()).model.parameters().size(), all.tensors.size());

  nlohmann::json bad = map;
  bad[a.begin()->first] = "../model-00001-of-00002.safetensors";
  index(bad);
  EXPECT_NE(error_of([&] { load_model_weights(d.string()); }).find("not a file of this directory"), std::string::npos);
  bad = map;
  bad[a.begin()->first] = "model-00002-of-00002.safetensors";  // listed in the wrong shard
  index(bad);
  const std::string e = error_of([&] { load_model_weights(d.string()); });
  EXPECT_NE(e.find("does not assign to it"), std::string::npos) << e;
  EXPECT_NE(e.find(a.begin()->first), std::string::npos) << e;
}

TEST(HubDir, GenerationConfigIsReadAndChecked) {
  const GenerationDefaults g = parse_generation_config(
      R"({"eos_token_id": [2, 7], "max_new_tokens": 9, "do_sample": false, "num_beams": 4,
          "early_stopping": "never", "transformers_version": "4.40.0", "_from_model_config": true})",
      "generation_config.json");
  EXPECT_EQ(g.eos_token_ids, (std::vector<std::int64_t>{2, 7}));
  EXPECT_EQ(g.max_new_tokens, 9);
  EXPECT_EQ(g.do_sample, false);
  EXPECT_EQ(g.num_beams, 4);
  EXPECT_EQ(g.early_stopping, false);
  const std::string e = error_of([] { parse_generation_config(R"({"max_length": 0})", "generation_config.json"); });
  EXPECT_NE(e.find("generation_config.json"), std::string::npos) << e;
}

TEST(HubDir, MarianSizesMustAgreeAcrossStacks) {
  const std::string e = error_of([] {
    parse_model_config(R"({"model_type": "marian", "d_model": 8, "encoder_attention_heads": 2,
      "decoder_attention_heads": 4, "vocab_size": 10})", "config.json");
  });
  EXPECT_NE(e.find("key 'decoder_attention_heads'"), std::string::npos) << e;
}
