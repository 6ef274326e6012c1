// The model directory: config.json + model.safetensors + tokenizer.json.
#include "tfm/model_dir.h"

#include <filesystem>

#include "tfm/adapter.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {
namespace fs = std::filesystem;
std::string join(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }
}  // namespace

void save_model_dir(const std::string& dir, const Model& model, const Tokenizer& tok,
                    const std::map<std::string, std::string>& metadata) {
  fs::create_directories(dir);
  write_file_atomic(join(dir, "config.json"), model_config_to_json(model.config()));
  write_file_atomic(join(dir, "tokenizer.json"), tok.to_json());
  if (!model.has_lora()) {
    save_safetensors(join(dir, "model.safetensors"), model.parameters(), metadata);
    return;
  }
  // A LoRA model: the base weights as usual, the factors beside them in PEFT's layout, which
  // load_model_dir attaches again.
  std::map<std::string, Tensor> base = model.parameters();
  for (const auto& [name, t] : model.lora_parameters()) base.erase(name);
  save_safetensors(join(dir, "model.safetensors"), base, metadata);
  save_lora_adapter(dir, model, dir);
}

LoadedModel load_model_dir(const std::string& dir) {
  TFM_CHECK(fs::is_directory(dir), "load", "model directory '", dir, "' does not exist or is not a directory");
  ModelConfig cfg = load_model_config(join(dir, "config.json"));
  const std::string wpath = join(dir, "model.safetensors");
  const SafetensorsFile w = load_safetensors(wpath);
  // Owned, writable copies: loaded tensors may view a read-only mapping of the file.
  std::map<std::string, Tensor> params;
  for (const auto& [k, t] : w.tensors) params[k] = t.clone();
  Model model = [&] {
    try {
      return Model::from_parameters(cfg, std::move(params));
    } catch (const Error& e) {
      fail(wpath, "does not match config.json: ", e.what());
    }
  }();
  if (fs::exists(join(dir, "adapter_config.json"))) load_lora_adapter(dir, model);  // saved with its LoRA
  Tokenizer tok = Tokenizer::load(join(dir, "tokenizer.json"));
  TFM_CHECK(tok.vocab_size() <= cfg.vocab_size, join(dir, "tokenizer.json"), "has ", tok.vocab_size(),
            " tokens but the model's vocab_size is ", cfg.vocab_size);
  return {std::move(cfg), std::move(model), std::move(tok)};
}

}  // namespace tfm
