// Chat-template evaluation: statements render into a string, expressions give Values, with the
// scoping of @huggingface/jinja (a for loop has one scope for all its iterations; `set` writes
// the innermost scope; a macro sees the scope it is called from).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace tfm::chat {

struct Env {
  Dict vars;
  Env* parent = nullptr;
  const Value* lookup(const std::string& name) const;
  void set(const std::string& name, Value v);
};

// raise_exception(msg) in the template: carried up to the caller of render, which reports it.
struct TemplateRaised {
  std::string message;
};
// An error inside a global function (range, namespace...): the call site adds its position.
struct CallFailed {
  std::string message;
};

struct Limits {
  std::size_t max_output_bytes = std::size_t{64} << 20;
  int max_depth = 200;               // nested expressions, blocks and macro calls
  std::size_t max_list_size = 100000;  // range() and list concatenation
};

class Interpreter {
 public:
  Interpreter(const Program& program, Limits limits) : program_(program), limits_(limits) {}

  std::string render(Env& globals);

  Value eval(const Node& n, Env& env);
  void exec_block(const std::vector<NodePtr>& body, Env& env, std::string& out);
  Args eval_args(const std::vector<NodePtr>& kids, std::size_t first, Env& env);
  [[noreturn]] void error(const Node& at, const std::string& what) const;
  const Limits& limits() const { return limits_; }

 private:
  void exec(const Node& n, Env& env, std::string& out);
  void exec_for(const Node& n, Env& env, std::string& out);
  void exec_set(const Node& n, Env& env);
  void define_macro(const Node& n, Env& env);
  Value eval_binary(const Node& n, Env& env);
  Value eval_member(const Node& n, Env& env);
  Value eval_call(const Node& n, Env& env);
  void append(std::string& out, const std::string& s, const Node& at) const;

  const Program& program_;
  Limits limits_;
  int depth_ = 0;
};

// builtins.cpp: filters, tests, methods on values and the global functions.
// `node` is a Filter (arguments from kids[1]) or a FilterBlock (arguments from kids[0]).
Value apply_filter(Interpreter& in, const Node& node, const Value& operand, Env& env);
bool apply_test(Interpreter& in, const Node& at, const std::string& name, const Value& a, const Value* b);
// `obj.key` / `obj[key]`: entries, indexes and the built-in methods of strings, lists, dicts.
Value member_of(Interpreter& in, const Node& at, const Value& obj, const Value& key);
// The built-in methods of a dict (get, items, keys, values) bound to it; undefined for others.
Value dict_method(Interpreter& in, const Node& at, const Value& obj, const std::string& name);
Value slice_of(Interpreter& in, const Node& at, const Value& obj, const Value& start, const Value& stop,
               const Value& step);
void add_globals(Interpreter& in, Env& env);

}  // namespace tfm::chat
