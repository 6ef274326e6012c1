// A model family: everything the engine knows about one model_type, declared in one file
// under src/models/families/ and listed in one registry (family.cpp). The rest of the engine
// asks the registry; no other code compares model_type strings. docs/design.md, "Adding a
// model family", walks through the fields.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/config_keys.h"
#include "models/layout.h"
#include "models/wiring.h"
#include "tfm/gguf.h"
#include "tfm/model_config.h"

namespace tfm {

// One tensor of a llama.cpp GGUF under the family's (Hugging Face) name, and the change its
// rows or layout need on the way (convert_hf_to_gguf.py's conventions).
struct GgufTensorName {
  std::string gguf, hf;
  enum Fix { none, rope_q, rope_k, transpose } fix = none;
};

// The sizes every llama.cpp architecture records under "<arch>.": read once by the loader.
struct GgufSizes {
  std::int64_t vocab = 0, d_model = 0, layers = 0, heads = 0, d_ff = 0, context = 0;
  bool tied = false;  // no output.weight: the head is the token embedding
};

// How a family is stored in llama.cpp's GGUF (llama.cpp's "general.architecture").
struct FamilyGguf {
  std::string arch;
  // The family's config.json keys from the file's metadata.
  std::function<nlohmann::json(const GgufFile&, const GgufSizes&)> config;
  std::function<std::vector<GgufTensorName>(const ModelConfig&)> tensors;
  // Refuses a model llama.cpp's architecture cannot express, else adds the metadata keys
  // beyond the common sizes (each named "<arch>.<key>").
  std::function<void(const ModelConfig&, const std::string& path, std::vector<std::pair<std::string, GgufValue>>&)>
      metadata;
};

struct Family {
  std::string model_type;
  ConfigSchema schema;
  // Named published sizes (`tfm info gpt2`, {"preset": "gpt2"}).
  std::vector<std::pair<std::string, ModelConfig>> presets;
  // Every parameter's checkpoint name and shape, in a fixed order (init draws by index).
  std::function<std::vector<ParamSpec>(const ModelConfig&)> parameters;
  // The modules of a model from its parameters (names as in `parameters`).
  std::function<void(Layout&, const ModelConfig&, const WireParams&)> wire;

  // Hugging Face hub files: the base-model prefix the task models add ("transformer.",
  // "model.", "bert."), and the stored tensors that are not parameters (buffers, tied copies,
  // heads this model lacks). An empty prefix with exact_hub_names: the engine's own names.
  std::string hub_prefix;
  bool exact_hub_names = false;
  std::function<bool(const ModelConfig&, const std::string& name)> hub_drops;

  // Initialisation: the normal std of weight `name` (0: Xavier-uniform); null: init_std.
  std::function<double(const ModelConfig&, const std::string& name)> init_std;
  // A parameter whose initial value is fixed rather than drawn (Whisper's sinusoidal encoder
  // positions), or undefined for the usual draw.
  std::function<Tensor(const ModelConfig&, const ParamSpec&)> fixed_init;
  std::string padded_embedding;  // the nn.Embedding(padding_idx) whose pad row starts at zero
  bool conv1d_linears = false;   // weights stored (in, out) (PEFT's fan_in_fan_out)

  std::optional<FamilyGguf> gguf;
  // An engine-scheme ("transformer") model that computes exactly this family's function:
  // its parameters under the family's names (writers that speak only hub families use it).
  std::function<bool(const ModelConfig&)> computes_as_engine;
  std::function<std::map<std::string, Tensor>(const ModelConfig&, const std::map<std::string, Tensor>&)> from_engine;
};

// The family of `model_type`; an unknown one is an error naming `where` and the known types.
const Family& model_family(const std::string& model_type, const std::string& where = "config");
// Every registered family, in registry order.
const std::vector<Family>& model_families();
// The family llama.cpp calls `arch`, or null.
const Family* gguf_family(const std::string& arch);

}  // namespace tfm
