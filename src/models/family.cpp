// The registry of model families: the one list of every model_type the engine knows.
#include "models/family.h"

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {

const std::vector<Family>& model_families() {
  static const std::vector<Family> all = [] {
    std::vector<Family> f;
    f.push_back(transformer_family());
    f.push_back(gpt2_family());
    for (const char* t : {"llama", "mistral", "qwen2"}) f.push_back(llama_family(t));
    f.push_back(bert_family());
    f.push_back(t5_family());
    f.push_back(marian_family());
    f.push_back(vit_family());
    f.push_back(deit_family());
    f.push_back(whisper_family());
    f.push_back(retro_family());
    f.push_back(clip_family());
    return f;
  }();
  return all;
}

const Family& model_family(const std::string& model_type, const std::string& where) {
  std::string allowed;
  for (const Family& f : model_families()) {
    if (f.model_type == model_type) return f;
    allowed += (allowed.empty() ? "" : ", ") + f.model_type;
  }
  fail(where, "key 'model_type': unknown value '", model_type, "' (allowed: ", allowed, ")");
}

const Family* gguf_family(const std::string& arch) {
  for (const Family& f : model_families())
    if (f.gguf && f.gguf->arch == arch) return &f;
  return nullptr;
}

}  // namespace tfm
