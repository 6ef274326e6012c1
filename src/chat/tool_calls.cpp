#include "tfm/tool_calls.h"

#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/grammar.h"

namespace tfm {
namespace {

using Json = nlohmann::ordered_json;

std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// {"name": ..., "<args_key>": {...}} as a call; false when it is not one.
bool read_call(const Json& j, ToolCall& out) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  const char* keys[] = {"arguments", "parameters"};
  for (const char* k : keys) {
    if (!j.contains(k)) continue;
    const Json& a = j[k];
    if (a.is_object()) out.arguments = a.dump();
    else if (a.is_string() && Json::accept(a.get<std::string>())) out.arguments = a.get<std::string>();
    else return false;
    out.name = j["name"].get<std::string>();
    return true;
  }
  return false;
}

Json parse_or_null(const std::string& s) {
  try {
    return Json::parse(s);
  } catch (const Json::exception&) {
    return Json();
  }
}

}  // namespace

const char* to_string(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return "hermes";
    case ToolCallFormat::llama3: return "llama3";
    case ToolCallFormat::mistral: return "mistral";
  }
  return "?";
}

ToolCallFormat tool_call_format(std::string_view t) {
  if (t.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::hermes;
  if (t.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::mistral;
  if (t.find("<|python_tag|>") != std::string_view::npos || t.find("\"parameters\": dictionary of argument name") != std::string_view::npos)
    return ToolCallFormat::llama3;
  return ToolCallFormat::hermes;
}

bool template_renders_tools(std::string_view t) { return t.find("tools") != std::string_view::npos; }

std::string tool_call_trigger(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::hermes: return "<tool_call>";
    case ToolCallFormat::llama3: return "{\"name\"";
    case ToolCallFormat::mistral: return "[TOOL_CALLS]";
  }
  return "";
}

ParsedToolCalls parse_tool_calls(ToolCallFormat f, std::string_view text) {
  ParsedToolCalls out;
  out.content = std::string(text);
  std::vector<ToolCall> calls;
  if (f == ToolCallFormat::hermes) {
    const std::string open = "<tool_call>", close = "</tool_call>";
    const auto first = text.find(open);
    if (first == std::string_view::npos) return out;
    for (std::size_t at = first; at != std::string_view::npos; at = text.find(open, at)) {
      const std::size_t body = at + open.size();
      const std::size_t end = text.find(close, body);
      ToolCall c;
      if (!read_call(parse_or_null(trim(text.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body))), c))
        return out;  // not a well-formed call: the text stays content
      calls.push_back(std::move(c));
      if (end == std::string_view::npos) break;
      at = end + close.size();
    }
    out.content = trim(text.substr(0, first));
  } else {
    std::string body = trim(text);
    std::size_t start = 0;
    if (f == ToolCallFormat::mistral) {
      start = body.find("[TOOL_CALLS]");
      if (start != std::string::npos) body = trim(std::string_view(body).substr(start + 12));
      else if (body.empty() || body[0] != '[') return out;
    } else if (body.rfind("<|python_tag|>", 0) == 0) {
      body = trim(std::string_view(body).substr(14));
    }
    const Json j = parse_or_null(body);
    const Json list = j.is_array() ? j : Json::array({j});
    for (const Json& x : list) {
      ToolCall c;
      if (!read_call(x, c)) return out;
      calls.push_back(std::move(c));
    }
    out.content.clear();
  }
  out.calls = std::move(calls);
  return out;
}

std::string tool_call_gbnf(ToolCallFormat f, std::string_view tools_json, const std::string& only, bool parallel) {
  Json tools;
  try {
    tools = Json::parse(tools_json);
  } catch (const Json::exception& e) {
    fail("tools", "not JSON: ", e.what());
  }
  if (!tools.is_array() || tools.empty()) fail("tools", "must be a non-empty array");
  const char* args_key = f == ToolCallFormat::llama3 ? "parameters" : "arguments";
  Json any = Json::array();
  for (std::size_t i = 0; i < tools.size(); ++i) {
    const Json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object())
      fail(where, "must be {\"type\": \"function\", \"function\": {...}}");
    const Json& fn = t["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
      fail(where + ".function.name", "must be a non-empty string");
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    Json params = fn.contains("parameters") ? fn["parameters"] : Json{{"type", "object"}};
    // Checked here, one tool at a time, so an error names its tool.
    (void)json_schema_to_gbnf(params.dump(), where + ".function.parameters");
    any.push_back({{"type", "object"},
                   {"properties", {{"name", {{"const", name}}}, {args_key, params}}},
                   {"required", {"name", args_key}},
                   {"additionalProperties", false}});
  }
  if (any.empty()) fail("tool_choice", "names the function '", only, "', which is not among the tools");
  const std::string call = json_schema_to_gbnf(Json{{"anyOf", any}}.dump(), "tools", "tool-call-json");
  std::string root;
  switch (f) {
    case ToolCallFormat::hermes:
      root = "root ::= tool-call" + std::string(parallel ? " (\"\\n\" tool-call)*" : "") +
             "\ntool-call ::= \"<tool_call>\\n\" tool-call-json \"\\n</tool_call>\"\n";
      break;
    case ToolCallFormat::llama3:
      root = "root ::= tool-call-json\n";  // Llama 3.1 calls one function a message
      break;
    case ToolCallFormat::mistral:
      // [TOOL_CALLS] is a special token, which a grammar over text cannot write: the list alone.
      root = "root ::= \"[\" tool-call-json" + std::string(parallel ? " (\", \" tool-call-json)*" : "") + " \"]\"\n";
      break;
  }
  return root + call;
}

std::string hermes_tool_system_prompt(std::string_view tools_json) {
  Json tools = Json::parse(tools_json);
  std::string list;
  for (const Json& t : tools) {
    list += '\n';
    list += t.dump();
  }
  return "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
         "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" + list +
         "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
         "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
}

}  // namespace tfm
