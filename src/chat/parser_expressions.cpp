// Recursive-descent parser, expressions. Precedence, loosest first: `x if c else y`, or, and,
// not, comparisons and `in` (one level), + - ~, * / // %, **, `is` tests, `|` filters, unary
// sign, calls/members/slices, primaries. `a if c` with no else filters a for loop's items.
#include <cstdlib>

#include "chat/parser_impl.h"

namespace tfm::chat {

NodePtr Parser::sequence(bool primary_only) {
  auto first = primary_only ? primary() : expression();
  if (!is(Tok::Comma)) return first;
  auto tuple = make(Node_kind::TupleLit, first->offset);
  tuple->kids.push_back(std::move(first));
  while (is(Tok::Comma)) {
    ++pos_;
    tuple->kids.push_back(primary_only ? primary() : expression());
  }
  return tuple;
}

NodePtr Parser::expression() { return if_expression(); }

NodePtr Parser::if_expression() {
  auto a = or_expression();
  if (!is_ident("if")) return a;
  ++pos_;
  auto cond = or_expression();
  if (is_ident("else")) {
    ++pos_;
    auto n = make(Node_kind::Ternary, a->offset);
    n->kids.push_back(std::move(cond));
    n->kids.push_back(std::move(a));
    n->kids.push_back(if_expression());
    return n;
  }
  auto n = make(Node_kind::Select, a->offset);
  n->kids.push_back(std::move(a));
  n->kids.push_back(std::move(cond));
  return n;
}

NodePtr Parser::or_expression() {
  auto left = and_expression();
  while (is_ident("or")) {
    ++pos_;
    left = binary(std::move(left), "or", and_expression());
  }
  return left;
}

NodePtr Parser::and_expression() {
  auto left = not_expression();
  while (is_ident("and")) {
    ++pos_;
    left = binary(std::move(left), "and", not_expression());
  }
  return left;
}

NodePtr Parser::not_expression() {
  if (!is_ident("not")) return comparison();
  auto n = make(Node_kind::Unary, here());
  ++pos_;
  n->name = "not";
  n->kids.push_back(not_expression());
  return n;
}

NodePtr Parser::comparison() {
  auto left = additive();
  for (;;) {
    std::string op;
    if (is_ident("not") && is_ident("in", 1)) {
      op = "not in";
      pos_ += 2;
    } else if (is_ident("in")) {
      op = "in";
      ++pos_;
    } else if (is(Tok::Comparison)) {
      op = toks_[pos_++].value;
    } else {
      return left;
    }
    left = binary(std::move(left), op, additive());
  }
}

NodePtr Parser::additive() {
  auto left = multiplicative();
  while (is(Tok::Additive)) {
    const std::string op = toks_[pos_++].value;
    left = binary(std::move(left), op, multiplicative());
  }
  return left;
}

NodePtr Parser::multiplicative() {
  auto left = power();
  while (is(Tok::Multiplicative)) {
    const std::string op = toks_[pos_++].value;
    left = binary(std::move(left), op, power());
  }
  return left;
}

NodePtr Parser::power() {
  auto left = test();
  while (is(Tok::Power)) {
    ++pos_;
    left = binary(std::move(left), "**", test());
  }
  return left;
}

NodePtr Parser::test() {
  auto operand = filter();
  while (is_ident("is")) {
    ++pos_;
    auto n = make(Node_kind::Test, operand->offset);
    if (is_ident("not")) {
      n->flag = true;
      ++pos_;
    }
    // `is none` / `is true` name tests, not the constants
    if (!is(Tok::Identifier)) error("expected a test name after 'is'");
    n->name = toks_[pos_++].value;
    n->kids.push_back(std::move(operand));
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::filter() {
  auto operand = unary_sign();
  while (is(Tok::Pipe)) {
    ++pos_;
    if (!is(Tok::Identifier)) error("expected a filter name after '|'");
    auto n = make(Node_kind::Filter, operand->offset);
    n->name = toks_[pos_++].value;
    n->kids.push_back(std::move(operand));
    if (is(Tok::OpenParen)) {
      n->flag = true;
      arguments(*n);
    }
    operand = std::move(n);
  }
  return operand;
}

NodePtr Parser::unary_sign() {
  if ((is(Tok::Unary) || is(Tok::Additive)) && (toks_[pos_].value == "-" || toks_[pos_].value == "+")) {
    auto n = make(Node_kind::Unary, here());
    n->name = toks_[pos_++].value;
    if (++nesting_ > kMaxNesting) error("expression nested too deeply");
    n->kids.push_back(unary_sign());
    --nesting_;
    return n;
  }
  return call_member();
}

NodePtr Parser::call_member() {
  auto m = member(primary());
  if (is(Tok::OpenParen)) return call(std::move(m));
  return m;
}

NodePtr Parser::call(NodePtr callee) {
  auto n = make(Node_kind::Call, callee->offset);
  n->kids.push_back(std::move(callee));
  arguments(*n);
  NodePtr e = member(std::move(n));
  if (is(Tok::OpenParen)) return call(std::move(e));
  return e;
}

// ( arg, name=value, ... ) appended to into.kids
void Parser::arguments(Node& into) {
  expect(Tok::OpenParen, "'('");
  if (++nesting_ > kMaxNesting) error("expression nested too deeply");
  while (!is(Tok::CloseParen)) {
    if (pos_ >= toks_.size()) error("missing ')'");
    if (is(Tok::Identifier) && is(Tok::Equals, 1)) {
      auto kw = make(Node_kind::Kwarg, here());
      kw->name = toks_[pos_].value;
      pos_ += 2;
      kw->kids.push_back(expression());
      into.kids.push_back(std::move(kw));
    } else {
      into.kids.push_back(expression());
    }
    if (is(Tok::Comma)) {
      ++pos_;
    } else if (!is(Tok::CloseParen)) {
      error("expected ',' or ')' in the argument list");
    }
  }
  ++pos_;
  --nesting_;
}

NodePtr Parser::member(NodePtr object) {
  while (is(Tok::Dot) || is(Tok::OpenSquare)) {
    const bool computed = is(Tok::OpenSquare);
    ++pos_;
    auto n = make(Node_kind::Member, object->offset);
    n->flag = computed;
    n->kids.push_back(std::move(object));
    if (computed) {
      if (++nesting_ > kMaxNesting) error("expression nested too deeply");
      n->kids.push_back(subscript());
      --nesting_;
      expect(Tok::CloseSquare, "']'");
    } else {
      auto key = primary();
      if (key->kind != Node_kind::Identifier &&
          !(key->kind == Node_kind::Literal && key->literal.is(Value::Kind::Int)))
        error("expected a name or an integer after '.'");
      n->kids.push_back(std::move(key));
    }
    object = std::move(n);
  }
  return object;
}

// Inside [ ]: an index, or a slice start:stop:step with any part left out.
NodePtr Parser::subscript() {
  std::vector<NodePtr> parts;
  bool slice = false;
  const std::uint32_t at = here();
  while (!is(Tok::CloseSquare)) {
    if (pos_ >= toks_.size()) error("missing ']'");
    if (is(Tok::Colon)) {
      parts.push_back(nullptr);
      ++pos_;
      slice = true;
    } else {
      parts.push_back(expression());
      if (is(Tok::Colon)) {
        ++pos_;
        slice = true;
      }
    }
  }
  if (parts.empty()) error("expected an index or a slice inside '[]'");
  if (!slice) return std::move(parts[0]);
  if (parts.size() > 3) error("a slice has at most 3 parts");
  auto n = make(Node_kind::Slice, at);
  parts.resize(3);
  for (auto& p : parts) n->kids.push_back(std::move(p));
  return n;
}

NodePtr Parser::primary() {
  if (pos_ >= toks_.size()) error("expected an expression");
  const Token& t = toks_[pos_++];
  switch (t.type) {
    case Tok::Number: {
      auto n = make(Node_kind::Literal, t.offset);
      if (t.value.find('.') != std::string::npos)
        n->literal = Value::of_float(std::strtod(t.value.c_str(), nullptr));
      else
        n->literal = Value::of_int(std::strtoll(t.value.c_str(), nullptr, 10));
      return n;
    }
    case Tok::String: {
      auto n = make(Node_kind::Literal, t.offset);
      std::string s = t.value;
      while (is(Tok::String)) s += toks_[pos_++].value;  // adjacent literals join
      n->literal = Value::of(std::move(s));
      return n;
    }
    case Tok::Identifier: {
      auto n = make(Node_kind::Identifier, t.offset);
      n->name = t.value;
      return n;
    }
    case Tok::OpenParen: {
      if (++nesting_ > kMaxNesting) error("expression nested too deeply");
      auto e = sequence(false);
      --nesting_;
      expect(Tok::CloseParen, "')'");
      return e;
    }
    case Tok::OpenSquare:
    case Tok::OpenCurly: {
      const bool list = t.type == Tok::OpenSquare;
      const Tok close = list ? Tok::CloseSquare : Tok::CloseCurly;
      auto n = make(list ? Node_kind::ArrayLit : Node_kind::ObjectLit, t.offset);
      if (++nesting_ > kMaxNesting) error("expression nested too deeply");
      while (!is(close)) {
        if (pos_ >= toks_.size()) error(list ? "missing ']'" : "missing '}'");
        n->kids.push_back(expression());
        if (!list) {
          expect(Tok::Colon, "':' between a key and its value");
          n->kids.push_back(expression());
        }
        if (is(Tok::Comma)) ++pos_;
      }
      ++pos_;
      --nesting_;
      return n;
    }
    default:
      --pos_;
      error("unexpected '" + t.value + "'");
  }
}

}  // namespace tfm::chat
