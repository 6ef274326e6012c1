// The model directory every command reads. Two layouts are accepted (docs/formats.md):
//   - the engine's: DIR/config.json (the ModelConfig, Hugging Face key names for the HF
//     families), DIR/model.safetensors and DIR/tokenizer.json; training adds DIR/checkpoint/
//     for resuming (train.h);
//   - a Hugging Face hub directory as published: config.json, model.safetensors or sharded
//     model-0000k-of-0000N.safetensors + model.safetensors.index.json, generation_config.json,
//     tokenizer files. Names with or without the base-model prefix, known buffers and tied
//     copies are mapped onto the family's names (hub_checkpoint_names in model_config.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfm/audio.h"
#include "tfm/model.h"
#include "tfm/image.h"
#include "tfm/model_config.h"
#include "tfm/tokenizer.h"
#include "tfm/sentence_embed.h"

namespace tfm {

// Decoding defaults a model directory carries (generation_config.json on the hub). Unset
// fields leave the command's own defaults; command-line flags override all of them.
struct GenerationDefaults {
  bool from_file = false;                       // the directory has generation_config.json
  std::vector<std::int64_t> eos_token_ids;      // every id that ends a sequence
  std::optional<std::int64_t> max_length;       // prompt + new tokens (HF's convention)
  std::optional<std::int64_t> max_new_tokens;
  std::optional<bool> do_sample;
  std::optional<double> temperature, top_p, repetition_penalty, length_penalty;
  std::optional<std::int64_t> top_k, num_beams, decoder_start_token_id, pad_token_id, bos_token_id;
  std::optional<bool> early_stopping;
  // Token rules of speech models (Whisper's generation_config.json; older files keep the
  // first three in config.json): tokens never generated, tokens not generated first, ids
  // forced at positions after the start token ([position, id] pairs), the ids that turn
  // timestamps off and name languages and tasks, and how late the first timestamp may be.
  std::vector<std::int64_t> suppress_tokens, begin_suppress_tokens;
  std::vector<std::pair<std::int64_t, std::int64_t>> forced_decoder_ids;
  std::optional<std::int64_t> no_timestamps_token_id, max_initial_timestamp_index;
  std::optional<bool> is_multilingual;
  std::map<std::string, std::int64_t> lang_to_id, task_to_id;
  // The cross-attention heads whose weights align text with audio ([layer, head] pairs:
  // generation_config.json's alignment_heads), for word timestamps; empty: not given.
  std::vector<std::pair<std::int64_t, std::int64_t>> alignment_heads;
};

struct LoadedModel {
  ModelConfig config;
  Model model;
  Tokenizer tokenizer;  // empty (vocab_size 0) for an image model without text
  GenerationDefaults generation = {};
  std::optional<ImageProcessor> image_processor = {};  // DIR/preprocessor_config.json, when there
  std::optional<AudioFeatureExtractor> audio_features = {};  // a speech model's (preprocessor_config.json or Whisper's)
  std::optional<SentencePipeline> sentence = {};  // sentence-transformers' modules.json pipeline, when there
};

// The weights side of a directory, without its tokenizer (for callers that feed ids).
struct LoadedWeights {
  ModelConfig config;
  Model model;
  GenerationDefaults generation;
};

// Writes the three files (an image model without a tokenizer: no tokenizer.json), each atomically (temp file, fsync, rename). `metadata` goes into
// the safetensors header's __metadata__.
void save_model_dir(const std::string& dir, const Model& model, const Tokenizer& tok,
                    const std::map<std::string, std::string>& metadata = {{"format", "pt"}});
// config.json and tokenizer.json alone (save_model_dir's first two; a sharded checkpoint's
// ranks write the weights).
void save_model_description(const std::string& dir, const ModelConfig& config, const Tokenizer& tok);
// Loads a directory of either layout; throws naming the bad file (missing, malformed, or
// weights that do not match config.json: the first missing, unexpected or mis-shaped tensor).
// defer_conversion: bf16/f16 weights that would become f32 stay as stored until the caller
// splits the model and calls Model::convert_deferred_weights (load_model does, under tensor or
// pipeline parallelism), so a rank converts only its part (a directory with an adapter: now).
LoadedModel load_model_dir(const std::string& dir, bool defer_conversion = false);

// The stored tensors of a model directory (safetensors, single or sharded) by dtype, from the
// mapped files without converting anything: what `tfm info -m DIR` lists.
struct StoredTensorType {
  std::int64_t tensors = 0, elements = 0, bytes = 0;
};
std::map<std::string, StoredTensorType> stored_tensor_types(const std::string& dir);
LoadedWeights load_model_weights(const std::string& dir);
// The tokenizer of a model directory (tokenizer.json today; one call so every format's
// tokenizer files plug in here).
Tokenizer load_dir_tokenizer(const std::string& dir);
// The decoding defaults of generation_config.json text (`where` names it in errors).
GenerationDefaults parse_generation_config(const std::string& json_text, const std::string& where);

}  // namespace tfm
