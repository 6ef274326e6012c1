// Runtime values: printing, truthiness, equality and JSON as @huggingface/jinja defines them
// (a JavaScript engine: `==` is JS loose equality, 1.0 concatenates as "1", none prints nothing).
#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "tfm/error.h"

namespace tfm::chat {

Value Value::null() { Value v; v.kind = Kind::Null; return v; }
Value Value::of(bool b) { Value v; v.kind = Kind::Bool; v.boolean = b; return v; }
Value Value::of_int(std::int64_t i) { Value v; v.kind = Kind::Int; v.integer = i; return v; }
Value Value::of_float(double d) { Value v; v.kind = Kind::Float; v.number = d; return v; }
Value Value::of(std::string s) { Value v; v.kind = Kind::String; v.text = std::move(s); return v; }
Value Value::of(chat::List a) {
  Value v; v.kind = Kind::Array; v.array = std::make_shared<chat::List>(std::move(a)); return v;
}
Value Value::of(chat::Dict o) {
  Value v; v.kind = Kind::Object; v.object = std::make_shared<chat::Dict>(std::move(o)); return v;
}
Value Value::namespace_of(chat::Dict o) {
  Value v = of(std::move(o)); v.kind = Kind::Namespace; return v;
}
Value Value::of(chat::Callable f) {
  Value v; v.kind = Kind::Function; v.function = std::make_shared<const chat::Callable>(std::move(f)); return v;
}

double Value::as_double() const {
  if (kind == Kind::Int) return static_cast<double>(integer);
  if (kind == Kind::Bool) return boolean ? 1.0 : 0.0;
  return number;
}

const Value* Value::find(const std::string& key) const {
  if (!object) return nullptr;
  for (const auto& [k, v] : *object)
    if (k == key) return &v;
  return nullptr;
}

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::Undefined: return "UndefinedValue";
    case Value::Kind::Null: return "NullValue";
    case Value::Kind::Bool: return "BooleanValue";
    case Value::Kind::Int: return "IntegerValue";
    case Value::Kind::Float: return "FloatValue";
    case Value::Kind::String: return "StringValue";
    case Value::Kind::Array: return "ArrayValue";
    case Value::Kind::Object: return "ObjectValue";
    case Value::Kind::Namespace: return "NamespaceValue";
    case Value::Kind::Function: return "FunctionValue";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::Null: return false;
    case Value::Kind::Bool: return v.boolean;
    case Value::Kind::Int: return v.integer != 0;
    case Value::Kind::Float: return v.number != 0 && !std::isnan(v.number);
    case Value::Kind::String: return !v.text.empty();
    case Value::Kind::Array: return !v.array->empty();
    case Value::Kind::Object: return !v.object->empty();
    case Value::Kind::Namespace:  // a JS Map object: always true (the reference has no override)
    case Value::Kind::Function: return true;
  }
  return false;
}

namespace {

// JS Number.prototype.toString for finite values (shortest round trip).
std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  if (d == std::floor(d) && std::fabs(d) < 1e21) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", d);
    return buf;
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  // C++ writes exponents as e-07 / e+21; JS as e-7 / e+21.
  auto e = s.find('e');
  if (e != std::string::npos) {
    std::string mant = s.substr(0, e), exp = s.substr(e + 1);
    char sign = exp[0] == '-' ? '-' : '+';
    std::size_t i = (exp[0] == '-' || exp[0] == '+') ? 1 : 0;
    while (i + 1 < exp.size() && exp[i] == '0') ++i;
    s = mant + "e" + sign + exp.substr(i);
  }
  return s;
}

// JS Number(string): decimal literals with optional sign and exponent, white space around.
double js_to_number(const std::string& s) {
  const std::string t = js_trim(s, true, true);
  if (t.empty()) return 0;
  if (t == "Infinity" || t == "+Infinity") return INFINITY;
  if (t == "-Infinity") return -INFINITY;
  for (char c : t)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return NAN;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  return end == t.c_str() + t.size() ? d : NAN;
}

enum class JsType { Undefined, Null, Boolean, Number, String, Object };
JsType js_type(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return JsType::Undefined;
    case Value::Kind::Null: return JsType::Null;
    case Value::Kind::Bool: return JsType::Boolean;
    case Value::Kind::Int:
    case Value::Kind::Float: return JsType::Number;
    case Value::Kind::String: return JsType::String;
    default: return JsType::Object;
  }
}

bool same_container(const Value& a, const Value& b) {
  if (a.kind == Value::Kind::Array && b.kind == Value::Kind::Array) return a.array == b.array;
  if (a.is_mapping() && b.is_mapping()) return a.object == b.object;
  if (a.kind == Value::Kind::Function && b.kind == Value::Kind::Function) return a.function == b.function;
  return false;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // A multi-byte UTF-8 sequence: copied, or escaped as UTF-16 code units.
    std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    len = std::min(len, s.size() - i);
    if (!ensure_ascii) {
      out.append(s, i, len);
    } else {
      char32_t cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0F : 0x1F);
      for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      auto unit = [&](unsigned u) {
        out += "\\u";
        for (int sh = 12; sh >= 0; sh -= 4) out += hex[(u >> sh) & 15];
      };
      if (cp >= 0x10000) {
        cp -= 0x10000;
        unit(0xD800 + static_cast<unsigned>(cp >> 10));
        unit(0xDC00 + static_cast<unsigned>(cp & 0x3FF));
      } else {
        unit(static_cast<unsigned>(cp));
      }
    }
    i += len;
  }
  out += '"';
}

}  // namespace

std::string to_display(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "undefined";
    case Value::Kind::Null: return "null";
    case Value::Kind::Bool: return v.boolean ? "true" : "false";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float:
      if (v.number == 0 && std::signbit(v.number)) return "-0.0";
      if (std::isfinite(v.number) && v.number == std::floor(v.number)) {
        char buf[400];
        std::snprintf(buf, sizeof buf, "%.1f", v.number);
        return buf;
      }
      return js_number(v.number);
    case Value::Kind::String: return v.text;
    case Value::Kind::Function: return "function";
    default: return to_json(v, JsonOptions{}, /*undefined_as_null=*/false);
  }
}

std::string to_js_string(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float: return js_number(v.number);
    case Value::Kind::Array: {
      std::string s;
      for (std::size_t i = 0; i < v.array->size(); ++i) {
        if (i) s += ',';
        s += to_display((*v.array)[i]);
      }
      return s;
    }
    case Value::Kind::Object:
    case Value::Kind::Namespace: return "[object Map]";
    default: return to_display(v);
  }
}

bool strict_equals(const Value& a, const Value& b) {
  const JsType ta = js_type(a), tb = js_type(b);
  if (ta != tb) return false;
  switch (ta) {
    case JsType::Undefined:
    case JsType::Null: return true;
    case JsType::Boolean: return a.boolean == b.boolean;
    case JsType::Number: return a.as_double() == b.as_double();
    case JsType::String: return a.text == b.text;
    case JsType::Object: return same_container(a, b);
  }
  return false;
}

bool loose_equals(const Value& a, const Value& b) {
  const JsType ta = js_type(a), tb = js_type(b);
  if (ta == tb) return strict_equals(a, b);
  const bool a_nullish = ta == JsType::Undefined || ta == JsType::Null;
  const bool b_nullish = tb == JsType::Undefined || tb == JsType::Null;
  if (a_nullish || b_nullish) return a_nullish && b_nullish;
  if (ta == JsType::Boolean) return loose_equals(Value::of_float(a.boolean ? 1 : 0), b);
  if (tb == JsType::Boolean) return loose_equals(a, Value::of_float(b.boolean ? 1 : 0));
  if (ta == JsType::Number && tb == JsType::String) return a.as_double() == js_to_number(b.text);
  if (ta == JsType::String && tb == JsType::Number) return js_to_number(a.text) == b.as_double();
  if (ta == JsType::Object) return loose_equals(Value::of(to_js_string(a)), b);
  if (tb == JsType::Object) return loose_equals(a, Value::of(to_js_string(b)));
  return false;
}

std::string to_json(const Value& v, const JsonOptions& opts, bool undefined_as_null, int depth) {
  const std::string item_sep = opts.custom_separators ? opts.item_sep : opts.indent ? "," : ", ";
  const std::string key_sep = opts.custom_separators ? opts.key_sep : ": ";
  switch (v.kind) {
    case Value::Kind::Null: return "null";
    case Value::Kind::Undefined: return undefined_as_null ? "null" : "undefined";
    case Value::Kind::Bool: return v.boolean ? "true" : "false";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float: return std::isfinite(v.number) ? js_number(v.number) : "null";
    case Value::Kind::String: {
      std::string out;
      json_string(out, v.text, opts.ensure_ascii);
      return out;
    }
    case Value::Kind::Function: fail("chat template", "Cannot convert to JSON: FunctionValue");
    default: break;
  }
  const std::string pad = opts.indent ? std::string(static_cast<std::size_t>(opts.indent), ' ') : "";
  std::string base = "\n";
  for (int i = 0; i < depth; ++i) base += pad;
  const std::string child = base + pad;
  std::vector<std::string> core;
  if (v.kind == Value::Kind::Array) {
    for (const Value& x : *v.array) core.push_back(to_json(x, opts, undefined_as_null, depth + 1));
    std::string out = "[";
    const bool pretty = opts.indent && !core.empty();
    for (std::size_t i = 0; i < core.size(); ++i) {
      if (i) out += item_sep;
      if (pretty) out += child;
      out += core[i];
    }
    if (pretty) out += base;
    return out + "]";
  }
  std::vector<const std::pair<std::string, Value>*> entries;
  for (const auto& e : *v.object) entries.push_back(&e);
  if (opts.sort_keys)
    std::stable_sort(entries.begin(), entries.end(), [](auto* x, auto* y) { return x->first < y->first; });
  std::string out = "{";
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (i) out += item_sep;
    if (opts.indent) out += child;
    json_string(out, entries[i]->first, opts.ensure_ascii);
    out += key_sep;
    out += to_json(entries[i]->second, opts, undefined_as_null, depth + 1);
  }
  if (opts.indent && !entries.empty()) out += base;
  return out + "}";
}

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::null();
    case nlohmann::ordered_json::value_t::boolean: return Value::of(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::of_int(j.get<std::int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::of_int(static_cast<std::int64_t>(j.get<std::uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      // JS keeps one number type; the reference calls a number with no fraction an integer.
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return Value::of_int(static_cast<std::int64_t>(d));
      return Value::of_float(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::of(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List a;
      a.reserve(j.size());
      for (const auto& x : j) a.push_back(from_json(x));
      return Value::of(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict o;
      o.reserve(j.size());
      for (const auto& [k, x] : j.items()) o.emplace_back(k, from_json(x));
      return Value::of(std::move(o));
    }
    default: return Value::undefined();
  }
}

bool is_js_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

namespace {
// Decodes the code point at s[i]; returns its byte length (1 for a stray byte, kept as is).
std::size_t decode(const std::string& s, std::size_t i, char32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (i + len > s.size()) len = 1;
  if (len == 1) { cp = c; return 1; }
  cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
  for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return len;
}
}  // namespace

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  char32_t cp;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = decode(s, i, cp);
    out.emplace_back(s, i, n);
    i += n;
  }
  return out;
}

std::string js_trim(const std::string& s, bool left, bool right) {
  std::size_t begin = 0, end = s.size();
  char32_t cp;
  if (left) {
    while (begin < end) {
      const std::size_t n = decode(s, begin, cp);
      if (!is_js_space(cp)) break;
      begin += n;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;  // back up to the lead byte
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
      decode(s, start, cp);
      if (!is_js_space(cp)) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

}  // namespace tfm::chat
