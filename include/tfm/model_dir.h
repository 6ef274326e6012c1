// The model directory every command reads: DIR/config.json (the ModelConfig, Hugging Face key
// names for the HF families), DIR/model.safetensors and DIR/tokenizer.json. Training adds
// DIR/checkpoint/ for resuming (train.h).
#pragma once

#include <map>
#include <string>

#include "tfm/model.h"
#include "tfm/model_config.h"
#include "tfm/tokenizer.h"

namespace tfm {

struct LoadedModel {
  ModelConfig config;
  Model model;
  Tokenizer tokenizer;
};

// Writes the three files, each atomically (temp file, fsync, rename). `metadata` goes into
// the safetensors header's __metadata__.
void save_model_dir(const std::string& dir, const Model& model, const Tokenizer& tok,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
// Loads the three files; throws naming the bad file (missing, malformed, or weights that do
// not match config.json: the first missing, unexpected or mis-shaped tensor).
LoadedModel load_model_dir(const std::string& dir);

}  // namespace tfm
