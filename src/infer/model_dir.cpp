// The model directory: detect its format, read it into a ModelSource, build the Model (or one
// .gguf file, read by gguf_model.cpp).
#include "tfm/model_dir.h"

#include <filesystem>

#include "tfm/adapter.h"
#include "tfm/chunk_database.h"
#include "infer/model_source.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {
namespace fs = std::filesystem;
using infer_detail::ModelSource;

std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

// The one place that knows the on-disk formats. A new format adds a branch that returns its
// ModelSource (config, named tensors, generation defaults, optionally its own tokenizer);
// everything after is shared. `path` is a directory, or a single-file format's file.
ModelSource read_model_source(const std::string& path) {
  TFM_CHECK(fs::is_directory(path), "load", "model directory '", path, "' does not exist or is not a directory");
  return infer_detail::read_safetensors_dir(path);
}

Model build_model(ModelSource& src, bool defer_conversion = false) {
  // Tensors whose stored dtype is f32 keep viewing the file's (copy-on-write) mapping;
  // from_parameters converts the others (deferred: after the caller has split the model).
  try {
    auto tensors = hub_checkpoint_names(src.config, std::move(src.tensors));
    if (defer_conversion) return Model::from_parameters_deferred(src.config, std::move(tensors), src.compact);
    return Model::from_parameters(src.config, std::move(tensors), src.compact);
  } catch (const Error& e) {
    fail(src.weights_where, "does not match config.json: ", e.what());
  }
}

}  // namespace

void save_model_description(const std::string& dir, const ModelConfig& config, const Tokenizer& tok) {
  fs::create_directories(dir);
  write_file_atomic(join(dir, "config.json"), model_config_to_json(config));
  // An image model reads no text: it has no tokenizer unless one was given (CLIP's text tower).
  if (!config.reads_images() || tok.vocab_size() > 0) write_file_atomic(join(dir, "tokenizer.json"), tok.to_json());
}

void save_model_dir(const std::string& dir, const Model& model, const Tokenizer& tok,
                    const std::map<std::string, std::string>& metadata) {
  save_model_description(dir, model.config(), tok);
  if (!model.has_lora() && !model.has_bottleneck() && !model.has_prefix()) {
    // Compact weights (bf16, f16, q8_0, ...) as U8 bytes, their type in __metadata__
    // (docs/formats.md, "Quantized weights"; decode_compact_tensors reads them back).
    std::map<std::string, Tensor> tensors = model.parameters();
    std::map<std::string, std::string> meta = metadata;
    for (auto& [name, t] : tensors) {
      if (t.dtype() == DType::f32) continue;
      const Tensor c = t.is_contiguous() ? t : t.clone();
      meta["tfm.dtype." + name] = std::string(dtype_name(t.dtype())) + ":" + std::to_string(t.size(0)) + "," +
                                  std::to_string(t.size(1));
      const std::int64_t byte_offset = dtype_is_block(c.dtype()) ? 0 : c.offset() * static_cast<std::int64_t>(dtype_size(c.dtype()));
      t = Tensor::from_storage(c.storage(), {t.size(0), static_cast<std::int64_t>(c.nbytes()) / t.size(0)}, DType::u8,
                               byte_offset);
    }
    save_safetensors(join(dir, "model.safetensors"), tensors, meta);
    return;
  }
  TFM_CHECK(!model.has_compact_weights(), dir, "a model with an adapter is saved with f32 weights");
  // A model with an adapter (LoRA, bottleneck, prefix): the base weights as usual, the adapter
  // beside them in PEFT's layout, which load_model_dir attaches again.
  std::map<std::string, Tensor> base = model.parameters();
  for (const auto& [name, t] : model.adapter_parameters()) base.erase(name);
  save_safetensors(join(dir, "model.safetensors"), base, metadata);
  save_adapter(dir, model, dir);
}

LoadedWeights load_model_weights(const std::string& dir) {
  ModelSource src = read_model_source(dir);
  Model model = build_model(src);
  return {std::move(src.config), std::move(model), std::move(src.generation)};
}

// tokenizer.json when present, else the hub's older files (vocab.json + merges.txt, vocab.txt,
// a SentencePiece .model) with tokenizer_config.json's special tokens: load_tokenizer's rules.
Tokenizer load_dir_tokenizer(const std::string& dir) { return load_tokenizer(dir); }

std::map<std::string, StoredTensorType> stored_tensor_types(const std::string& dir) {
  const ModelSource src = read_model_source(dir);
  std::map<std::string, StoredTensorType> by;
  for (const auto& [name, t] : src.tensors) {
    StoredTensorType& s = by[dtype_name(t.dtype())];
    ++s.tensors;
    s.elements += t.numel();
    s.bytes += static_cast<std::int64_t>(t.nbytes());
  }
  return by;
}

LoadedModel load_model_dir(const std::string& dir, bool defer_conversion) {
  if (is_gguf_path(dir) && !fs::is_directory(dir)) return load_gguf_model(dir, nullptr, defer_conversion);  // -m model.gguf
  ModelSource src = read_model_source(dir);
  const bool adapter = fs::exists(join(dir, "adapter_config.json"));
  Model model = build_model(src, defer_conversion && !adapter);
  if (adapter) load_adapter(dir, model);  // saved with its adapter
  // RETRO: the chunk database it was trained with (tfm train writes it beside the weights).
  if (src.config.retrieval.enabled()) {
    TFM_CHECK(fs::exists(join(dir, kRetrievalDbFile)), dir, "a RETRO model reads neighbours from its chunk database, and ",
              kRetrievalDbFile, " is missing (tfm train writes it beside the weights)");
    model.set_retriever(ChunkDatabase::load(join(dir, kRetrievalDbFile), src.config.retrieval).retriever());
  }
  const bool text_free = src.config.reads_images() && !fs::exists(join(dir, "tokenizer.json"));
  Tokenizer tok = src.tokenizer ? std::move(*src.tokenizer) : text_free ? Tokenizer() : load_dir_tokenizer(dir);
  // (CLIP: the text tower's vocabulary; the image encoder's tokens are patches.)
  const std::int64_t vocab = src.config.text_tower.enabled() ? src.config.text_tower.vocab_size : src.config.vocab_size;
  TFM_CHECK(tok.vocab_size() <= vocab, dir, "the tokenizer has ", tok.vocab_size(), " tokens but the model's vocab_size is ",
            vocab);
  LoadedModel lm{std::move(src.config), std::move(model), std::move(tok), std::move(src.generation)};
  if (lm.config.reads_audio()) {
    lm.audio_features = AudioFeatureExtractor::load(dir, lm.config.num_mel_bins);
    TFM_CHECK(lm.audio_features->options().n_mels == lm.config.num_mel_bins, join(dir, "preprocessor_config.json"),
              "feature_size ", lm.audio_features->options().n_mels, " differs from the model's num_mel_bins ",
              lm.config.num_mel_bins);
    // Older Whisper files keep the token rules in config.json only.
    if (lm.generation.suppress_tokens.empty() && lm.generation.forced_decoder_ids.empty()) {
      const std::string cfg = join(dir, "config.json");
      const GenerationDefaults old = parse_generation_config(read_file(cfg), cfg);
      lm.generation.suppress_tokens = old.suppress_tokens;
      lm.generation.begin_suppress_tokens = old.begin_suppress_tokens;
      lm.generation.forced_decoder_ids = old.forced_decoder_ids;
    }
  } else if (fs::exists(join(dir, "preprocessor_config.json"))) {
    lm.image_processor = ImageProcessor::load(dir);
  }
  lm.sentence = SentencePipeline::load(dir, lm.config.d_model);
  return lm;
}

}  // namespace tfm
