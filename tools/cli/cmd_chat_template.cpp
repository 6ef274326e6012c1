// tfm chat-template: render a model's chat template over a conversation and print the prompt.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "tfm/chat_template.h"
#include "tfm/error.h"

namespace tfm::cli {

namespace {

struct ChatTemplateArgs {
  std::string template_file, model_dir, messages_file, bos, eos;
  bool add_generation_prompt = false;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in, "chat-template", "cannot read ", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void add_chat_template_command(CLI::App& app) {
  auto a = std::make_shared<ChatTemplateArgs>();
  auto* cmd = app.add_subcommand("chat-template", "Render a chat template over a conversation (prints the prompt)");
  auto* tmpl = cmd->add_option("--template", a->template_file, "Jinja chat template file");
  auto* model = cmd->add_option("--model", a->model_dir, "model directory: its tokenizer_config.json's chat_template "
                                                         "and tokens (ChatML when it has none)");
  tmpl->excludes(model);
  cmd->add_option("--messages", a->messages_file,
                  "JSON file: a list of {role, content} messages, or an object of template variables with \"messages\"")
      ->required();
  cmd->add_flag("--add-generation-prompt", a->add_generation_prompt, "end with the assistant's turn header");
  cmd->add_option("--bos", a->bos, "bos_token (default: the model's)");
  cmd->add_option("--eos", a->eos, "eos_token (default: the model's)");
  cmd->callback([a, tmpl, model] {
    TFM_CHECK(tmpl->count() + model->count() == 1, "chat-template", "give --template FILE or --model DIR");
    ChatTemplateConfig config;
    if (tmpl->count()) {
      config.template_text = read_file(a->template_file);
    } else {
      config = load_chat_template_config(a->model_dir);
      if (config.is_default) std::fprintf(stderr, "note: %s has no chat_template: using ChatML\n", a->model_dir.c_str());
    }
    nlohmann::ordered_json input;
    try {
      input = nlohmann::ordered_json::parse(read_file(a->messages_file));
    } catch (const nlohmann::json::exception& e) {
      fail("chat-template", a->messages_file, ": not valid JSON: ", e.what());
    }
    nlohmann::ordered_json context = nlohmann::ordered_json::object();
    if (input.is_array()) {
      context["messages"] = input;
    } else {
      TFM_CHECK(input.is_object() && input.contains("messages"), "chat-template", a->messages_file,
                ": expected a list of messages or an object with \"messages\"");
      context = input;
    }
    if (a->add_generation_prompt || !context.contains("add_generation_prompt"))
      context["add_generation_prompt"] = a->add_generation_prompt;
    if (!a->bos.empty() || !context.contains("bos_token")) context["bos_token"] = a->bos.empty() ? config.bos_token : a->bos;
    if (!a->eos.empty() || !context.contains("eos_token")) context["eos_token"] = a->eos.empty() ? config.eos_token : a->eos;
    std::cout << ChatTemplate(config.template_text).render(context);
    std::cout.flush();
  });
}

}  // namespace tfm::cli
