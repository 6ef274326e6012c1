// Runtime values of the chat-template interpreter, with the semantics of @huggingface/jinja
// (the interpreter transformers.js renders chat templates with, and our reference): printing,
// truthiness, JSON, equality. Containers are shared, so a value copied out of `messages` is the
// same object (equality of objects is identity there, and namespace() is mutable through copies).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tfm::chat {

struct Value;
struct Env;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as JS Maps keep it

// Call arguments: positional values and keyword arguments (name=value).
struct Args {
  std::vector<Value> pos;
  Dict kw;
};
// A callable value: a global function, a macro, or a method bound to its receiver. `env` is
// the caller's scope (macros see the scope they are called from, as in the reference).
using Callable = std::function<Value(Args& args, Env& env)>;

struct Value {
  enum class Kind : std::uint8_t { Undefined, Null, Bool, Int, Float, String, Array, Object, Namespace, Function };
  Kind kind = Kind::Undefined;
  bool boolean = false;
  std::int64_t integer = 0;
  double number = 0;
  std::string text;
  std::shared_ptr<chat::List> array;
  std::shared_ptr<chat::Dict> object;  // Dict and Namespace
  std::shared_ptr<const chat::Callable> function;

  static Value undefined() { return {}; }
  static Value null();
  static Value of(bool b);
  static Value of_int(std::int64_t i);
  static Value of_float(double d);
  static Value of(std::string s);
  static Value of(chat::List a);
  static Value of(chat::Dict o);
  static Value namespace_of(chat::Dict o);
  static Value of(chat::Callable f);

  bool is(Kind k) const { return kind == k; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float; }
  bool is_mapping() const { return kind == Kind::Object || kind == Kind::Namespace; }
  double as_double() const;  // Int, Float or Bool as a number
  const Value* find(const std::string& key) const;  // Dict/Namespace entry, or null
};

// The reference's type names, used in error messages (e.g. "StringValue").
const char* kind_name(Value::Kind k);

bool truthy(const Value& v);
// What `{{ v }}` prints. Undefined and null print nothing (the caller skips them).
std::string to_display(const Value& v);
// JS String(x) of a raw value, what `~` and string `+` concatenate (1.0 prints "1").
std::string to_js_string(const Value& v);
// JS `==` between the reference's raw values: loose for primitives, identity for containers.
bool loose_equals(const Value& a, const Value& b);
// JS `===` between raw values (the `equalto` test, `in` on lists).
bool strict_equals(const Value& a, const Value& b);

struct JsonOptions {
  int indent = 0;  // 0: one line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool custom_separators = false;
  std::string item_sep, key_sep;
};
// Python json.dumps layout, as the reference writes it. `undefined_as_null` false prints
// "undefined" for undefined members (how a list or dict prints with {{ }}).
std::string to_json(const Value& v, const JsonOptions& opts, bool undefined_as_null = true, int depth = 0);

// Context conversion: numbers with no fraction become Int (as JS Number.isInteger).
Value from_json(const nlohmann::ordered_json& j);

// Unicode-aware helpers on UTF-8 text.
bool is_js_space(char32_t c);  // JS String.prototype.trim's white space and line terminators
std::string js_trim(const std::string& s, bool left, bool right);
std::vector<std::string> utf8_chars(const std::string& s);  // one string per code point

}  // namespace tfm::chat
