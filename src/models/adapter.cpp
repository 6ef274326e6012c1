// PEFT adapter directories (adapter.h): adapter_config.json + adapter_model.safetensors.
#include "tfm/adapter.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "models/family.h"
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
  j["fan_in_fan_out"] = model_family(model.config().model_type).conv1d_linears;  // GPT-2's Conv1D layout
  j["base_model_name_or_path"] = base_model;
  j["inference_mode"] = true;
  j["modules_to_save"] = nullptr;
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : model.lora_parameters()) tensors[kPrefix + name] = t;
  save_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), j.dump(2) + "\n");
}

namespace {

// adapter_config.json, parsed, with typed look-ups whose errors name the file and key.
struct AdapterJson {
  std::string path;
  json j;
  explicit AdapterJson(const std::string& dir) : path((fs::path(dir) / "adapter_config.json").string()) {
    TFM_CHECK(fs::exists(path), dir, "not an adapter directory: no adapter_config.json");
    try {
      j = json::parse(read_file(path));
    } catch (const json::exception& e) {
      fail(path, "malformed JSON: ", e.what());
    }
    TFM_CHECK(j.is_object(), path, "must be a JSON object");
  }
  template <class T>
  T get(const char* key, T fallback) const {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    try {
      return j[key].get<T>();
    } catch (const json::exception&) {
      fail(path, "key '", key, "' has the wrong type: ", j[key].dump());
    }
  }
  std::string type() const {
    const std::string t = get("peft_type", std::string());
    TFM_CHECK(t == "LORA" || t == "BOTTLENECK" || t == "PREFIX_TUNING", path, "peft_type '", t,
              "' is not supported (LORA, BOTTLENECK, PREFIX_TUNING)");
    return t;
  }
};

std::map<std::string, Tensor> read_adapter_tensors(const std::string& dir) {
  const std::string path = (fs::path(dir) / "adapter_model.safetensors").string();
  TFM_CHECK(fs::exists(path), dir, "no adapter_model.safetensors (adapter_model.bin is pickle, which can run code: "
            "convert it with PEFT's save_pretrained(safe_serialization=True))");
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : load_safetensors(path).tensors)
    out[name.rfind(kPrefix, 0) == 0 ? name.substr(std::string(kPrefix).size()) : name] = t;
  return out;
}

json common_fields(const Model& model, const char* type, const std::string& base_model) {
  json j;
  j["peft_type"] = type;
  j["task_type"] = task_type(model.config());
  j["base_model_name_or_path"] = base_model;
  j["inference_mode"] = true;
  return j;
}

void write_adapter(const std::string& dir, const json& j, const std::map<std::string, Tensor>& tensors) {
  fs::create_directories(dir);
  save_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  write_file_atomic((fs::path(dir) / "adapter_config.json").string(), j.dump(2) + "\n");
}

void save_bottleneck(const std::string& dir, const Model& model, const std::string& base_model) {
  const BottleneckConfig& c = model.bottleneck_config();
  json j = common_fields(model, "BOTTLENECK", base_model);
  j["placement"] = to_string(c.placement);
  j["mh_adapter"] = c.placement == BottleneckPlacement::houlsby;  // AdapterHub's names for the two places
  j["output_adapter"] = true;
  j["reduction_factor"] = static_cast<double>(model.config().d_model) / static_cast<double>(c.size(model.config().d_model));
  j["bottleneck_size"] = c.size(model.config().d_model);
  j["non_linearity"] = to_string(c.non_linearity);
  j["init_weights"] = "mam_adapter";  // down Kaiming-uniform, up zero
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : model.adapter_parameters()) tensors[kPrefix + name] = t;
  write_adapter(dir, j, tensors);
}

void load_bottleneck(const AdapterJson& a, const std::string& dir, Model& model) {
  BottleneckConfig c;
  if (a.j.contains("placement")) {
    c.placement = parse_bottleneck_placement(a.get("placement", std::string()), a.path);
  } else {  // AdapterHub's flags
    const bool mh = a.get("mh_adapter", false), out = a.get("output_adapter", true);
    TFM_CHECK(out, a.path, "output_adapter false is not supported (placements: houlsby, pfeiffer)");
    c.placement = mh ? BottleneckPlacement::houlsby : BottleneckPlacement::pfeiffer;
  }
  c.reduction_factor = a.get("reduction_factor", 16.0);
  c.bottleneck_size = a.get("bottleneck_size", std::int64_t{0});
  c.non_linearity = parse_bottleneck_activation(a.get("non_linearity", std::string("relu")), a.path);
  try {
    model.attach_bottleneck(c, read_adapter_tensors(dir));
  } catch (const Error& e) {
    fail((fs::path(dir) / "adapter_model.safetensors").string(), e.what());
  }
}

void save_prefix(const std::string& dir, const Model& model, const std::string& base_model) {
  const PrefixConfig& c = model.prefix_config();
  const ModelConfig& mc = model.config();
  json j = common_fields(model, "PREFIX_TUNING", base_model);
  const std::int64_t kv = mc.kv_heads() * mc.dim_head();
  j["num_virtual_tokens"] = c.num_virtual_tokens;
  j["token_dim"] = kv;
  j["num_layers"] = model.prefix_width() / (2 * kv);
  j["num_attention_heads"] = mc.kv_heads();
  j["num_transformer_submodules"] = 1;
  j["prefix_projection"] = c.prefix_projection;
  j["encoder_hidden_size"] = c.encoder_hidden_size > 0 ? c.encoder_hidden_size : mc.d_model;
  std::map<std::string, Tensor> tensors{{"prompt_embeddings", model.prefix_table()}};
  if (c.prefix_projection)
    for (const auto& [name, t] : model.adapter_parameters()) tensors[name] = t;
  write_adapter(dir, j, tensors);
}

void load_prefix(const AdapterJson& a, const std::string& dir, Model& model) {
  PrefixConfig c;
  TFM_CHECK(a.j.contains("num_virtual_tokens"), a.path, "has no 'num_virtual_tokens'");
  c.num_virtual_tokens = a.get("num_virtual_tokens", std::int64_t{0});
  c.encoder_hidden_size = a.get("encoder_hidden_size", std::int64_t{0});
  std::map<std::string, Tensor> t = read_adapter_tensors(dir);
  const std::string file = (fs::path(dir) / "adapter_model.safetensors").string();
  std::map<std::string, Tensor> use;
  if (a.get("prefix_projection", false) && t.count("prompt_encoder.transform.0.weight")) {
    c.prefix_projection = true;  // the training form, as saved for resuming: same prefixes
    for (auto& [name, v] : t)
      if (name != "prompt_embeddings") use[name] = v;
  } else {
    TFM_CHECK(t.count("prompt_embeddings"), file, "has no 'prompt_embeddings' tensor");
    use["prompt_encoder.embedding.weight"] = t.at("prompt_embeddings");
  }
  try {
    model.attach_prefix(c, use);
  } catch (const Error& e) {
    fail(file, e.what());
  }
}

}  // namespace

std::string read_adapter_type(const std::string& dir) { return AdapterJson(dir).type(); }

void save_adapter(const std::string& dir, const Model& model, const std::string& base_model) {
  if (model.has_lora()) return save_lora_adapter(dir, model, base_model);
  if (model.has_bottleneck()) return save_bottleneck(dir, model, base_model);
  if (model.has_prefix()) return save_prefix(dir, model, base_model);
  fail("adapter", "the model has no adapter to save");
}

void load_adapter(const std::string& dir, Model& model) {
  const AdapterJson a(dir);
  const std::string type = a.type();
  if (type == "LORA") return load_lora_adapter(dir, model);
  if (type == "BOTTLENECK") return load_bottleneck(a, dir, model);
  load_prefix(a, dir, model);
}

LoraConfig read_lora_adapter_config(const std::string& dir) {
  const AdapterJson a(dir);
  const std::string& path = a.path;
  const json& j = a.j;
  const auto get = [&](const char* key, auto fallback) { return a.get(key, fallback); };
  const std::string type = a.type();
  TFM_CHECK(type == "LORA", path, "peft_type '", type, "' is not a LoRA adapter");
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
