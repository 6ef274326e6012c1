// Chat-template evaluation (see interpreter.h). Operators follow @huggingface/jinja: `==` is
// JavaScript's loose equality, `+` joins strings when either side is one, arithmetic keeps
// integers integral, and anything else is an error naming the operator and the types.
#include "chat/interpreter.h"

#include <cmath>

#include "chat/lexer.h"
#include "tfm/error.h"

namespace tfm::chat {

const Value* Env::lookup(const std::string& name) const {
  for (const Env* e = this; e != nullptr; e = e->parent)
    for (const auto& [k, v] : e->vars)
      if (k == name) return &v;
  return nullptr;
}

void Env::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

namespace {
// break / continue unwind to their loop as exceptions, as in the reference.
struct LoopBreak {};
struct LoopContinue {};

struct DepthGuard {
  DepthGuard(Interpreter& in, int& depth, const Node& at) : depth_(depth) {
    if (++depth_ > in.limits().max_depth) {
      --depth_;
      in.error(at, "template nested or recursing deeper than " + std::to_string(in.limits().max_depth));
    }
  }
  ~DepthGuard() { --depth_; }
  int& depth_;
};
}  // namespace

void Interpreter::error(const Node& at, const std::string& what) const {
  fail("chat template", describe_position(program_.source, at.offset), ": ", one_line(what));
}

void Interpreter::append(std::string& out, const std::string& s, const Node& at) const {
  if (out.size() + s.size() > limits_.max_output_bytes)
    error(at, "output longer than " + std::to_string(limits_.max_output_bytes) + " bytes");
  out += s;
}

std::string Interpreter::render(Env& globals) {
  std::string out;
  exec_block(program_.body, globals, out);
  return out;
}

void Interpreter::exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out) {
  for (const auto& n : body) exec(*n, env, out);
}

void Interpreter::exec(const Node& n, Env& env, std::string& out) {
  DepthGuard guard(*this, depth_, n);
  switch (n.kind) {
    case Node_kind::Text: append(out, n.name, n); return;
    case Node_kind::Comment: return;
    case Node_kind::Set: exec_set(n, env); return;
    case Node_kind::Macro: define_macro(n, env); return;
    case Node_kind::Break: throw LoopBreak{};
    case Node_kind::Continue: throw LoopContinue{};
    case Node_kind::If:
      exec_block(truthy(eval(*n.kids[0], env)) ? n.body : n.alt, env, out);
      return;
    case Node_kind::For: exec_for(n, env, out); return;
    case Node_kind::FilterBlock: {
      std::string inner;
      exec_block(n.body, env, inner);
      const Value v = apply_filter(*this, n, Value::of(std::move(inner)), env);
      if (!v.is(Value::Kind::Null) && !v.is(Value::Kind::Undefined)) append(out, to_display(v), n);
      return;
    }
    default: {
      const Value v = eval(n, env);  // {{ expression }}: none and undefined print nothing
      if (!v.is(Value::Kind::Null) && !v.is(Value::Kind::Undefined)) append(out, to_display(v), n);
    }
  }
}

void Interpreter::exec_set(const Node& n, Env& env) {
  Value rhs;
  if (n.kids.size() > 1) {
    rhs = eval(*n.kids[1], env);
  } else {
    std::string s;
    exec_block(n.body, env, s);
    rhs = Value::of(std::move(s));
  }
  const Node& target = *n.kids[0];
  if (target.kind == Node_kind::Identifier) {
    env.set(target.name, std::move(rhs));
  } else if (target.kind == Node_kind::TupleLit) {
    if (!rhs.is(Value::Kind::Array)) error(n, std::string("Cannot unpack non-iterable type in set: ") + kind_name(rhs.kind));
    if (rhs.array->size() != target.kids.size())
      error(n, std::string("Too ") + (target.kids.size() > rhs.array->size() ? "few" : "many") + " items to unpack in set");
    for (std::size_t i = 0; i < target.kids.size(); ++i) {
      if (target.kids[i]->kind != Node_kind::Identifier) error(n, "Cannot unpack to non-identifier in set");
      env.set(target.kids[i]->name, (*rhs.array)[i]);
    }
  } else if (target.kind == Node_kind::Member) {
    const Value obj = eval(*target.kids[0], env);
    if (!obj.is(Value::Kind::Namespace)) error(n, "cannot assign attribute on non-namespace object");
    if (target.flag || target.kids[1]->kind != Node_kind::Identifier)
      error(n, "Cannot assign to member with non-identifier property");
    const std::string& key = target.kids[1]->name;
    for (auto& [k, v] : *obj.object)
      if (k == key) {
        v = std::move(rhs);
        return;
      }
    obj.object->emplace_back(key, std::move(rhs));
  } else {
    error(n, "Invalid left-hand side of an assignment");
  }
}

void Interpreter::exec_for(const Node& n, Env& env, std::string& out) {
  Env scope{{}, &env};
  Value iterable = eval(*n.kids[1], scope);
  if (iterable.is(Value::Kind::Object)) {
    List keys;
    for (const auto& kv : *iterable.object) keys.push_back(Value::of(kv.first));
    iterable = Value::of(std::move(keys));
  }
  if (!iterable.is(Value::Kind::Array))
    error(n, std::string("Expected iterable or object type in for loop: got ") + kind_name(iterable.kind));
  const Node& target = *n.kids[0];
  auto bind = [&](Env& e, const Value& item) {
    if (target.kind == Node_kind::Identifier) {
      e.set(target.name, item);
      return;
    }
    if (!item.is(Value::Kind::Array)) error(n, std::string("Cannot unpack non-iterable type: ") + kind_name(item.kind));
    if (item.array->size() != target.kids.size())
      error(n, std::string("Too ") + (target.kids.size() > item.array->size() ? "few" : "many") + " items to unpack");
    for (std::size_t j = 0; j < target.kids.size(); ++j) {
      if (target.kids[j]->kind != Node_kind::Identifier) error(n, "Cannot unpack non-identifier type");
      e.set(target.kids[j]->name, (*item.array)[j]);
    }
  };
  // `for x in xs if cond`: the items are chosen first, so loop.length counts only those.
  std::vector<Value> items;
  for (const Value& item : *iterable.array) {
    if (n.kids.size() > 2) {
      Env test_scope{{}, &scope};
      bind(test_scope, item);
      if (!truthy(eval(*n.kids[2], test_scope))) continue;
    }
    items.push_back(item);
  }
  bool no_iteration = true;
  const auto count = static_cast<std::int64_t>(items.size());
  for (std::int64_t i = 0; i < count; ++i) {
    Dict loop{{"index", Value::of_int(i + 1)},
                {"index0", Value::of_int(i)},
                {"revindex", Value::of_int(count - i)},
                {"revindex0", Value::of_int(count - i - 1)},
                {"first", Value::of(i == 0)},
                {"last", Value::of(i == count - 1)},
                {"length", Value::of_int(count)},
                {"previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined()},
                {"nextitem", i < count - 1 ? items[static_cast<std::size_t>(i + 1)] : Value::undefined()}};
    scope.set("loop", Value::of(std::move(loop)));
    bind(scope, items[static_cast<std::size_t>(i)]);
    // An iteration left by break/continue contributes nothing (its partial output is dropped).
    std::string body;
    try {
      exec_block(n.body, scope, body);
    } catch (const LoopContinue&) {
      continue;
    } catch (const LoopBreak&) {
      break;
    }
    append(out, body, n);
    no_iteration = false;
  }
  if (no_iteration) exec_block(n.alt, scope, out);
}

void Interpreter::define_macro(const Node& n, Env& env) {
  const Node* macro = &n;
  env.set(n.name, Value::of(Callable([this, macro](Args& args, Env& caller) -> Value {
    Env scope{{}, &caller};
    const auto& params = macro->kids;
    if (args.pos.size() > params.size())
      error(*macro, "macro '" + macro->name + "' takes not more than " + std::to_string(params.size()) + " argument(s)");
    std::vector<const Node*> pending_defaults;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Node& p = *params[i];
      Value v;
      bool given = i < args.pos.size();
      if (given) v = args.pos[i];
      for (auto it = args.kw.begin(); !given && it != args.kw.end(); ++it)
        if (it->first == p.name) {
          v = it->second;
          given = true;
          args.kw.erase(it);
          break;
        }
      if (!given && p.kind == Node_kind::Kwarg) pending_defaults.push_back(&p);
      scope.set(p.name, v);
    }
    if (!args.kw.empty()) error(*macro, "macro '" + macro->name + "' takes no keyword argument '" + args.kw[0].first + "'");
    for (const Node* p : pending_defaults) scope.set(p->name, eval(*p->kids[0], scope));
    std::string out;
    exec_block(macro->body, scope, out);
    return Value::of(std::move(out));
  })));
}

Args Interpreter::eval_args(const std::vector<NodePtr>& kids, std::size_t first, Env& env) {
  Args a;
  for (std::size_t i = first; i < kids.size(); ++i)
    if (kids[i]->kind != Node_kind::Kwarg) a.pos.push_back(eval(*kids[i], env));
  for (std::size_t i = first; i < kids.size(); ++i)
    if (kids[i]->kind == Node_kind::Kwarg) {
      for (const auto& kv : a.kw)
        if (kv.first == kids[i]->name) error(*kids[i], "Got multiple values for keyword argument '" + kv.first + "'");
      a.kw.emplace_back(kids[i]->name, eval(*kids[i]->kids[0], env));
    }
  return a;
}

Value Interpreter::eval_call(const Node& n, Env& env) {
  Args args = eval_args(n.kids, 1, env);
  const Value fn = eval(*n.kids[0], env);
  if (!fn.is(Value::Kind::Function))
    error(n, std::string("Cannot call something that is not a function: got ") + kind_name(fn.kind));
  try {
    return (*fn.function)(args, env);
  } catch (const CallFailed& e) {
    error(n, e.message);
  }
}

Value Interpreter::eval_member(const Node& n, Env& env) {
  const Value obj = eval(*n.kids[0], env);
  const Node& key = *n.kids[1];
  if (n.flag && key.kind == Node_kind::Slice) {
    auto part = [&](std::size_t i) { return key.kids[i] ? eval(*key.kids[i], env) : Value::undefined(); };
    return slice_of(*this, n, obj, part(0), part(1), part(2));
  }
  Value k;
  if (n.flag)
    k = eval(key, env);
  else if (key.kind == Node_kind::Literal)
    k = key.literal;
  else
    k = Value::of(key.name);
  return member_of(*this, n, obj, k);
}

Value Interpreter::eval(const Node& n, Env& env) {
  DepthGuard guard(*this, depth_, n);
  switch (n.kind) {
    case Node_kind::Literal: return n.literal;
    case Node_kind::Identifier: {
      const Value* v = env.lookup(n.name);
      return v ? *v : Value::undefined();
    }
    case Node_kind::ArrayLit:
    case Node_kind::TupleLit: {
      List a;
      for (const auto& k : n.kids) a.push_back(eval(*k, env));
      return Value::of(std::move(a));
    }
    case Node_kind::ObjectLit: {
      Dict o;
      for (std::size_t i = 0; i + 1 < n.kids.size(); i += 2) {
        Value k = eval(*n.kids[i], env);
        if (!k.is(Value::Kind::String)) error(n, std::string("Object keys must be strings: got ") + kind_name(k.kind));
        Value v = eval(*n.kids[i + 1], env);
        bool replaced = false;
        for (auto& [ok, ov] : o)
          if (ok == k.text) { ov = v; replaced = true; }
        if (!replaced) o.emplace_back(k.text, std::move(v));
      }
      return Value::of(std::move(o));
    }
    case Node_kind::Member: return eval_member(n, env);
    case Node_kind::Call: return eval_call(n, env);
    case Node_kind::Unary: {
      const Value a = eval(*n.kids[0], env);
      if (n.name == "not") return Value::of(!truthy(a));
      const double sign = n.name == "-" ? -1 : 1;
      if (a.is(Value::Kind::Float)) return Value::of_float(sign * a.number);
      if (a.is(Value::Kind::Int) || a.is(Value::Kind::Bool))
        return Value::of_int(static_cast<std::int64_t>(sign) * static_cast<std::int64_t>(a.as_double()));
      error(n, "Unknown operator \"" + n.name + "\" for " + kind_name(a.kind));
    }
    case Node_kind::Binary: return eval_binary(n, env);
    case Node_kind::Filter: return apply_filter(*this, n, eval(*n.kids[0], env), env);
    case Node_kind::Test: {
      const Value a = eval(*n.kids[0], env);
      const bool r = apply_test(*this, n, n.name, a, nullptr);
      return Value::of(n.flag ? !r : r);
    }
    case Node_kind::Select:
      return truthy(eval(*n.kids[1], env)) ? eval(*n.kids[0], env) : Value::undefined();
    case Node_kind::Ternary:
      return truthy(eval(*n.kids[0], env)) ? eval(*n.kids[1], env) : eval(*n.kids[2], env);
    case Node_kind::Kwarg: error(n, "keyword argument outside a call");
    case Node_kind::Slice: error(n, "slice outside []");
    default: error(n, "statement where an expression was expected");
  }
}

Value Interpreter::eval_binary(const Node& n, Env& env) {
  const std::string& op = n.name;
  const Value l = eval(*n.kids[0], env);
  if (op == "and") return truthy(l) ? eval(*n.kids[1], env) : l;
  if (op == "or") return truthy(l) ? l : eval(*n.kids[1], env);
  const Value r = eval(*n.kids[1], env);
  if (op == "==") return Value::of(loose_equals(l, r));
  if (op == "!=") return Value::of(!loose_equals(l, r));
  using K = Value::Kind;
  if (l.is(K::Undefined) || r.is(K::Undefined)) {
    if (r.is(K::Undefined) && (op == "in" || op == "not in")) return Value::of(op == "not in");
    error(n, "Cannot perform operation " + op + " on undefined values");
  }
  if (l.is(K::Null) || r.is(K::Null)) error(n, "Cannot perform operation on null values");
  if (op == "~") {
    std::string s = to_js_string(l) + to_js_string(r);
    if (s.size() > limits_.max_output_bytes) error(n, "string longer than the output limit");
    return Value::of(std::move(s));
  }
  const bool l_numeric_like = l.is_number() || l.is(K::Bool), r_numeric_like = r.is_number() || r.is(K::Bool);
  if (op == "**" && l_numeric_like && r_numeric_like) {
    const double a = l.as_double(), b = r.as_double();
    if (a == 0 && b < 0) error(n, "0.0 cannot be raised to a negative power");
    const double p = std::pow(a, b);
    if (!std::isfinite(p)) error(n, "Exponentiation result is not a finite real number");
    if (l.is(K::Float) || r.is(K::Float) || b < 0) return Value::of_float(p);
    return Value::of_int(static_cast<std::int64_t>(p));
  }
  if (l.is_number() && r.is_number()) {
    const bool as_float = l.is(K::Float) || r.is(K::Float);
    const double a = l.as_double(), b = r.as_double();
    auto number = [&](double x) {
      return as_float ? Value::of_float(x) : Value::of_int(static_cast<std::int64_t>(x));
    };
    if (op == "+") return as_float ? Value::of_float(a + b) : Value::of_int(l.integer + r.integer);
    if (op == "-") return as_float ? Value::of_float(a - b) : Value::of_int(l.integer - r.integer);
    if (op == "*") return as_float ? Value::of_float(a * b) : Value::of_int(l.integer * r.integer);
    if (op == "/") return Value::of_float(a / b);
    if (op == "//" || op == "%") {
      if (!as_float && b == 0) error(n, "integer division or modulo by zero");
      return op == "//" ? number(std::floor(a / b)) : number(std::fmod(a, b));
    }
    if (op == "<") return Value::of(a < b);
    if (op == ">") return Value::of(a > b);
    if (op == "<=") return Value::of(a <= b);
    if (op == ">=") return Value::of(a >= b);
  } else if (l.is(K::Array) && r.is(K::Array)) {
    if (op == "+") {
      if (l.array->size() + r.array->size() > limits_.max_list_size) error(n, "list longer than the limit");
      List a = *l.array;
      a.insert(a.end(), r.array->begin(), r.array->end());
      return Value::of(std::move(a));
    }
  } else if (r.is(K::Array) && (op == "in" || op == "not in")) {
    bool member = false;
    for (const Value& x : *r.array) member = member || strict_equals(x, l);
    return Value::of(member == (op == "in"));
  }
  if ((l.is(K::String) || r.is(K::String)) && op == "+") {
    std::string s = to_js_string(l) + to_js_string(r);
    if (s.size() > limits_.max_output_bytes) error(n, "string longer than the output limit");
    return Value::of(std::move(s));
  }
  if (l.is(K::String) && r.is(K::String) && (op == "in" || op == "not in"))
    return Value::of((r.text.find(l.text) != std::string::npos) == (op == "in"));
  if (l.is(K::String) && r.is(K::Object) && (op == "in" || op == "not in"))
    return Value::of((r.find(l.text) != nullptr) == (op == "in"));
  error(n, "Unknown operator \"" + op + "\" between " + kind_name(l.kind) + " and " + kind_name(r.kind));
}

}  // namespace tfm::chat
