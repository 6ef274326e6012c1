// Hugging Face hub checkpoints onto the family's parameter names (parameter_specs): the hub
// stores a model's tensors with or without the base-model prefix (GPT2Model's "wte.weight"
// vs GPT2LMHeadModel's "transformer.wte.weight"), adds non-parameter buffers, and may or may
// not carry tied copies and the tensors of heads this model does not use. Older files still
// name LayerNorm parameters gamma and beta.
#include <set>

#include "tfm/model_config.h"

namespace tfm {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The prefix of the base model inside the task models (GPT2LMHeadModel.transformer, ...).
std::string base_prefix(const ModelConfig& c) {
  if (c.model_type == "gpt2") return "transformer.";
  if (c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2" || c.model_type == "marian")
    return "model.";
  if (c.model_type == "bert") return "bert.";
  return "";  // t5: T5Model and T5ForConditionalGeneration share unprefixed names
}

// Registered buffers the hub's files may carry: GPT-2's causal mask (attn.bias) and its fill
// value (attn.masked_bias), rotary frequencies, BERT's position ids, Marian's static
// sinusoidal table. None is a parameter; each is recomputed from the config.
bool is_buffer(const ModelConfig& c, const std::string& n) {
  if (c.model_type == "gpt2" && (ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias"))) return true;
  if (ends_with(n, ".rotary_emb.inv_freq")) return true;
  if (ends_with(n, "embeddings.position_ids")) return true;
  if (c.model_type == "marian" && ends_with(n, "embed_positions.weight")) return true;
  return false;
}

// Copies of a tied weight (the file may or may not hold them; transformers ties them after
// loading, so the stored copy is never read) and tensors of heads this model does not have.
bool is_tied_or_unused(const ModelConfig& c, const std::string& n) {
  if (c.tie_embeddings && n == "lm_head.weight") return true;
  if (c.model_type == "t5" && (n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight")) return true;
  if (c.model_type == "marian" &&
      (n == "model.encoder.embed_tokens.weight" || n == "model.decoder.embed_tokens.weight"))
    return true;
  if (c.model_type == "bert") {
    if (n == "cls.predictions.decoder.weight" || n == "cls.predictions.decoder.bias") return true;  // tied, = .bias
    if (starts_with(n, "cls.seq_relationship.")) return true;  // BertForPreTraining's next-sentence head
    if (c.head != HeadKind::masked_lm && starts_with(n, "cls.predictions.")) return true;
    if (c.head != HeadKind::classifier && starts_with(n, "bert.pooler.")) return true;
  }
  return false;
}

}  // namespace

std::map<std::string, Tensor> hub_checkpoint_names(const ModelConfig& c, std::map<std::string, Tensor> tensors) {
  if (c.model_type == "transformer") return tensors;  // the engine's own names, exactly
  std::set<std::string> wanted;
  for (const auto& s : parameter_specs(c)) wanted.insert(s.name);
  const std::string prefix = base_prefix(c);
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
    if (is_buffer(c, n) || is_tied_or_unused(c, n)) continue;
    out[stored] = std::move(t);  // unexpected: from_parameters names it as stored
  }
  return out;
}

}  // namespace tfm
