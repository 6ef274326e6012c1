// Fine-tuning a loaded model: its config with the training config's overrides, its weights
// copied into the new model, and which parameters train (init_from, lora, trainable).
#pragma once

#include <string>
#include <vector>

#include "tfm/model.h"
#include "tfm/train.h"

namespace tfm::train_detail {

// base's config.json with the keys of `overrides` (the training config's "model" object)
// replacing its own: a new head ("head", "num_labels", "id2label"), other dropout rates.
// drop_vocab_size: leave vocab_size to the (new) tokenizer.
std::string init_from_model_json(const ModelConfig& base, const std::string& overrides, bool drop_vocab_size = false);
// Copies every parameter of `from` whose name and shape `to` shares; returns a one-line
// report naming how many were loaded, which were initialised fresh and which were dropped.
// Names matching a `skip` pattern ("init_skip") are not loaded: they start fresh (a new head).
std::string copy_matching_parameters(const Model& from, Model& to, const std::vector<std::string>& skip = {});
// Parameters of `cfg` that a model of `base` does not supply (same name and shape), or that
// `skip` names: a new head.
std::vector<std::string> fresh_parameters(const ModelConfig& base, const ModelConfig& cfg,
                                          const std::vector<std::string>& skip = {});
// cfg.trainable's patterns when given; otherwise with an adapter (LoRA, bottleneck, prefix) its tensors and the fresh
// parameters, else everything.
bool is_trainable(const TrainConfig& cfg, const std::string& name, const std::vector<std::string>& fresh);

}  // namespace tfm::train_detail
