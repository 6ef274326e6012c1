// Recursive-descent parser, statements: {% set %}, {% if %}/elif/else, {% for %} with else and
// an item filter, {% macro %}, {% filter %}, break/continue (expressions: parser_expressions.cpp).
#include "chat/parser.h"

#include "chat/parser_impl.h"

namespace tfm::chat {

NodePtr Parser::any() {
  const Token& t = toks_[pos_];
  switch (t.type) {
    case Tok::Comment: {
      auto n = make(Node_kind::Comment, t.offset);
      ++pos_;
      return n;
    }
    case Tok::Text: {
      auto n = make(Node_kind::Text, t.offset);
      n->name = t.value;
      ++pos_;
      return n;
    }
    case Tok::OpenStatement: return statement();
    case Tok::OpenExpression: {
      ++pos_;
      auto e = expression();
      expect(Tok::CloseExpression, "'}}'");
      return e;
    }
    default: error("unexpected '" + t.value + "'");
  }
}

NodePtr Parser::statement() {
  const std::uint32_t at = toks_[pos_].offset;
  ++pos_;  // {%
  if (!is(Tok::Identifier)) error("expected a statement name after '{%'");
  // Blocks inside blocks recurse here: bound them like brackets.
  if (++nesting_ > kMaxNesting) error("blocks nested too deeply");
  struct Leave {
    int& n;
    ~Leave() { --n; }
  } leave{nesting_};
  const std::string name = toks_[pos_++].value;
  if (name == "set") return set_statement(at);
  if (name == "if") {
    auto n = if_statement(at);
    expect_end_tag("endif");
    return n;
  }
  if (name == "for") {
    auto n = for_statement(at);
    expect_end_tag("endfor");
    return n;
  }
  if (name == "macro") {
    auto n = macro_statement(at);
    expect_end_tag("endmacro");
    return n;
  }
  if (name == "break" || name == "continue") {
    expect(Tok::CloseStatement, "'%}'");
    return make(name == "break" ? Node_kind::Break : Node_kind::Continue, at);
  }
  if (name == "filter") {
    auto n = make(Node_kind::FilterBlock, at);
    auto f = primary();
    if (f->kind != Node_kind::Identifier) error("expected a filter name");
    n->name = f->name;
    if (is(Tok::OpenParen)) {
      n->flag = true;
      arguments(*n);
    }
    expect(Tok::CloseStatement, "'%}'");
    n->body = block_until({"endfilter"});
    expect_end_tag("endfilter");
    return n;
  }
  --pos_;
  error("unknown statement '" + name + "'");
}

NodePtr Parser::set_statement(std::uint32_t at) {
  auto n = make(Node_kind::Set, at);
  n->kids.push_back(sequence(false));
  if (is(Tok::Equals)) {
    ++pos_;
    n->kids.push_back(sequence(false));
  } else {
    expect(Tok::CloseStatement, "'=' or '%}'");
    n->body = block_until({"endset"});
    expect(Tok::OpenStatement, "'{%'");
    expect_ident("endset");
  }
  expect(Tok::CloseStatement, "'%}'");
  return n;
}

NodePtr Parser::if_statement(std::uint32_t at) {
  auto n = make(Node_kind::If, at);
  n->kids.push_back(expression());
  expect(Tok::CloseStatement, "'%}'");
  n->body = block_until({"elif", "else", "endif"});
  if (is_statement({"elif"})) {
    const std::uint32_t elif_at = toks_[pos_].offset;
    pos_ += 2;
    n->alt.push_back(if_statement(elif_at));
  } else if (is_statement({"else"})) {
    pos_ += 2;
    expect(Tok::CloseStatement, "'%}'");
    n->alt = block_until({"endif"});
  }
  return n;
}

NodePtr Parser::for_statement(std::uint32_t at) {
  auto n = make(Node_kind::For, at);
  auto target = sequence(true);
  if (target->kind != Node_kind::Identifier && target->kind != Node_kind::TupleLit)
    error("expected a loop variable name or tuple");
  n->kids.push_back(std::move(target));
  expect_ident("in");
  auto iterable = expression();
  if (iterable->kind == Node_kind::Select) {  // for x in xs if cond
    n->kids.push_back(std::move(iterable->kids[0]));
    n->kids.push_back(std::move(iterable->kids[1]));
  } else {
    n->kids.push_back(std::move(iterable));
  }
  expect(Tok::CloseStatement, "'%}'");
  n->body = block_until({"endfor", "else"});
  if (is_statement({"else"})) {
    pos_ += 2;
    expect(Tok::CloseStatement, "'%}'");
    n->alt = block_until({"endfor"});
  }
  return n;
}

NodePtr Parser::macro_statement(std::uint32_t at) {
  auto n = make(Node_kind::Macro, at);
  if (!is(Tok::Identifier)) error("expected a macro name");
  n->name = toks_[pos_++].value;
  if (!is(Tok::OpenParen)) error("expected '(' after the macro name");
  Node params{};
  arguments(params);
  for (auto& p : params.kids) {
    if (p->kind != Node_kind::Identifier && p->kind != Node_kind::Kwarg) error("macro parameters are names or name=default");
    n->kids.push_back(std::move(p));
  }
  expect(Tok::CloseStatement, "'%}'");
  n->body = block_until({"endmacro"});
  return n;
}

Program parse(const std::string& source) {
  Program p;
  p.source = source;
  Parser parser(p.source, tokenize(p.source));
  p.body = parser.run();
  return p;
}

}  // namespace tfm::chat
