// Chat templates: errors (one line, naming line and column), raise_exception, the limits that
// keep a hostile template from exhausting the stack or memory, tokenizer_config.json loading.
// Byte-exact rendering is checked against @huggingface/jinja in tests/chat_template_parity.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfm/chat_template.h"
#include "tfm/error.h"

namespace {

using nlohmann::ordered_json;

std::string error_of(const std::string& tmpl, const ordered_json& ctx = ordered_json::object()) {
  try {
    tfm::render_chat_template(tmpl, ctx);
  } catch (const tfm::Error& e) {
    return e.what();
  }
  return "";
}

void expect_one_line_error(const std::string& tmpl, const std::string& part) {
  const std::string e = error_of(tmpl);
  EXPECT_NE(e.find(part), std::string::npos) << "template: " << tmpl << "\nerror: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_EQ(e.rfind("[chat template] ", 0), 0u) << e;
}

TEST(ChatTemplate, SyntaxErrorsNameLineAndColumn) {
  expect_one_line_error("Hello\n{{ x + }}", "line 2, column 8");
  expect_one_line_error("{% frobnicate %}", "unknown statement 'frobnicate'");
  expect_one_line_error("{% if x %}never closed", "missing {% elif %} or {% else %} or {% endif %}");
  expect_one_line_error("{% for x in y %}{% endif %}", "line 1");
  expect_one_line_error("{{ 'unterminated }}", "Unexpected end of input");
  expect_one_line_error("{{ a ! b }}", "line 1, column 6: Unexpected character: !");
  expect_one_line_error("{# never closed", "Missing end of comment tag");
  expect_one_line_error("{{ x[] }}", "expected an index or a slice");
}

TEST(ChatTemplate, RuntimeErrorsNameWhere) {
  ordered_json ctx = {{"x", "text"}};
  std::string e;
  try {
    tfm::render_chat_template("ok\n  {{ x | nope }}", ctx);
  } catch (const tfm::Error& err) {
    e = err.what();
  }
  EXPECT_EQ(e, "[chat template] line 2, column 6: Unknown StringValue filter: nope");
  expect_one_line_error("{{ 1 // 0 }}", "division or modulo by zero");
  expect_one_line_error("{% set x.y = 1 %}", "cannot assign attribute on non-namespace object");
}

TEST(ChatTemplate, RaiseExceptionIsTheTemplatesMessage) {
  const ordered_json ctx = {{"messages", ordered_json::array({{{"role", "system"}, {"content", "s"}}})}};
  try {
    tfm::render_chat_template("{% if messages[0].role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}",
                              ctx);
    FAIL() << "no error";
  } catch (const tfm::Error& e) {
    EXPECT_STREQ(e.what(), "[chat template] raise_exception: System role not supported");
  }
}

TEST(ChatTemplate, RecursionAndNestingAreBounded) {
  expect_one_line_error("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "deeper than");
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  expect_one_line_error(deep, "nested too deeply");
  expect_one_line_error("{{ " + std::string(5000, '[') + " }}", "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  expect_one_line_error(ifs, "blocks nested too deeply");
}

TEST(ChatTemplate, OutputAndListsAreBounded) {
  tfm::ChatTemplate doubling("{% set s = 'x' %}{% for i in range(40) %}{% set s = s ~ s %}{% endfor %}{{ s }}");
  doubling.set_max_output_bytes(1 << 20);
  EXPECT_THROW(
      try { doubling.render(ordered_json::object()); } catch (const tfm::Error& e) {
        EXPECT_NE(std::string(e.what()).find("longer than the output limit"), std::string::npos) << e.what();
        throw;
      },
      tfm::Error);
  tfm::ChatTemplate printing("{% for i in range(1000) %}{{ '0123456789' }}{% endfor %}");
  printing.set_max_output_bytes(5000);
  EXPECT_THROW(printing.render(ordered_json::object()), tfm::Error);
  printing.set_max_output_bytes(10000);
  EXPECT_EQ(printing.render(ordered_json::object()).size(), 10000u);
  expect_one_line_error("{% set l = [1] %}{% for i in range(40) %}{% set l = l + l %}{% endfor %}", "list longer");
  expect_one_line_error("{% for i in range(100000000) %}{% endfor %}", "range() longer than the list limit");
}

TEST(ChatTemplate, ParsedOnceRenderedMany) {
  const tfm::ChatTemplate t(tfm::chatml_template());
  for (const char* who : {"Ann", "Bob"}) {
    const ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", who}}}}, {"add_generation_prompt", true}};
    EXPECT_EQ(t.render(ctx), std::string("<|im_start|>user\n") + who + "<|im_end|>\n<|im_start|>assistant\n");
  }
  EXPECT_NE(error_of(tfm::chatml_template(), ordered_json::array()).find("must be a JSON object"), std::string::npos);
}

TEST(ChatTemplate, InvalidUtf8InContentDoesNotBreakStringFunctions) {
  const ordered_json ctx = {{"s", std::string("\xff\xe2\x82 \xf0\x9f x\xc3")}};
  const std::string out = tfm::render_chat_template(
      "{{ s | trim }}|{{ s.title() }}|{{ s.split() | length }}|{{ s[::-1] | length }}|{{ s | tojson(ensure_ascii=true) }}",
      ctx);
  EXPECT_FALSE(out.empty());
}

TEST(ChatTemplate, ConfigGivesTemplateAndTokens) {
  auto c = tfm::chat_template_config(ordered_json{{"chat_template", "{{ bos_token }}"},
                                                  {"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                                                  {"eos_token", "</s>"}});
  EXPECT_EQ(c.template_text, "{{ bos_token }}");
  EXPECT_EQ(c.bos_token, "<s>");
  EXPECT_EQ(c.eos_token, "</s>");
  EXPECT_FALSE(c.is_default);
  c = tfm::chat_template_config(ordered_json{
      {"chat_template", {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}});
  EXPECT_EQ(c.template_text, "D");
  c = tfm::chat_template_config(ordered_json::object());
  EXPECT_TRUE(c.is_default);
  EXPECT_EQ(c.template_text, tfm::chatml_template());
  EXPECT_THROW(tfm::chat_template_config(ordered_json{{"chat_template", {{{"name", "x"}, {"template", "T"}}}}}),
               tfm::Error);
  EXPECT_THROW(tfm::chat_template_config(ordered_json{{"chat_template", 3}}), tfm::Error);
}

TEST(ChatTemplate, ModelDirectoryConfig) {
  const auto dir = std::filesystem::temp_directory_path() / "tfm_chat_template_test";
  std::filesystem::create_directories(dir);
  EXPECT_TRUE(tfm::load_chat_template_config(dir.string()).is_default);  // no tokenizer_config.json: ChatML
  std::ofstream(dir / "tokenizer_config.json") << R"({"chat_template": "{{ messages | length }}", "eos_token": "E"})";
  const auto c = tfm::load_chat_template_config(dir.string());
  EXPECT_EQ(c.template_text, "{{ messages | length }}");
  EXPECT_EQ(c.eos_token, "E");
  std::ofstream(dir / "tokenizer_config.json") << "{not json";
  EXPECT_THROW(tfm::load_chat_template_config(dir.string()), tfm::Error);
  std::filesystem::remove_all(dir);
  EXPECT_THROW(tfm::load_chat_template_config(dir.string()), tfm::Error);  // no such directory
}

}  // namespace

namespace {

// Mutated real templates (bytes dropped, duplicated, replaced by syntax characters) must
// render or fail with a tfm::Error: never crash, hang or leak (this also runs under ASan).
TEST(ChatTemplate, MutatedTemplatesFailCleanly) {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::filesystem::path dir = std::filesystem::path(src ? src : ".") / "data" / "chat_templates";
  std::vector<std::string> seeds;
  for (const char* f : {"llama-2-chat.jinja", "mistral-7b-instruct-v0.3.jinja", "llama-3.1-8b-instruct.jinja"}) {
    std::ifstream in(dir / f);
    seeds.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ASSERT_FALSE(seeds.back().empty()) << (dir / f);
  }
  const ordered_json ctx = {
      {"messages", {{{"role", "system"}, {"content", "s"}}, {{"role", "user"}, {"content", "u"}}}},
      {"tools", ordered_json::array({{{"function", {{"name", "f"}}}}})},
      {"add_generation_prompt", true}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
  const std::string syntax = "{}%#-|()[].,:'\"\\~+*/ \n";
  std::mt19937 rng(7);
  int rendered = 0, failed = 0;
  for (int i = 0; i < 600; ++i) {
    std::string t = seeds[static_cast<std::size_t>(i) % seeds.size()];
    for (int m = 0; m < 3; ++m) {
      const std::size_t at = rng() % t.size();
      switch (rng() % 3) {
        case 0: t.erase(at, 1 + rng() % 8); break;
        case 1: t.insert(at, t.substr(at, 1 + rng() % 16)); break;
        default: t[at] = syntax[rng() % syntax.size()];
      }
      if (t.empty()) t.push_back('x');
    }
    try {
      tfm::ChatTemplate tmpl(t);
      tmpl.set_max_output_bytes(1 << 20);
      tmpl.render(ctx);
      ++rendered;
    } catch (const tfm::Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(rendered, 0);
}

}  // namespace
