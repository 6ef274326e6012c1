// Filters (`x | trim`, `x | tojson(indent=4)`), dispatched on the operand's type as in
// @huggingface/jinja: a filter the reference lacks for a type is an error naming both.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/interpreter.h"
#include "chat/strings.h"

namespace tfm::chat {

namespace {
using K = Value::Kind;
const std::string kDot = ".";

const Value* kwarg(const Args& a, const char* name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}
// Positional argument i, else keyword `name`, else the fallback.
Value param(const Args& a, std::size_t i, const char* name, Value fallback) {
  if (i < a.pos.size()) return a.pos[i];
  if (const Value* v = kwarg(a, name)) return *v;
  return fallback;
}

// JS parseInt(s, 10) / parseFloat(s): the longest numeric prefix after white space, or NaN.
double parse_number(const std::string& s, bool integer) {
  const std::string t = js_trim(s, true, false);
  std::size_t i = 0;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) ++i;
  const std::size_t digits_start = i;
  while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (integer) return i == digits_start ? NAN : std::strtod(t.substr(0, i).c_str(), nullptr);
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  return end == t.c_str() ? NAN : d;
}

// A dotted path into dicts and lists ("function.name", "items.0"), undefined where it ends.
Value attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  for (const std::string& part : split_string(path, &kDot, -1)) {
    if (v.is_mapping()) {
      const Value* f = v.find(part);
      v = f ? *f : Value::undefined();
    } else if (v.is(K::Array)) {
      char* end = nullptr;
      const long long i = std::strtoll(part.c_str(), &end, 10);
      if (end == part.c_str() || i < 0 || static_cast<std::size_t>(i) >= v.array->size()) return Value::undefined();
      v = (*v.array)[static_cast<std::size_t>(i)];
    } else {
      return Value::undefined();
    }
  }
  return v;
}

// What join concatenates for one item: JS List.join's String(x), empty for none/undefined.
std::string join_item(const Value& v) {
  return v.is(K::Null) || v.is(K::Undefined) ? std::string() : to_js_string(v);
}

std::string indent_lines(const std::string& s, std::size_t width, bool first, bool blank) {
  std::string out, line;
  std::size_t index = 0;
  auto flush = [&] {
    if (index > 0) out += '\n';
    if (!((!first && index == 0) || (!blank && line.empty()))) out += std::string(width, ' ');
    out += line;
    line.clear();
    ++index;
  };
  for (char c : s) {
    if (c == '\n') flush(); else line += c;
  }
  flush();
  return out;
}

Value to_json_filter(Interpreter& in, const Node& at, const Value& v, const Args& a) {
  JsonOptions o;
  if (const Value* x = kwarg(a, "indent")) {
    if (!x->is(K::Int) && !x->is(K::Null)) in.error(at, "If set, indent must be a number");
    o.indent = x->is(K::Int) ? static_cast<int>(std::clamp<std::int64_t>(x->integer, 0, 64)) : 0;
  }
  if (const Value* x = kwarg(a, "ensure_ascii")) {
    if (!x->is(K::Bool)) in.error(at, "If set, ensure_ascii must be a boolean");
    o.ensure_ascii = x->boolean;
  }
  if (const Value* x = kwarg(a, "sort_keys")) {
    if (!x->is(K::Bool)) in.error(at, "If set, sort_keys must be a boolean");
    o.sort_keys = x->boolean;
  }
  if (const Value* x = kwarg(a, "separators"); x && !x->is(K::Null)) {
    if (!x->is(K::Array) || x->array->size() != 2 || !(*x->array)[0].is(K::String) || !(*x->array)[1].is(K::String))
      in.error(at, "separators must be a tuple of two strings");
    o.custom_separators = true;
    o.item_sep = (*x->array)[0].text;
    o.key_sep = (*x->array)[1].text;
  }
  return Value::of(to_json(v, o));
}

Value array_filter(Interpreter& in, const Node& node, const std::string& name, const Value& v, const Args* a,
                   std::size_t first_arg) {
  const List& xs = *v.array;
  if (!a) {
    if (name == "list") return v;
    if (name == "first") return xs.empty() ? Value::undefined() : xs.front();
    if (name == "last") return xs.empty() ? Value::undefined() : xs.back();
    if (name == "length") return Value::of_int(static_cast<std::int64_t>(xs.size()));
    if (name == "reverse") return Value::of(List(xs.rbegin(), xs.rend()));
    if (name == "join") {
      std::string s;
      for (const Value& x : xs) s += join_item(x);
      return Value::of(std::move(s));
    }
    if (name == "string") return Value::of(to_json(v, JsonOptions{}, false));
    if (name == "unique") {
      List out;
      for (const Value& x : xs)
        if (std::none_of(out.begin(), out.end(), [&](const Value& y) { return strict_equals(x, y); })) out.push_back(x);
      return Value::of(std::move(out));
    }
  } else if (name == "selectattr" || name == "rejectattr") {
    const bool select = name == "selectattr";
    for (const Value& x : xs)
      if (!x.is_mapping()) in.error(node, "`" + name + "` can only be applied to array of objects");
    for (std::size_t i = first_arg; i < node.kids.size(); ++i)
      if (node.kids[i]->kind != Node_kind::Literal || !node.kids[i]->literal.is(K::String))
        in.error(node, "arguments of `" + name + "` must be strings");
    if (a->pos.empty()) in.error(node, "`" + name + "` needs an attribute name");
    const std::string& attr = a->pos[0].text;
    List out;
    for (const Value& x : xs) {
      const Value* field = x.find(attr);
      bool pass = false;
      if (field) pass = a->pos.size() > 1 ? apply_test(in, node, a->pos[1].text, *field, a->pos.size() > 2 ? &a->pos[2] : nullptr)
                                          : truthy(*field);
      if (pass == select) out.push_back(x);
    }
    return Value::of(std::move(out));
  } else if (name == "map") {
    const Value* attr = kwarg(*a, "attribute");
    if (!attr) in.error(node, "`map` expressions without `attribute` set are not currently supported.");
    if (!attr->is(K::String)) in.error(node, "attribute must be a string");
    const Value* fallback = kwarg(*a, "default");
    List out;
    for (const Value& x : xs) {
      if (!x.is_mapping()) in.error(node, "items in map must be an object");
      const Value field = attribute_path(x, attr->text);
      out.push_back(field.is(K::Undefined) && fallback ? *fallback : field);
    }
    return Value::of(std::move(out));
  }
  in.error(node, "Unknown ArrayValue filter: " + name);
}

Value string_filter(Interpreter& in, const Node& node, const std::string& name, const Value& v, const Args* a) {
  const std::string& s = v.text;
  if (!a) {
    if (name == "length") return Value::of_int(utf16_length(s));
    if (name == "upper") return Value::of(ascii_upper(s));
    if (name == "lower") return Value::of(ascii_lower(s));
    if (name == "title") return Value::of(title_case(s));
    if (name == "capitalize") return Value::of(capitalize(s));
    if (name == "trim") return Value::of(js_trim(s, true, true));
    if (name == "indent") return Value::of(indent_lines(s, 4, false, false));
    if (name == "join" || name == "string") return v;
    if (name == "int") {
      const double d = parse_number(s, true);
      return Value::of_int(std::isnan(d) ? 0 : static_cast<std::int64_t>(d));
    }
    if (name == "float") {
      const double d = parse_number(s, false);
      return Value::of_float(std::isnan(d) ? 0.0 : d);
    }
  } else if (name == "indent") {
    const Value width = param(*a, 0, "width", Value::of_int(4));
    if (!width.is(K::Int)) in.error(node, "width must be a number");
    return Value::of(indent_lines(s, static_cast<std::size_t>(std::clamp<std::int64_t>(width.integer, 0, 1024)),
                                  truthy(param(*a, 1, "first", Value::of(false))),
                                  truthy(param(*a, 2, "blank", Value::of(false)))));
  } else if (name == "replace") {
    if (a->pos.size() < 2 || !a->pos[0].is(K::String) || !a->pos[1].is(K::String))
      in.error(node, "replace() arguments must be strings");
    const Value count = param(*a, 2, "count", Value::null());
    if (!count.is(K::Int) && !count.is(K::Null)) in.error(node, "replace() count argument must be a number or null");
    return Value::of(replace_string(s, a->pos[0].text, a->pos[1].text, count.is(K::Int) ? count.integer : -1));
  }
  in.error(node, "Unknown StringValue filter: " + name);
}

}  // namespace

Value apply_filter(Interpreter& in, const Node& node, const Value& v, Env& env) {
  const std::string& name = node.name;
  const std::size_t first_arg = node.kind == Node_kind::Filter ? 1 : 0;
  Args args;
  const Args* a = nullptr;
  if (node.flag) {
    args = in.eval_args(node.kids, first_arg, env);
    a = &args;
  }
  if (name == "safe" && !a) return v;
  if (name == "tojson") return a ? to_json_filter(in, node, v, *a) : Value::of(to_json(v, JsonOptions{}));
  if (a && name == "join") {
    const Value sep = param(*a, 0, "separator", Value::of(std::string()));
    if (!sep.is(K::String)) in.error(node, "separator must be a string");
    std::vector<std::string> items;
    if (v.is(K::String)) items = utf8_chars(v.text);
    else if (v.is(K::Array)) for (const Value& x : *v.array) items.push_back(join_item(x));
    else in.error(node, "Cannot apply filter \"join\" to type: " + std::string(kind_name(v.kind)));
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) out += (i ? sep.text : "") + items[i];
    return Value::of(std::move(out));
  }
  if (a && (name == "int" || name == "float")) {
    const bool integer = name == "int";
    const Value fallback = param(*a, 0, "default", integer ? Value::of_int(0) : Value::of_float(0));
    if (v.is(K::String)) {
      const double d = parse_number(v.text, integer);
      if (std::isnan(d)) return fallback;
      return integer ? Value::of_int(static_cast<std::int64_t>(d)) : Value::of_float(d);
    }
    if (v.is_number()) return v;
    if (v.is(K::Bool)) return integer ? Value::of_int(v.boolean) : Value::of_float(v.boolean);
    in.error(node, "Cannot apply filter \"" + name + "\" to type: " + kind_name(v.kind));
  }
  if (a && name == "default") {
    const Value fallback = a->pos.empty() ? Value::of(std::string()) : a->pos[0];
    const Value boolean = param(*a, 1, "boolean", Value::of(false));
    if (!boolean.is(K::Bool)) in.error(node, "`default` filter flag must be a boolean");
    return v.is(K::Undefined) || (boolean.boolean && !truthy(v)) ? fallback : v;
  }
  switch (v.kind) {
    case K::Array: return array_filter(in, node, name, v, a, first_arg);
    case K::String: return string_filter(in, node, name, v, a);
    case K::Int:
    case K::Float:
      if (!a) {
        if (name == "abs") return v.is(K::Int) ? Value::of_int(std::llabs(v.integer)) : Value::of_float(std::fabs(v.number));
        if (name == "int") return v.is(K::Int) ? v : Value::of_int(static_cast<std::int64_t>(std::floor(v.number)));
        if (name == "float") return Value::of_float(v.as_double());
        if (name == "string") return Value::of(to_display(v));
      }
      in.error(node, "Unknown NumericValue filter: " + name);
    case K::Object: {
      if (!a && name == "length") return Value::of_int(static_cast<std::int64_t>(v.object->size()));
      // dict|items, dict|keys, dict|get('k'): the dict's own methods used as filters
      const Value method = dict_method(in, node, v, name);
      if (!method.is(K::Function)) in.error(node, "Unknown ObjectValue filter: " + name);
      Args call_args = a ? *a : Args{};
      return (*method.function)(call_args, env);
    }
    case K::Bool:
      if (!a) {
        if (name == "bool") return v;
        if (name == "int") return Value::of_int(v.boolean ? 1 : 0);
        if (name == "float") return Value::of_float(v.boolean ? 1.0 : 0.0);
        if (name == "string") return Value::of(std::string(v.boolean ? "true" : "false"));
      }
      in.error(node, "Unknown BooleanValue filter: " + name);
    default: break;
  }
  in.error(node, "Cannot apply filter \"" + name + "\" to type: " + kind_name(v.kind));
}

}  // namespace tfm::chat
