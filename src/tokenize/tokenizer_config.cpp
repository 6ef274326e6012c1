// tokenizer_config.json: special tokens (a string or an AddedToken object), add_bos/eos,
// model_max_length, chat_template (verbatim), added_tokens_decoder (used by the loaders of
// vocab.json/vocab.txt directories, which have no tokenizer.json to list them).
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm {

using nlohmann::json;

static std::string token_field(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return "";
  const json& v = j.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return "";
}

TokenizerConfig parse_tokenizer_config(std::string_view text, const std::string& where) {
  TokenizerConfig c;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), where, "top level is not an object");
  try {
    c.present = true;
    c.bos_token = token_field(j, "bos_token");
    c.eos_token = token_field(j, "eos_token");
    c.pad_token = token_field(j, "pad_token");
    c.unk_token = token_field(j, "unk_token");
    if (j.contains("add_bos_token") && j.at("add_bos_token").is_boolean()) c.add_bos_token = j.at("add_bos_token").get<bool>();
    if (j.contains("add_eos_token") && j.at("add_eos_token").is_boolean()) c.add_eos_token = j.at("add_eos_token").get<bool>();
    if (j.contains("model_max_length") && j.at("model_max_length").is_number()) {
      const double v = j.at("model_max_length").get<double>();
      c.model_max_length = v > 0 && v < 1e15 ? static_cast<std::int64_t>(v) : 0;
    }
    if (j.contains("chat_template")) {
      const json& t = j.at("chat_template");
      if (t.is_string()) {
        c.chat_template = t.get<std::string>();
      } else if (t.is_array()) {  // [{"name": "default", "template": ...}, ...]
        for (const auto& e : t)
          if (e.value("name", std::string()) == "default") c.chat_template = e.value("template", std::string());
        if (c.chat_template.empty() && !t.empty()) c.chat_template = t[0].value("template", std::string());
      }
    }
    c.tokenizer_class = j.value("tokenizer_class", std::string());
  } catch (const json::exception& e) {
    fail(where, "unexpected structure: ", e.what());
  }
  return c;
}

}  // namespace tfm
