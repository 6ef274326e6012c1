// init_from, lora and trainable (fine_tune.h).
#include "train/fine_tune.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm::train_detail {
namespace {

using json = nlohmann::json;

bool glob(const std::string& pattern, const std::string& s) {
  LoraConfig c;  // lora_targets' '*' rule is the one patterns use everywhere
  c.target_modules = {pattern.find('*') == std::string::npos ? "*" + pattern + "*" : pattern};
  return lora_targets(c, s);
}

std::string list(const std::vector<std::string>& v, std::size_t most = 4) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < most; ++i) s += (i ? ", " : "") + v[i];
  if (v.size() > most) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

}  // namespace

std::string init_from_model_json(const ModelConfig& base, const std::string& overrides, bool drop_vocab_size) {
  json j = json::parse(model_config_to_json(base));
  if (drop_vocab_size) j.erase("vocab_size");
  const json o = json::parse(overrides);
  // A new head or label count makes the base's label names meaningless: the data names them.
  if ((o.contains("num_labels") || o.contains("head")) && !o.contains("id2label")) j.erase("id2label");
  for (const auto& [k, v] : o.items()) {
    TFM_CHECK(k != "model_type" || v == j["model_type"], "init_from", "the model's model_type is ", j["model_type"].dump(),
              ", the config asks for ", v.dump());
    j[k] = v;
  }
  return j.dump();
}

static bool skipped(const std::vector<std::string>& skip, const std::string& name) {
  return std::any_of(skip.begin(), skip.end(), [&](const std::string& p) { return glob(p, name); });
}

std::string copy_matching_parameters(const Model& from, Model& to, const std::vector<std::string>& skip) {
  NoGradGuard no_grad;
  std::size_t loaded = 0;
  std::vector<std::string> fresh, dropped;
  const auto& src = from.parameters();
  for (auto& [name, t] : to.parameters()) {
    auto it = src.find(name);
    if (it != src.end() && it->second.shape() == t.shape() && !skipped(skip, name)) {
      t.copy_(it->second);  // in place: the layers' handles keep pointing at it
      ++loaded;
    } else {
      fresh.push_back(name);
    }
  }
  for (const auto& [name, t] : src)
    if (to.parameters().count(name) == 0) dropped.push_back(name);
  std::string r = "init_from: " + std::to_string(loaded) + " tensors loaded";
  if (!fresh.empty()) r += "; initialised: " + list(fresh);
  if (!dropped.empty()) r += "; not used: " + list(dropped);
  return r;
}

std::vector<std::string> fresh_parameters(const ModelConfig& base, const ModelConfig& cfg,
                                          const std::vector<std::string>& skip) {
  const auto have = parameter_specs(base);
  std::vector<std::string> fresh;
  for (const auto& s : parameter_specs(cfg)) {
    const bool found = std::any_of(have.begin(), have.end(), [&](const ParamSpec& h) {
      return h.name == s.name && h.shape == s.shape;
    });
    if (!found || skipped(skip, s.name)) fresh.push_back(s.name);
  }
  return fresh;
}

bool is_trainable(const TrainConfig& cfg, const std::string& name, const std::vector<std::string>& fresh) {
  if (!cfg.trainable.empty())
    return std::any_of(cfg.trainable.begin(), cfg.trainable.end(), [&](const std::string& p) { return glob(p, name); });
  if (!cfg.lora && !cfg.bottleneck && !cfg.prefix) return true;
  if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos) return true;
  if (name.find("_adapter.adapter_") != std::string::npos || name.rfind("prompt_encoder.", 0) == 0) return true;
  return std::find(fresh.begin(), fresh.end(), name) != fresh.end();
}

}  // namespace tfm::train_detail
