// Chat templates: a model's own `chat_template` (tokenizer_config.json, GGUF metadata) turns a
// conversation into the prompt it was trained on. The template is Jinja; this renders the
// subset chat templates use with the semantics of @huggingface/jinja, which transformers.js
// renders them with (docs/chat_templates.md lists the subset and the families tested).
//
//   tfm::ChatTemplate t(config.chat_template);          // parse once (syntax errors throw here)
//   nlohmann::ordered_json ctx = {
//       {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
//       {"add_generation_prompt", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
//   std::string prompt = t.render(ctx);                  // render many
//
// The context's keys become the template's variables; messages, add_generation_prompt,
// bos_token and eos_token are the usual ones, anything else a template reads (tools,
// date_string, enable_thinking...) is passed the same way. Key order is kept (ordered_json),
// as `tojson` and `items()` print in it. A template's raise_exception("msg") throws
// tfm::Error "[chat template] raise_exception: msg"; any other error names its line and column.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace tfm {

namespace chat {
struct Program;
}

class ChatTemplate {
 public:
  explicit ChatTemplate(std::string source);
  std::string render(const nlohmann::ordered_json& context) const;
  const std::string& source() const;
  // Rendering stops with an error past this many bytes (default 64 MiB): a template loops at
  // most over its inputs, but can still double a string in a loop.
  void set_max_output_bytes(std::size_t n) { max_output_bytes_ = n; }

 private:
  std::shared_ptr<const chat::Program> program_;
  std::size_t max_output_bytes_ = std::size_t{64} << 20;
};

// Parses and renders once.
std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& context);

// ChatML (<|im_start|>role\ncontent<|im_end|>\n ...): the template for models that ship none.
const std::string& chatml_template();

// A model's template and special tokens, as its tokenizer_config.json gives them.
struct ChatTemplateConfig {
  std::string template_text;
  std::string bos_token, eos_token;  // empty when the config has none
  bool is_default = false;           // no chat_template in the config: ChatML
};
// From a parsed tokenizer_config.json. chat_template may be a string or a list of
// {"name", "template"} entries (the one named "default" is used); tokens may be strings or
// {"content": ...} objects.
ChatTemplateConfig chat_template_config(const nlohmann::ordered_json& tokenizer_config);
// From a model directory's tokenizer_config.json (ChatML, no tokens, when the file is absent;
// an error when the directory is).
ChatTemplateConfig load_chat_template_config(const std::string& model_dir);

}  // namespace tfm
