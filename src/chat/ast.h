// The chat-template syntax tree: one node type with a kind, as the language is small.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/value.h"

namespace tfm::chat {

enum class Node_kind : std::uint8_t {
  // statements
  Text, Comment, Set, If, For, Macro, Break, Continue, FilterBlock,
  // expressions
  Literal, Identifier, ArrayLit, TupleLit, ObjectLit, Member, Slice, Call, Kwarg, Unary, Binary, Filter,
  Test, Select, Ternary
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  Node_kind kind;
  std::uint32_t offset = 0;  // where it starts in the template text
  std::string name;          // identifier, operator, filter/test/macro name, text
  Value literal;             // Literal
  bool flag = false;         // Member: computed ([]); Test: negated; Filter: called with ()
  // Operands, in an order fixed per kind (ast.h users: parser.cpp, interpreter.cpp):
  //   Set: target, value?  If: test  For: target, iterable(, select test)  Member: object, key
  //   Slice: start, stop, step (null when absent)  Call: callee, args...  Filter: operand, args...
  //   Kwarg: value  Unary: operand  Binary: left, right  Test: operand  Select: value, test
  //   Ternary: test, if_true, if_false  ObjectLit: key, value, key, value...  Macro: params...
  std::vector<NodePtr> kids;
  std::vector<NodePtr> body, alt;  // statements: the block and the else/elif block
};

// A parsed template: its statements, and the source (for error positions).
struct Program {
  std::string source;
  std::vector<NodePtr> body;
};

}  // namespace tfm::chat
