// Tool calls (OpenAI's `tools`): the text formats models are trained to call functions in,
// read back into calls, and the grammars that make a model write one (docs/structured_output.md).
//
//   hermes:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>   (Qwen2.5, Qwen3,
//            Hermes; also the default for templates that do not render tools)
//   llama3:  {"name": "f", "parameters": {...}}                            (Llama-3.1 / 3.2 JSON)
//   mistral: [TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]         (Mistral v0.3)
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfm {

enum class ToolCallFormat { hermes, llama3, mistral };
const char* to_string(ToolCallFormat f);
// The format a chat template asks for (by the markers it writes); hermes when it names none.
ToolCallFormat tool_call_format(std::string_view chat_template);
// Does the template render the request's tools itself (reads a `tools` variable)?
bool template_renders_tools(std::string_view chat_template);

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object as text (OpenAI's function.arguments)
};
struct ParsedToolCalls {
  std::string content;           // the text before the calls (the whole text when there are none)
  std::vector<ToolCall> calls;   // empty: the text holds no well-formed call
};
ParsedToolCalls parse_tool_calls(ToolCallFormat f, std::string_view text);

// The text that opens a call (an "auto" tool choice lets the model write freely until it).
std::string tool_call_trigger(ToolCallFormat f);

// GBNF for one call (or, with `parallel`, one or more) of the functions in `tools_json`
// (OpenAI's tools array as JSON text), each call's arguments constrained by its function's
// JSON Schema `parameters`; `only` names the one function allowed ("" for any). Errors (a
// schema keyword not supported, an unknown name) name the tool.
std::string tool_call_gbnf(ToolCallFormat f, std::string_view tools_json, const std::string& only, bool parallel);

// A system message that describes the tools in Hermes's words, for templates that do not
// render tools themselves.
std::string hermes_tool_system_prompt(std::string_view tools_json);

}  // namespace tfm
