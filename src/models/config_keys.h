// The key sets config.json may use, one per model_type. Each key maps a JSON value onto a
// ModelConfig field, in both directions, so parsing and writing share one table.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tfm/model_config.h"

namespace tfm {

struct ConfigKey {
  std::string name;
  std::function<void(ModelConfig&, const nlohmann::json&, const std::string& where)> read;
  std::function<nlohmann::json(const ModelConfig&)> write;  // null: accepted, never written
};

struct ConfigSchema {
  std::string model_type;
  std::vector<ConfigKey> keys;
  std::vector<std::string> ignored;  // keys of the ecosystem's files that carry nothing for us
  ModelConfig base;                  // the fixed choices of the family (before keys apply)
  // Checks across keys, after all are read (the file's key order is not the schema's).
  std::function<void(ModelConfig&, const nlohmann::json& file, const std::string& where)> finish;
};

const ConfigSchema& config_schema(const std::string& model_type, const std::string& where);

}  // namespace tfm
