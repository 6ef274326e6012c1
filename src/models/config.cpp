// config.json parsing, validation, presets and writing.
#include <algorithm>
#include <nlohmann/json.hpp>

#include "models/family.h"
#include "tfm/error.h"
#include "tfm/model_config.h"
#include "tfm/safetensors.h"

namespace tfm {

using json = nlohmann::json;

ModelConfig model_preset(const std::string& name) {
  for (const Family& f : model_families())
    for (const auto& [preset, config] : f.presets)
      if (preset == name) return config;
  std::vector<std::string> names = model_preset_names();
  std::string allowed;
  for (const auto& n : names) allowed += (allowed.empty() ? "" : ", ") + n;
  const std::string closest = closest_name(name, names);
  fail("config", "unknown preset '", name, "'", closest.empty() ? "" : " (did you mean '" + closest + "'?)",
       "; allowed: ", allowed);
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const Family& f : model_families())
    for (const auto& [preset, config] : f.presets) names.push_back(preset);
  return names;
}

void validate_model_config(const ModelConfig& c, const std::string& where) {
  TFM_CHECK(!c.sparse_attention.enabled() || c.sliding_window == 0, where,
            "sparse_attention has its own window: set sparse_attention.window, not sliding_window (", c.sliding_window, ")");
  TFM_CHECK(c.head_dim > 0 || c.d_model % c.n_heads == 0, where, "d_model ", c.d_model,
            " is not divisible by n_heads ", c.n_heads, " (set head_dim to decouple them)");
  TFM_CHECK(c.n_heads % c.kv_heads() == 0, where, "n_heads ", c.n_heads, " is not a multiple of n_kv_heads ",
            c.kv_heads());
  TFM_CHECK(c.position != PositionKind::rope || c.dim_head() % 2 == 0, where, "rope needs an even head_dim, got ",
            c.dim_head());
  TFM_CHECK(c.position != PositionKind::sinusoidal || c.d_model % 2 == 0, where,
            "sinusoidal positions need an even d_model, got ", c.d_model);
  TFM_CHECK(c.architecture != Architecture::encoder_only || c.head != HeadKind::lm, where,
            "an encoder_only model cannot have an 'lm' head (use masked_lm, classifier or none)");
  TFM_CHECK(c.architecture == Architecture::encoder_only || c.type_vocab_size == 0, where,
            "type_vocab_size (token types) is for encoder_only models");
  TFM_CHECK(c.head != HeadKind::classifier || c.num_labels >= 1, where, "num_labels must be >= 1");
  TFM_CHECK(c.d_ff > 0, where, "d_ff must be > 0");
  if (c.retrieval.enabled()) {
    const RetrievalConfig& r = c.retrieval;
    TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, where,
              "retrieval (RETRO) is for decoder-only language models, got ", to_string(c.architecture));
    for (std::size_t i = 0; i < r.layers.size(); ++i) {
      TFM_CHECK(r.layers[i] < c.n_layers, where, "retrieval.layers names layer ", r.layers[i], "; the decoder has ",
                c.n_layers, " (0..", c.n_layers - 1, ")");
      for (std::size_t j = 0; j < i; ++j)
        TFM_CHECK(r.layers[j] != r.layers[i], where, "retrieval.layers lists layer ", r.layers[i], " twice");
    }
    TFM_CHECK(c.position != PositionKind::learned || r.length() <= c.max_positions, where, "retrieval.neighbour_length ",
              r.length(), " exceeds max_positions ", c.max_positions, " (the retrieval encoder's learned positions)");
    TFM_CHECK(!c.sparse_attention.enabled() && c.sliding_window == 0, where,
              "retrieval is not combined with sparse or windowed attention");
  }
  TFM_CHECK(c.id2label.empty() || static_cast<std::int64_t>(c.id2label.size()) == c.num_labels, where, "id2label has ",
            c.id2label.size(), " names but num_labels is ", c.num_labels);
}

void read_config_keys(ModelConfig& cfg, const json& j, const std::vector<ConfigKey>& keys,
                      const std::vector<std::string>& ignored, const std::string& what, const std::string& where,
                      const std::vector<std::string>& also_allowed) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (std::find(also_allowed.begin(), also_allowed.end(), key) != also_allowed.end()) continue;
    const ConfigKey* found = nullptr;
    for (const auto& k : keys)  // the first entry wins: a family's key before the common one
      if (found == nullptr && k.name == key) found = &k;
    if (found) {
      found->read(cfg, it.value(), where);
      continue;
    }
    if (std::find(ignored.begin(), ignored.end(), key) != ignored.end()) continue;
    std::string allowed;
    std::vector<std::string> names;
    for (const auto& k : keys) {
      allowed += (allowed.empty() ? "" : ", ") + k.name;
      names.push_back(k.name);
    }
    const std::string closest = closest_name(key, names);
    std::string listed;
    for (const auto& a : also_allowed) listed += a + ", ";
    fail(where, "unknown key '", key, "' for ", what, closest.empty() ? "" : " (did you mean '" + closest + "'?)",
         "; allowed: ", listed, allowed);
  }
}

ModelConfig parse_model_config(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), where, "a model config must be a JSON object");
  std::string type = j.contains("model_type") ? j["model_type"].is_string() ? j["model_type"].get<std::string>() : ""
                                              : "";
  TFM_CHECK(!j.contains("model_type") || j["model_type"].is_string(), where, "key 'model_type' must be a string");
  ModelConfig cfg;
  if (j.contains("preset")) {
    TFM_CHECK(j["preset"].is_string(), where, "key 'preset' must be a string");
    cfg = model_preset(j["preset"].get<std::string>());
    TFM_CHECK(type.empty() || type == cfg.model_type, where, "preset '", j["preset"].get<std::string>(),
              "' is model_type '", cfg.model_type, "', not '", type, "'");
    type = cfg.model_type;
  } else {
    if (type.empty()) type = "transformer";
    cfg = model_family(type, where).schema.base;
  }
  const ConfigSchema& schema = model_family(type, where).schema;
  read_config_keys(cfg, j, schema.keys, schema.ignored, "model_type '" + type + "'", where,
                   {"model_type", "preset"});
  cfg.model_type = type;
  if (schema.finish) schema.finish(cfg, j, where);
  if (cfg.d_ff == 0) cfg.d_ff = 4 * cfg.d_model;  // GPT-2's n_inner: null
  validate_model_config(cfg, where);
  return cfg;
}

ModelConfig load_model_config(const std::string& path) { return parse_model_config(read_file(path), path); }

std::string model_config_to_json(const ModelConfig& cfg) {
  const ConfigSchema& schema = model_family(cfg.model_type).schema;
  json j = json::object();
  j["model_type"] = cfg.model_type;
  std::vector<std::string> written;  // a name once: the first entry, the one parsing reads
  for (const auto& k : schema.keys) {
    if (std::find(written.begin(), written.end(), k.name) != written.end()) continue;
    written.push_back(k.name);
    if (k.write) {
      json v = k.write(cfg);
      if (v.is_discarded()) continue;  // a key written only when it is not the default
      if (!v.is_null() || (k.name != "id2label" && k.name != "sparse_attention" && k.name != "retrieval")) j[k.name] = std::move(v);  // optional keys left out when off
    }
  }
  return j.dump(2) + "\n";
}

}  // namespace tfm
