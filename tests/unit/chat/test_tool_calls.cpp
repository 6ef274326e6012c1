// Tool calls: the formats read back into calls, and the grammars that make a model write one.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/grammar.h"
#include "tfm/tool_calls.h"
#include "unit/grammar/byte_vocab.h"

namespace tfm {
namespace {

const char* kTools = R"([{"type": "function", "function": {"name": "add", "parameters": {"type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now"}}])";

TEST(ToolCalls, FormatFromTheTemplate) {
  EXPECT_EQ(tool_call_format("{% if tools %}<tools>{{ tools }}</tools> ... <tool_call>{% endif %}"), ToolCallFormat::hermes);
  EXPECT_EQ(tool_call_format("{{ '[TOOL_CALLS] ' }}"), ToolCallFormat::mistral);
  EXPECT_EQ(tool_call_format("<|python_tag|>{{ x }}"), ToolCallFormat::llama3);
  EXPECT_EQ(tool_call_format("{{ messages }}"), ToolCallFormat::hermes);
  EXPECT_TRUE(template_renders_tools("{% for t in tools %}"));
  EXPECT_FALSE(template_renders_tools("{{ messages }}"));
}

TEST(ToolCalls, ParseEachFormat) {
  ParsedToolCalls p = parse_tool_calls(ToolCallFormat::hermes,
                                       "Let me see.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n</tool_call>\n"
                                       "<tool_call>{\"name\": \"now\", \"arguments\": \"{}\"}</tool_call>");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.content, "Let me see.");
  EXPECT_EQ(p.calls[0].name, "add");
  EXPECT_EQ(p.calls[0].arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(p.calls[1].arguments, "{}");
  p = parse_tool_calls(ToolCallFormat::llama3, "<|python_tag|>{\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, "");
  p = parse_tool_calls(ToolCallFormat::mistral, "[TOOL_CALLS] [{\"name\": \"now\", \"arguments\": {}}, {\"name\": \"add\", \"arguments\": {\"a\": 3, \"b\": 4}}]");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].arguments, R"({"a":3,"b":4})");
  // Not a call: the text stays content, untouched.
  for (const char* text : {"<tool_call>{\"name\": 5}</tool_call>", "<tool_call>not json</tool_call>", "plain words"}) {
    p = parse_tool_calls(ToolCallFormat::hermes, text);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
}

TEST(ToolCalls, GrammarWritesOnlyCallsOfTheTools) {
  const Grammar any = Grammar::parse(tool_call_gbnf(ToolCallFormat::hermes, kTools, "", true));
  EXPECT_TRUE(testing::accepts(any, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":-2}}\n</tool_call>"));
  EXPECT_TRUE(testing::accepts(any, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>\n"
                                    "<tool_call>\n{\"name\":\"now\",\"arguments\":{\"x\":[1]}}\n</tool_call>"));
  EXPECT_FALSE(testing::accepts(any, "<tool_call>\n{\"name\":\"sub\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_FALSE(testing::accepts(any, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1}}\n</tool_call>"));  // b required
  const Grammar one = Grammar::parse(tool_call_gbnf(ToolCallFormat::hermes, kTools, "now", false));
  EXPECT_TRUE(testing::accepts(one, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_FALSE(testing::accepts(one, "<tool_call>\n{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2}}\n</tool_call>"));
  EXPECT_FALSE(testing::accepts(one, "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>\n"
                                     "<tool_call>\n{\"name\":\"now\",\"arguments\":{}}\n</tool_call>"));  // not parallel
  const Grammar llama = Grammar::parse(tool_call_gbnf(ToolCallFormat::llama3, kTools, "add", false));
  EXPECT_TRUE(testing::accepts(llama, "{\"name\": \"add\", \"parameters\": {\"a\": 7, \"b\": 8}}"));
  const Grammar mistral = Grammar::parse(tool_call_gbnf(ToolCallFormat::mistral, kTools, "", true));
  EXPECT_TRUE(testing::accepts(mistral, "[{\"name\":\"now\",\"arguments\":{}}, {\"name\":\"now\",\"arguments\":{}}]"));
}

TEST(ToolCalls, ErrorsNameTheTool) {
  auto message = [](const char* tools, const std::string& only = "") {
    try {
      tool_call_gbnf(ToolCallFormat::hermes, tools, only, true);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "integer", "minimum": 1}}}])")
                .find("tools[0].function.parameters"), std::string::npos);
  EXPECT_NE(message(kTools, "missing").find("'missing'"), std::string::npos);
  EXPECT_NE(message(R"([{"type": "retrieval"}])").find("tools[0]"), std::string::npos);
  EXPECT_NE(message("[]").find("non-empty"), std::string::npos);
}

}  // namespace
}  // namespace tfm
