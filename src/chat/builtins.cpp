// Tests (`is string`), member access with the built-in methods of strings, lists and dicts,
// slicing, and the global functions, as @huggingface/jinja defines them. Its quirks are kept on
// purpose, since the reference renders what a model's users see: strip('x') ignores its
// argument and strips white space, title() only upper-cases word starts, len() counts UTF-16.
#include <algorithm>
#include <cctype>
#include <ctime>

#include "chat/interpreter.h"
#include "chat/strings.h"

namespace tfm::chat {

namespace {
using K = Value::Kind;

const Value& arg(const Args& a, std::size_t i, const char* kw, const Value& fallback) {
  if (i < a.pos.size()) return a.pos[i];
  for (const auto& [k, v] : a.kw)
    if (k == kw) return v;
  return fallback;
}

Value bound(std::function<Value(Args&)> f) {
  return Value::of(Callable([f = std::move(f)](Args& a, Env&) { return f(a); }));
}

Value string_method(Interpreter& in, const Node& at, const std::string& s, const std::string& name) {
  if (name == "length") return Value::of_int(utf16_length(s));
  if (name == "upper") return bound([s](Args&) { return Value::of(ascii_upper(s)); });
  if (name == "lower") return bound([s](Args&) { return Value::of(ascii_lower(s)); });
  if (name == "strip") return bound([s](Args&) { return Value::of(js_trim(s, true, true)); });
  if (name == "lstrip") return bound([s](Args&) { return Value::of(js_trim(s, true, false)); });
  if (name == "rstrip") return bound([s](Args&) { return Value::of(js_trim(s, false, true)); });
  if (name == "title") return bound([s](Args&) { return Value::of(title_case(s)); });
  if (name == "capitalize") return bound([s](Args&) { return Value::of(capitalize(s)); });
  if (name == "startswith" || name == "endswith") {
    const bool starts = name == "startswith";
    return bound([&in, &at, s, starts, name](Args& a) {
      auto match = [&](const std::string& p) {
        return p.size() <= s.size() && (starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0);
      };
      if (a.pos.empty()) in.error(at, name + "() requires at least one argument");
      const Value& p = a.pos[0];
      if (p.is(K::String)) return Value::of(match(p.text));
      if (!p.is(K::Array)) in.error(at, name + "() argument must be a string or tuple of strings");
      for (const Value& x : *p.array) {
        if (!x.is(K::String)) in.error(at, name + "() tuple elements must be strings");
        if (match(x.text)) return Value::of(true);
      }
      return Value::of(false);
    });
  }
  if (name == "split") {
    return bound([&in, &at, s](Args& a) {
      const Value none = Value::null(), all = Value::of_int(-1);
      const Value& sep = arg(a, 0, "sep", none);
      const Value& maxsplit = arg(a, 1, "maxsplit", all);
      if (!sep.is(K::String) && !sep.is(K::Null)) in.error(at, "sep argument must be a string or null");
      if (!maxsplit.is(K::Int)) in.error(at, "maxsplit argument must be a number");
      if (sep.is(K::String) && sep.text.empty()) in.error(at, "empty separator");
      List out;
      for (auto& part : split_string(s, sep.is(K::String) ? &sep.text : nullptr, maxsplit.integer))
        out.push_back(Value::of(std::move(part)));
      return Value::of(std::move(out));
    });
  }
  if (name == "replace") {
    return bound([&in, &at, s](Args& a) {
      if (a.pos.size() < 2) in.error(at, "replace() requires at least two arguments");
      const Value none = Value::null();
      const Value& count = arg(a, 2, "count", none);
      if (!a.pos[0].is(K::String) || !a.pos[1].is(K::String)) in.error(at, "replace() arguments must be strings");
      if (!count.is(K::Int) && !count.is(K::Null)) in.error(at, "replace() count argument must be a number or null");
      return Value::of(replace_string(s, a.pos[0].text, a.pos[1].text, count.is(K::Int) ? count.integer : -1));
    });
  }
  return Value::undefined();
}

Value pairs(const Dict& o) {
  List out;
  for (const auto& [k, v] : o) out.push_back(Value::of(List{Value::of(k), v}));
  return Value::of(std::move(out));
}

}  // namespace

Value dict_method(Interpreter& in, const Node& at, const Value& obj, const std::string& name) {
  if (name == "get") {
    return bound([&in, &at, obj](Args& a) {
      if (a.pos.empty() || !a.pos[0].is(K::String))
        in.error(at, std::string("Object key must be a string: got ") + kind_name(a.pos.empty() ? K::Undefined : a.pos[0].kind));
      if (const Value* v = obj.find(a.pos[0].text)) return *v;
      return a.pos.size() > 1 ? a.pos[1] : Value::null();
    });
  }
  if (name == "items") return bound([obj](Args&) { return pairs(*obj.object); });
  if (name == "keys" || name == "values") {
    const bool keys = name == "keys";
    return bound([obj, keys](Args&) {
      List out;
      for (const auto& [k, v] : *obj.object) out.push_back(keys ? Value::of(k) : v);
      return Value::of(std::move(out));
    });
  }
  return Value::undefined();
}

namespace {
std::int64_t index_from(std::int64_t i, std::size_t size) { return i < 0 ? i + static_cast<std::int64_t>(size) : i; }

}  // namespace

Value member_of(Interpreter& in, const Node& at, const Value& obj, const Value& key) {
  if (obj.is_mapping()) {
    if (!key.is(K::String)) in.error(at, std::string("Cannot access property with non-string: got ") + kind_name(key.kind));
    if (const Value* v = obj.find(key.text)) return *v;
    return obj.is(K::Object) ? dict_method(in, at, obj, key.text) : Value::undefined();
  }
  if (obj.is(K::Array) || obj.is(K::String)) {
    if (key.is(K::Int)) {
      if (obj.is(K::Array)) {
        const std::int64_t i = index_from(key.integer, obj.array->size());
        return i >= 0 && i < static_cast<std::int64_t>(obj.array->size()) ? (*obj.array)[static_cast<std::size_t>(i)]
                                                                            : Value::undefined();
      }
      const auto chars = utf8_chars(obj.text);
      const std::int64_t i = index_from(key.integer, chars.size());
      return i >= 0 && i < static_cast<std::int64_t>(chars.size()) ? Value::of(chars[static_cast<std::size_t>(i)])
                                                                  : Value::undefined();
    }
    if (!key.is(K::String))
      in.error(at, std::string("Cannot access property with non-string/non-number: got ") + kind_name(key.kind));
    if (obj.is(K::Array)) return key.text == "length" ? Value::of_int(static_cast<std::int64_t>(obj.array->size())) : Value::undefined();
    return string_method(in, at, obj.text, key.text);
  }
  if (!key.is(K::String)) in.error(at, std::string("Cannot access property with non-string: got ") + kind_name(key.kind));
  return Value::undefined();
}

// Python slicing: obj[start:stop:step], bounds clamped, negative indexes from the end.
Value slice_of(Interpreter& in, const Node& at, const Value& obj, const Value& start, const Value& stop,
               const Value& step) {
  if (!obj.is(K::Array) && !obj.is(K::String)) in.error(at, "Slice object must be an array or string");
  for (const Value* v : {&start, &stop, &step})
    if (!v->is(K::Int) && !v->is(K::Undefined)) in.error(at, "Slice indices must be integers or undefined");
  const std::vector<std::string> chars = obj.is(K::String) ? utf8_chars(obj.text) : std::vector<std::string>{};
  const auto n = static_cast<std::int64_t>(obj.is(K::Array) ? obj.array->size() : chars.size());
  const std::int64_t st = step.is(K::Int) ? step.integer : 1;
  if (st == 0) in.error(at, "slice step cannot be zero");
  std::int64_t b, e;
  if (st > 0) {
    b = start.is(K::Int) ? (start.integer < 0 ? std::max<std::int64_t>(n + start.integer, 0) : std::min(start.integer, n)) : 0;
    e = stop.is(K::Int) ? (stop.integer < 0 ? std::max<std::int64_t>(n + stop.integer, 0) : std::min(stop.integer, n)) : n;
  } else {
    b = start.is(K::Int) ? (start.integer < 0 ? std::max<std::int64_t>(n + start.integer, -1) : std::min(start.integer, n - 1)) : n - 1;
    e = stop.is(K::Int) ? (stop.integer < -1 ? std::max<std::int64_t>(n + stop.integer, -1) : std::min(stop.integer, n - 1)) : -1;
  }
  List items;
  std::string text;
  for (std::int64_t i = b; st > 0 ? i < e : i > e; i += st) {
    if (obj.is(K::Array))
      items.push_back((*obj.array)[static_cast<std::size_t>(i)]);
    else
      text += chars[static_cast<std::size_t>(i)];
  }
  return obj.is(K::Array) ? Value::of(std::move(items)) : Value::of(std::move(text));
}

bool apply_test(Interpreter& in, const Node& at, const std::string& name, const Value& a, const Value* b) {
  if (name == "boolean") return a.is(K::Bool);
  if (name == "callable") return a.is(K::Function);
  if (name == "odd" || name == "even") {
    if (!a.is(K::Int)) in.error(at, "cannot " + name + " on " + kind_name(a.kind));
    return (a.integer % 2 != 0) == (name == "odd");
  }
  if (name == "false") return a.is(K::Bool) && !a.boolean;
  if (name == "true") return a.is(K::Bool) && a.boolean;
  if (name == "none") return a.is(K::Null);
  if (name == "string") return a.is(K::String);
  if (name == "number") return a.is_number();
  if (name == "integer") return a.is(K::Int);
  if (name == "iterable") return a.is(K::Array) || a.is(K::String);
  if (name == "mapping") return a.is(K::Object);
  if (name == "sequence") return a.is(K::Array) || a.is(K::Object) || a.is(K::String);
  if (name == "lower") return a.is(K::String) && a.text == ascii_lower(a.text);
  if (name == "upper") return a.is(K::String) && a.text == ascii_upper(a.text);
  if (name == "defined") return !a.is(K::Undefined);
  if (name == "undefined") return a.is(K::Undefined);
  if (name == "equalto" || name == "eq") return strict_equals(a, b ? *b : Value::undefined());
  in.error(at, "Unknown test: " + name);
}

void add_globals(Interpreter& in, Env& env) {
  env.set("true", Value::of(true));
  env.set("false", Value::of(false));
  env.set("none", Value::null());
  env.set("True", Value::of(true));
  env.set("False", Value::of(false));
  env.set("None", Value::null());
  env.set("raise_exception", Value::of(Callable([](Args& a, Env&) -> Value {
    // The template's own message, unadorned: it is what the caller shows the user.
    throw TemplateRaised{a.pos.empty() ? std::string() : to_js_string(a.pos[0])};
  })));
  env.set("range", Value::of(Callable([&in](Args& a, Env&) -> Value {
    for (const Value& v : a.pos)
      if (!v.is(K::Int)) throw CallFailed{"range() arguments must be integers"};
    if (a.pos.empty() || a.pos.size() > 3) throw CallFailed{"range() takes 1 to 3 arguments"};
    std::int64_t start = 0, stop = a.pos[0].integer, step = 1;
    if (a.pos.size() > 1) { start = a.pos[0].integer; stop = a.pos[1].integer; }
    if (a.pos.size() > 2) step = a.pos[2].integer;
    if (step == 0) throw CallFailed{"range() step must not be zero"};
    List out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= in.limits().max_list_size) throw CallFailed{"range() longer than the list limit"};
      out.push_back(Value::of_int(i));
    }
    return Value::of(std::move(out));
  })));
  env.set("namespace", Value::of(Callable([](Args& a, Env&) -> Value {
    if (a.pos.size() > 1) throw CallFailed{"namespace expected at most 1 argument"};
    Dict entries;
    auto put = [&](const std::string& k, const Value& v) {
      for (auto& e : entries)
        if (e.first == k) { e.second = v; return; }
      entries.emplace_back(k, v);
    };
    if (!a.pos.empty()) {
      const Value& src = a.pos[0];
      if (src.is(K::Object)) {
        for (const auto& [k, v] : *src.object) put(k, v);
      } else if (src.is(K::Array)) {
        for (const Value& pair : *src.array) {
          if (!pair.is(K::Array) || pair.array->size() != 2 || !(*pair.array)[0].is(K::String))
            throw CallFailed{"namespace expected an object or an iterable of [key, value] pairs"};
          put((*pair.array)[0].text, (*pair.array)[1]);
        }
      } else {
        throw CallFailed{std::string("'") + kind_name(src.kind) + "' object is not iterable"};
      }
    }
    for (const auto& [k, v] : a.kw) put(k, v);
    return Value::namespace_of(std::move(entries));
  })));
  env.set("strftime_now", Value::of(Callable([](Args& a, Env&) -> Value {
    if (a.pos.empty() || !a.pos[0].is(K::String)) throw CallFailed{"strftime_now() takes a format string"};
    return Value::of(strftime_local(a.pos[0].text, std::time(nullptr)));
  })));
}

}  // namespace tfm::chat
