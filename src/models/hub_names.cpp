// Hugging Face hub checkpoints onto the family's parameter names (parameter_specs): the hub
// stores a model's tensors with or without the base-model prefix (GPT2Model's "wte.weight"
// vs GPT2LMHeadModel's "transformer.wte.weight"), adds non-parameter buffers, and may or may
// not carry tied copies and the tensors of heads this model does not use (each family lists
// its own: Family::hub_drops). Older files still name LayerNorm parameters gamma and beta.
#include <set>

#include "models/families/families.h"
#include "tfm/model_config.h"

namespace tfm {
namespace {

// What any family's file may hold besides its parameters: rotary frequencies and BERT-style
// position ids (buffers recomputed from the config), and the copy of a tied head.
bool dropped_by_every_family(const ModelConfig& c, const std::string& n) {
  return ends_with(n, ".rotary_emb.inv_freq") || ends_with(n, "embeddings.position_ids") ||
         (c.tie_embeddings && n == "lm_head.weight");
}

}  // namespace

std::map<std::string, Tensor> hub_checkpoint_names(const ModelConfig& c, std::map<std::string, Tensor> tensors) {
  const Family& family = model_family(c.model_type);
  if (family.exact_hub_names) return tensors;  // the engine's own names, exactly
  std::set<std::string> wanted;
  for (const auto& s : family.parameters(c)) wanted.insert(s.name);
  const std::string& prefix = family.hub_prefix;
  std::map<std::string, Tensor> out;
  for (auto& [stored, t] : tensors) {
    std::string n = stored;
    // TensorFlow-era names (bert-base-uncased's file): LayerNorm.gamma/beta, which
    // transformers renames to weight/bias when loading.
    if (ends_with(n, ".gamma")) n = n.substr(0, n.size() - 6) + ".weight";
    else if (ends_with(n, ".beta")) n = n.substr(0, n.size() - 5) + ".bias";
    if (!wanted.count(n) && !prefix.empty() && wanted.count(prefix + n)) n = prefix + n;
    else if (!wanted.count(n) && !prefix.empty() && !starts_with(n, prefix) && !starts_with(n, "lm_head.") &&
             !starts_with(n, "cls.") && !starts_with(n, "classifier.") && n != "final_logits_bias")
      n = prefix + n;  // an unprefixed buffer or head tensor: judge it by its full name
    if (wanted.count(n)) {
      out[n] = std::move(t);
      continue;
    }
    if (dropped_by_every_family(c, n) || (family.hub_drops && family.hub_drops(c, n))) continue;
    out[stored] = std::move(t);  // unexpected: from_parameters names it as stored
  }
  return out;
}

}  // namespace tfm
