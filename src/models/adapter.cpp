// PEFT adapter directories (adapter.h): adapter_config.json + adapter_model.safetensors.
#include "tfm/adapter.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kPrefix = "base_model.model.";  // PEFT's wrapper path in tensor names

const char* task_type(const ModelConfig& c) {
  switch (c.head) {
    case HeadKind::classifier: return "SEQ_CLS";
    case HeadKind::none: return "FEATURE_EXTRACTION";
    default: return c.architecture == Architecture::encoder_decoder ? "SEQ_2_SEQ_LM" : "CAUSAL_LM";
  }
}

}  // namespace

void save_lora_adapter(const std::string& dir, const Model& model, const std::string& base_model) {
  const LoraConfig& c = model.lora_config();
  fs::create_directories(dir);
  json j;
  j["peft_type"] = "LORA";
  j["task_type"] = task_type(model.config());
  j["r"] = c.r;
  j["lora_alpha"] = c.alpha;
  j["lora_dropout"] = c.dropout;
  j["target_modules"] = c.target_modules;
  j["bias"] = "none";
  j["fan_in_fan_out"] = model.config().model_type == "gpt2";  // GPT-2's Conv1D layout
  j["base_model_name_or_path"] = base_model;
  j["inference_mode"] = true;
  j["modules_to_save"] = nullptr;
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : model.lora_parameters()) tensors[kPrefix + name] = t;
  save_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), j.dump(2) + "\n");
}

LoraConfig read_lora_adapter_config(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_config.json").string();
  TFM_CHECK(fs::exists(path), dir, "not an adapter directory: no adapter_config.json");
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(path, "malformed JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), path, "must be a JSON object");
  // Each key read on its own, so an error names it.
  const auto get = [&](const char* key, auto fallback) {
    using T = decltype(fallback);
    if (!j.contains(key) || j[key].is_null()) return fallback;
    try {
      return j[key].get<T>();
    } catch (const json::exception&) {
      fail(path, "key '", key, "' has the wrong type: ", j[key].dump());
    }
  };
  const std::string type = get("peft_type", std::string());
  TFM_CHECK(type == "LORA", path, "peft_type '", type, "' is not supported (only LORA)");
  const std::string bias = get("bias", std::string("none"));
  TFM_CHECK(bias == "none", path, "bias '", bias, "' is not supported (only \"none\": no trained biases)");
  TFM_CHECK(!get("use_dora", false), path, "use_dora is not supported");
  TFM_CHECK(j.contains("r"), path, "has no 'r'");
  LoraConfig c;
  c.r = get("r", std::int64_t{0});
  c.alpha = get("lora_alpha", static_cast<double>(c.r));
  c.dropout = get("lora_dropout", 0.0);
  TFM_CHECK(j.contains("target_modules"), path, "has no 'target_modules'");
  if (j["target_modules"].is_string()) c.target_modules = {j["target_modules"].get<std::string>()};
  else c.target_modules = get("target_modules", std::vector<std::string>());
  return c;
}

void load_lora_adapter(const std::string& dir, Model& model) {
  const LoraConfig c = read_lora_adapter_config(dir);
  const std::string path = (fs::path(dir) / "adapter_model.safetensors").string();
  TFM_CHECK(fs::exists(path), dir, "no adapter_model.safetensors (adapter_model.bin is pickle, which can run code: "
            "convert it with PEFT's save_pretrained(safe_serialization=True))");
  std::map<std::string, Tensor> factors;
  for (auto& [name, t] : load_safetensors(path).tensors) {
    std::string n = name.rfind(kPrefix, 0) == 0 ? name.substr(std::string(kPrefix).size()) : name;
    // PEFT names carry the adapter's name when it is not the default one (".lora_A.default.weight").
    for (const char* ab : {".lora_A.", ".lora_B."}) {
      const auto at = n.find(std::string(ab) + "default.");
      if (at != std::string::npos) n.erase(at + 8, 8);
    }
    factors[n] = t;
  }
  try {
    model.attach_lora(c, factors);
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

}  // namespace tfm
