// LoRA (Hu et al. 2021): a low-rank update B A added to chosen linear layers, y = W x +
// (alpha / r) B A dropout(x), with A (r, in) and B (out, r). Model::add_lora / attach_lora /
// merge_lora apply it (model.h); adapter.h reads and writes it in PEFT's file layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfm {

struct LoraConfig {
  std::int64_t r = 8;
  double alpha = 16.0;
  double dropout = 0.0;
  // Which linear modules get factors: a module name matches an entry equal to it or to its
  // last dotted components (PEFT's rule: "q_proj" matches "...self_attn.q_proj"), or an entry
  // with '*' wildcards matching the whole name ("*.layers.0.*").
  std::vector<std::string> target_modules;
  double scale() const { return alpha / static_cast<double>(r); }
};

// True when module `name` is one of cfg.target_modules by the rule above.
bool lora_targets(const LoraConfig& cfg, const std::string& name);

}  // namespace tfm
