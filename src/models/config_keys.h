// The key sets config.json may use, one per model_type (each family file declares its own,
// src/models/families/). Each key maps a JSON value onto a ModelConfig field, in both
// directions, so parsing and writing share one table. The builders below are the kinds of
// key the families have in common.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/config_enums.h"
#include "tfm/model_config.h"

namespace tfm {

struct ConfigKey {
  std::string name;
  std::function<void(ModelConfig&, const nlohmann::json&, const std::string& where)> read;
  std::function<nlohmann::json(const ModelConfig&)> write;  // null: accepted, never written; a discarded value: not written
};

struct ConfigSchema {
  std::vector<ConfigKey> keys;
  std::vector<std::string> ignored;  // keys of the ecosystem's files that carry nothing for us
  ModelConfig base;                  // the fixed choices of the family (before keys apply)
  // Checks across keys, after all are read (the file's key order is not the schema's).
  std::function<void(ModelConfig&, const nlohmann::json& file, const std::string& where)> finish;
};

// Reads every key of the JSON object j into cfg through `keys`; keys in `ignored` carry nothing
// and those in `also_allowed` are the caller's. Any other key is an error naming it, `what`
// (the key set: "model_type 'gpt2'") and the nearest known name.
void read_config_keys(ModelConfig& cfg, const nlohmann::json& j, const std::vector<ConfigKey>& keys,
                      const std::vector<std::string>& ignored, const std::string& what, const std::string& where,
                      const std::vector<std::string>& also_allowed = {});

// Typed readers: the error names the key and the file.
std::int64_t read_int(const nlohmann::json& v, const std::string& key, const std::string& where, std::int64_t min);
std::string read_string(const nlohmann::json& v, const std::string& key, const std::string& where);

ConfigKey int_key(std::string name, std::int64_t ModelConfig::*f, std::int64_t min);
// An integer where JSON null means `null_value` (Hugging Face's "n_inner": null, ...).
ConfigKey nullable_int_key(std::string name, std::int64_t ModelConfig::*f, std::int64_t null_value, std::int64_t min);
ConfigKey double_key(std::string name, double ModelConfig::*f, double lo, double hi);
ConfigKey bool_key(std::string name, bool ModelConfig::*f);
// A string from a family-specific table (activation names, ...).
ConfigKey mapped_key(std::string name, FfnActivation ModelConfig::*f,
                     std::vector<std::pair<std::string, FfnActivation>> table);
ConfigKey mapped_key(std::string name, PositionKind ModelConfig::*f,
                     std::vector<std::pair<std::string, PositionKind>> table);
// "architectures": the task class names the hub's file records; each known name picks the
// head and any other is refused (its weights and outputs would not be what the engine runs).
ConfigKey architectures_key(std::vector<std::pair<std::string, HeadKind>> known);
// A key accepted with one value only (a structural switch the engine does not implement).
ConfigKey fixed_key(std::string name, nlohmann::json value);
// A key accepted and carrying nothing; listed before a common key of the same name, it shadows it.
ConfigKey inert_key(std::string name);
// An id, or (Llama 3 and later files) a list of ids: the first is the model's EOS.
ConfigKey eos_key();
// One dropout rate for residual branches and embeddings (BERT's hidden_dropout_prob, T5's
// dropout_rate, Marian's dropout).
ConfigKey shared_dropout_key(std::string name);
// Every one of the engine's enum keys ("norm", "position", ...) by field.
template <class E>
ConfigKey enum_key(std::string name, E ModelConfig::*f) {
  return {name,
          [f, name](ModelConfig& c, const nlohmann::json& v, const std::string& w) {
            c.*f = parse_enum<E>(read_string(v, name, w), name, w);
          },
          [f](const ModelConfig& c) { return nlohmann::json(to_string(c.*f)); }};
}
// Keys every family accepts: the engine's extensions for heads, context, sparse attention.
std::vector<ConfigKey> common_keys();
// RETRO's "retrieval" block (the retro family's schema).
ConfigKey retrieval_key();

}  // namespace tfm
