// JSON Schema to GBNF. The grammar generates a SUBSET of the schema's instances, never
// anything outside it: where the whole set cannot be written as a grammar cheaply, the
// subset is the one docs/structured_output.md states (properties in declared order, declared
// properties only, bounded digits and whitespace). A keyword that constrains instances and is
// not handled is an error naming it and its place; annotations (title, description, ...) are
// skipped.
#include <cctype>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/regex_gbnf.h"
#include "tfm/error.h"
#include "tfm/grammar.h"

namespace tfm {
namespace {

using json = nlohmann::ordered_json;  // keeps "properties" in the order the schema gives

const std::set<std::string> kAnnotations = {"title", "description", "$schema", "$id", "$comment", "default", "examples",
                                            "deprecated", "readOnly", "writeOnly", "$anchor"};
const std::set<std::string> kHandled = {"type", "properties", "required", "additionalProperties", "enum", "const", "items",
                                        "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs",
                                        "definitions", "minLength", "maxLength", "format", "pattern", "uniqueItems"};

// Shared pieces. Whitespace is bounded so an untrained model cannot write spaces forever.
const char* kBase = R"(ws ::= | " " | "\n" [ \t]{0,16}
json-char ::= [^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" json-u4)
json-u4 ::= [0-9a-cA-Ce-fE-F] json-hex{3} | [dD] [0-7] json-hex{2}
json-hex ::= [0-9a-fA-F]
json-string ::= "\"" json-char* "\""
json-int ::= "-"? ([0-9] | [1-9] [0-9]{1,15})
json-number ::= json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?
json-bool ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-bool | json-null
json-object ::= "{" ws (json-string ws ":" ws json-value (ws "," ws json-string ws ":" ws json-value)*)? ws "}"
json-array ::= "[" ws (json-value (ws "," ws json-value)*)? ws "]"
)";

const std::map<std::string, std::string> kFormats = {
    {"date", "format-date ::= [0-9]{4} \"-\" ((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" format-d31 | "
             "(\"04\" | \"06\" | \"09\" | \"11\") \"-\" format-d30 | \"02-\" format-d28)\n"
             "format-d28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
             "format-d30 ::= format-d28 | \"29\" | \"30\"\n"
             "format-d31 ::= format-d30 | \"31\"\n"},
    {"time", "format-time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
             "(\"Z\" | [-+] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"},
    {"date-time", "format-date-time ::= format-date \"T\" format-time\n"},
    {"uuid", "format-uuid ::= format-x{8} \"-\" format-x{4} \"-\" format-x{4} \"-\" format-x{4} \"-\" format-x{12}\n"
             "format-x ::= [0-9a-f]\n"},
    {"email", "format-email ::= [a-z0-9]{1,24} (\".\" [a-z0-9]{1,24}){0,2} \"@\" [a-z0-9]{1,24} (\".\" [a-z]{2,8}){1,2}\n"},
    {"ipv4", "format-ipv4 ::= format-octet \".\" format-octet \".\" format-octet \".\" format-octet\n"
             "format-octet ::= \"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9]\n"},
};

std::string pointer_escape(const std::string& s) {
  std::string out;
  for (const char c : s) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

class Converter {
 public:
  Converter(json root, std::string where) : root_(std::move(root)), where_(std::move(where)) {}

  std::string convert(const std::string& root_name) {
    root_name_ = root_name;
    const std::string r = visit(root_, root_name + "-value", "");
    std::string out = root_name + " ::= " + r + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    out += kBase;
    std::set<std::string> formats = formats_used_;
    if (formats.count("date-time")) formats.insert({"date", "time"});  // its parts
    for (const auto& f : formats) out += kFormats.at(f);
    return out;
  }

 private:
  template <class... A>
  [[noreturn]] void error(const std::string& path, const A&... a) {
    fail(where_, a..., " at '", path.empty() ? "/" : path, "'");
  }

  std::string new_rule(const std::string& hint, const std::string& body) {
    std::string base;
    for (const char c : hint) base += (std::isalnum(static_cast<unsigned char>(c)) ? c : '-');
    if (base.empty()) base = "r";
    std::string name = base;
    for (int k = 2; rules_.count(name) || reserved(name); ++k) name = base + "-" + std::to_string(k);
    rules_[name] = body;
    return name;
  }
  bool reserved(const std::string& n) const { return n == "root" || n == root_name_ || n == "ws" || n.rfind("json-", 0) == 0 || n.rfind("format-", 0) == 0; }

  static std::string literal(const json& v) { return gbnf_literal(v.dump()); }

  static bool has_type(const json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer") return v.is_number_integer() || v.is_number_unsigned() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<long long>(v.get<double>())));
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    if (t == "object") return v.is_object();
    return false;
  }

  const json& resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') error(path, "$ref '", ref, "' is not local to the schema (only '#...' refs are supported)");
    try {
      return root_.at(json::json_pointer(ref.substr(1)));
    } catch (const json::exception&) {
      error(path, "$ref '", ref, "' points to nothing");
    }
  }

  std::int64_t count(const json& s, const char* key, const std::string& path, std::int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const json& v = s[key];
    if (!v.is_number_integer() && !v.is_number_unsigned()) error(path, "'", key, "' must be a non-negative integer");
    const auto n = v.get<std::int64_t>();
    if (n < 0) error(path, "'", key, "' must be a non-negative integer");
    if (n > 4096) error(path, "'", key, "' = ", n, " is over the supported 4096");
    return n;
  }

  static std::string repeat(const std::string& item, std::int64_t lo, std::int64_t hi) {
    if (hi < 0) return item + "{" + std::to_string(lo) + ",}";
    return item + "{" + std::to_string(lo) + "," + std::to_string(hi) + "}";
  }

  // Returns a GBNF expression (a rule name or a parenthesised expression).
  std::string visit(const json& s, const std::string& hint, const std::string& path) {
    if (++depth_ > 64) error(path, "schema nested too deeply");
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    if (s.is_boolean()) {
      if (!s.get<bool>()) error(path, "schema 'false' allows no value");
      return "json-value";
    }
    if (!s.is_object()) error(path, "a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items())
      if (!kHandled.count(key) && !kAnnotations.count(key)) error(path, "unsupported keyword '", key, "'");
    auto constraining_besides = [&](std::initializer_list<const char*> allowed) -> std::string {
      for (const auto& [key, value] : s.items()) {
        if (kAnnotations.count(key) || key == "$defs" || key == "definitions") continue;
        bool ok = false;
        for (const char* a : allowed) ok = ok || key == a;
        if (!ok) return key;
      }
      return "";
    };
    if (s.contains("$ref")) {
      if (const std::string k = constraining_besides({"$ref"}); !k.empty()) error(path, "'", k, "' beside '$ref' is not supported");
      const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
      if (const auto it = refs_.find(ref); it != refs_.end()) return it->second;
      const json& target = resolve(ref, path);
      std::string name = new_rule("ref-" + ref.substr(ref.rfind('/') + 1), "");
      refs_[ref] = name;  // before visiting: a recursive schema refers to itself
      rules_[name] = visit(target, name, ref.substr(1));
      return name;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      // oneOf is generated as anyOf: exact when its alternatives do not overlap (documented).
      if (const std::string k = constraining_besides({key}); !k.empty()) error(path, "'", k, "' beside '", key, "' is not supported");
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty()) error(path, "'", key, "' must be a non-empty array");
      std::string body;
      for (std::size_t k = 0; k < alts.size(); ++k)
        body += (k ? " | " : "") + visit(alts[k], hint + "-" + std::to_string(k), path + "/" + key + "/" + std::to_string(k));
      return new_rule(hint, body);
    }
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.size() != 1 || !constraining_besides({"allOf"}).empty())
        error(path, "'allOf' is supported only with one schema and nothing beside it");
      return visit(all[0], hint, path + "/allOf/0");
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const json& x : t) types.push_back(x.is_string() ? x.get<std::string>() : "?");
      if (types.empty()) error(path, "'type' must be a string or an array of strings");
      for (const std::string& ty : types)
        if (ty != "null" && ty != "boolean" && ty != "integer" && ty != "number" && ty != "string" && ty != "array" && ty != "object")
          error(path, "unknown type '", ty, "'");
    }
    if (s.contains("const") || s.contains("enum")) {
      std::vector<json> values;
      if (s.contains("const")) values.push_back(s["const"]);
      else if (!s["enum"].is_array() || s["enum"].empty()) error(path, "'enum' must be a non-empty array");
      else values.assign(s["enum"].begin(), s["enum"].end());
      std::string body;
      for (const json& v : values) {
        bool ok = types.empty();
        for (const std::string& ty : types) ok = ok || has_type(v, ty);
        if (ok) body += (body.empty() ? "" : " | ") + literal(v);
      }
      if (body.empty()) error(path, "no value of 'enum'/'const' has the schema's 'type'");
      if (const std::string k = constraining_besides({"const", "enum", "type"}); !k.empty()) error(path, "'", k, "' beside 'enum'/'const' is not supported");
      return new_rule(hint, body);
    }
    if (types.empty()) {  // no type: what the other keywords describe, or any value
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) types = {"object"};
      else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) types = {"array"};
      else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) types = {"string"};
      else return "json-value";
    }
    std::string body;
    for (const std::string& ty : types) body += (body.empty() ? "" : " | ") + typed(s, ty, hint, path);
    return types.size() == 1 ? body : new_rule(hint, body);
  }

  std::string typed(const json& s, const std::string& type, const std::string& hint, const std::string& path) {
    if (type == "null") return "json-null";
    if (type == "boolean") return "json-bool";
    if (type == "integer") return "json-int";
    if (type == "number") return "json-number";
    if (type == "string") return string_rule(s, hint, path);
    if (type == "array") return array_rule(s, hint, path);
    return object_rule(s, hint, path);
  }

  std::string string_rule(const json& s, const std::string& hint, const std::string& path) {
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format")) {
      if (!s["format"].is_string()) error(path, "'format' must be a string");
      const std::string f = s["format"].get<std::string>();
      if (!kFormats.count(f)) error(path, "unsupported format '", f, "' (supported: date, time, date-time, uuid, email, ipv4)");
      if (lengths || s.contains("pattern")) error(path, "'format' together with a length or 'pattern' is not supported");
      formats_used_.insert(f);
      return new_rule(hint, "\"\\\"\" format-" + f + " \"\\\"\"");
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) error(path, "'pattern' must be a string");
      if (lengths) error(path, "'pattern' together with minLength/maxLength is not supported");
      return new_rule(hint, "\"\\\"\" " + regex_to_gbnf(s["pattern"].get<std::string>(), where_ + " at '" + path + "'") + " \"\\\"\"");
    }
    if (!lengths) return "json-string";
    const std::int64_t lo = count(s, "minLength", path, 0), hi = count(s, "maxLength", path, -1);
    if (hi >= 0 && hi < lo) error(path, "maxLength < minLength");
    return new_rule(hint, "\"\\\"\" " + repeat("json-char", lo, hi) + " \"\\\"\"");
  }

  std::string array_rule(const json& s, const std::string& hint, const std::string& path) {
    if (s.contains("uniqueItems") && !(s["uniqueItems"].is_boolean() && !s["uniqueItems"].get<bool>()))
      error(path, "unsupported keyword 'uniqueItems'");
    const std::int64_t lo = count(s, "minItems", path, 0), hi = count(s, "maxItems", path, -1);
    if (hi >= 0 && hi < lo) error(path, "maxItems < minItems");
    std::vector<std::string> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) error(path, "'prefixItems' must be an array");
      for (std::size_t k = 0; k < s["prefixItems"].size(); ++k)
        prefix.push_back(visit(s["prefixItems"][k], hint + "-" + std::to_string(k), path + "/prefixItems/" + std::to_string(k)));
    }
    std::string item;  // empty: no further items
    if (!s.contains("items")) item = "json-value";
    else if (!(s["items"].is_boolean() && !s["items"].get<bool>())) item = visit(s["items"], hint + "-item", path + "/items");
    // The prefix items are all written (an array may stop early, but need not).
    const auto np = static_cast<std::int64_t>(prefix.size());
    if (hi >= 0 && np > hi) error(path, "more prefixItems than maxItems");
    if (item.empty() && lo > np) error(path, "minItems needs items that 'items: false' forbids");
    std::vector<std::string> seq = prefix;
    const std::int64_t more_lo = std::max<std::int64_t>(0, lo - np), more_hi = item.empty() ? 0 : hi < 0 ? -1 : hi - np;
    std::string body = "\"[\" ws ";
    for (std::size_t k = 0; k < seq.size(); ++k) body += (k ? "ws \",\" ws " : "") + seq[k] + " ";
    if (more_hi != 0) {
      if (seq.empty()) {
        // first item, then the rest with commas
        const std::string rest = "(ws \",\" ws " + item + ")";
        const std::string tail = repeat(rest, std::max<std::int64_t>(0, more_lo - 1), more_hi < 0 ? -1 : more_hi - 1);
        const std::string one = "(" + item + " " + tail + ")";
        body += more_lo > 0 ? one + " " : one + "? ";
      } else {
        body += repeat("(ws \",\" ws " + item + ")", more_lo, more_hi) + " ";
      }
    }
    return new_rule(hint, body + "ws \"]\"");
  }

  std::string object_rule(const json& s, const std::string& hint, const std::string& path) {
    struct Prop {
      std::string kv;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) error(path, "'required' must be an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) error(path, "'required' must list strings");
        required.insert(r.get<std::string>());
      }
    }
    const json* extra = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
    const bool extra_forbidden = extra && extra->is_boolean() && !extra->get<bool>();
    std::set<std::string> declared;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) error(path, "'properties' must be an object");
      for (const auto& [name, sub] : s["properties"].items()) {
        declared.insert(name);
        const std::string v = visit(sub, hint + "-" + name, path + "/properties/" + pointer_escape(name));
        props.push_back({literal(json(name)) + " ws \":\" ws " + v, required.count(name) > 0});
      }
    }
    for (const std::string& r : required) {
      if (declared.count(r)) continue;
      if (extra_forbidden) error(path, "required property '", r, "' is forbidden by additionalProperties false");
      const std::string v = extra && extra->is_object() ? visit(*extra, hint + "-" + r, path + "/additionalProperties") : "json-value";
      props.push_back({literal(json(r)) + " ws \":\" ws " + v, true});
      declared.insert(r);
    }
    // Extra properties only where none are declared: an extra key could repeat a declared one,
    // and JSON.parse would keep the extra value.
    std::string extra_kv;
    if (declared.empty() && !extra_forbidden) {
      const std::string v = extra && extra->is_object() ? visit(*extra, hint + "-extra", path + "/additionalProperties") : "json-value";
      extra_kv = "json-string ws \":\" ws " + v;
    }
    if (props.empty()) {
      if (extra_kv.empty()) return new_rule(hint, "\"{\" ws \"}\"");
      return new_rule(hint, "\"{\" ws (" + extra_kv + " (ws \",\" ws " + extra_kv + ")*)? ws \"}\"");
    }
    // rest(i, after): properties i.. of which any may be first (after = false) or follow one
    // already written (a comma first). Optional properties make two branches; each (i, after)
    // is one rule, so the grammar grows linearly.
    std::map<std::pair<std::size_t, bool>, std::string> memo;
    std::function<std::string(std::size_t, bool)> rest = [&](std::size_t i, bool after) -> std::string {
      if (i == props.size()) return "";
      const auto key = std::make_pair(i, after);
      if (const auto it = memo.find(key); it != memo.end()) return it->second;
      const std::string kv = (after ? "ws \",\" ws " : "") + props[i].kv;
      const std::string next_after = rest(i + 1, true);
      std::string body = kv + (next_after.empty() ? "" : " " + next_after);
      if (!props[i].required) {
        const std::string skip = rest(i + 1, after);
        body = "(" + body + ")" + (skip.empty() ? "?" : " | " + skip);
      }
      const std::string name = new_rule(hint + "-" + std::to_string(i), body);
      memo[key] = name;
      return name;
    };
    return new_rule(hint, "\"{\" ws " + rest(0, false) + " ws \"}\"");
  }

  json root_;
  std::string where_;
  std::map<std::string, std::string> rules_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> formats_used_;
  std::string root_name_ = "root";
  int depth_ = 0;
};

}  // namespace

std::string json_schema_to_gbnf(std::string_view schema, const std::string& where, const std::string& root_name) {
  json root;
  try {
    root = json::parse(schema);
  } catch (const json::exception& e) {
    fail(where, "not JSON: ", e.what());
  }
  return Converter(std::move(root), where).convert(root_name);
}

Grammar Grammar::json_object() {
  static const Grammar g = parse(std::string("root ::= json-object\n") + kBase, "json_object");
  return g;
}

}  // namespace tfm
