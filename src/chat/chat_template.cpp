// tfm::ChatTemplate: parse once, render with a JSON context (include/tfm/chat_template.h).
#include "tfm/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "tfm/error.h"

namespace tfm {

ChatTemplate::ChatTemplate(std::string source)
    : program_(std::make_shared<const chat::Program>(chat::parse(source))) {}

const std::string& ChatTemplate::source() const { return program_->source; }

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  TFM_CHECK(context.is_object() || context.is_null(), "chat template", "the context must be a JSON object, got ",
            context.type_name());
  chat::Limits limits;
  limits.max_output_bytes = max_output_bytes_;
  chat::Interpreter interpreter(*program_, limits);
  chat::Env globals;
  chat::add_globals(interpreter, globals);
  if (context.is_object())
    for (const auto& [key, value] : context.items()) globals.set(key, chat::from_json(value));
  try {
    return interpreter.render(globals);
  } catch (const chat::TemplateRaised& e) {
    fail("chat template", "raise_exception: ", chat::one_line(e.message));
  }
}

std::string render_chat_template(const std::string& template_text, const nlohmann::ordered_json& context) {
  return ChatTemplate(template_text).render(context);
}

const std::string& chatml_template() {
  static const std::string t =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
      "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
  return t;
}

namespace {
std::string token_text(const nlohmann::ordered_json& config, const char* key) {
  if (!config.contains(key)) return {};
  const auto& t = config[key];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return {};
}
}  // namespace

ChatTemplateConfig chat_template_config(const nlohmann::ordered_json& config) {
  ChatTemplateConfig c;
  c.bos_token = token_text(config, "bos_token");
  c.eos_token = token_text(config, "eos_token");
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    c.template_text = chatml_template();
    c.is_default = true;
    return c;
  }
  if (it->is_string()) {
    c.template_text = it->get<std::string>();
    return c;
  }
  TFM_CHECK(it->is_array(), "chat template", "tokenizer_config.json: chat_template must be a string or a list, got ",
            it->type_name());
  for (const auto& entry : *it)
    if (entry.is_object() && entry.value("name", "") == "default" && entry.contains("template") &&
        entry["template"].is_string()) {
      c.template_text = entry["template"].get<std::string>();
      return c;
    }
  fail("chat template", "tokenizer_config.json: chat_template list has no entry named \"default\"");
}

ChatTemplateConfig load_chat_template_config(const std::string& model_dir) {
  TFM_CHECK(std::filesystem::is_directory(model_dir), "chat template", "no such model directory: ", model_dir);
  const std::filesystem::path path = std::filesystem::path(model_dir) / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) {
    ChatTemplateConfig c;
    c.template_text = chatml_template();
    c.is_default = true;
    return c;
  }
  std::ifstream in(path);
  TFM_CHECK(in, "chat template", "cannot read ", path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json config;
  try {
    config = nlohmann::ordered_json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    fail("chat template", path.string(), ": not valid JSON: ", e.what());
  }
  TFM_CHECK(config.is_object(), "chat template", path.string(), ": expected a JSON object");
  return chat_template_config(config);
}

}  // namespace tfm
