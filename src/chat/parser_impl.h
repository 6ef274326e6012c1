// The parser's class, shared by parser.cpp (statements) and parser_expressions.cpp.
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "tfm/error.h"

namespace tfm::chat {

constexpr int kMaxNesting = 200;  // brackets and parentheses inside one another

class Parser {
 public:
  Parser(const std::string& source, std::vector<Token> tokens) : source_(source), toks_(std::move(tokens)) {}

  std::vector<NodePtr> run() {
    std::vector<NodePtr> out;
    while (pos_ < toks_.size()) out.push_back(any());
    return out;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    const std::size_t off = pos_ < toks_.size() ? toks_[pos_].offset : source_.size();
    fail("chat template", describe_position(source_, off), ": ", one_line(what),
         pos_ < toks_.size() ? "" : " (unexpected end of template)");
  }
  bool is(Tok t, std::size_t ahead = 0) const { return pos_ + ahead < toks_.size() && toks_[pos_ + ahead].type == t; }
  bool is_ident(const char* name, std::size_t ahead = 0) const {
    return is(Tok::Identifier, ahead) && toks_[pos_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::OpenStatement) || !is(Tok::Identifier, 1)) return false;
    for (const char* n : names)
      if (toks_[pos_ + 1].value == n) return true;
    return false;
  }
  const Token& expect(Tok t, const char* what) {
    if (!is(t)) error(std::string("expected ") + what);
    return toks_[pos_++];
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) error(std::string("expected '") + name + "'");
    ++pos_;
  }
  void expect_end_tag(const char* name) {
    expect(Tok::OpenStatement, "'{%'");
    expect_ident(name);
    expect(Tok::CloseStatement, "'%}'");
  }
  NodePtr make(Node_kind k, std::uint32_t offset) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->offset = offset;
    return n;
  }
  std::uint32_t here() const { return pos_ < toks_.size() ? toks_[pos_].offset : static_cast<std::uint32_t>(source_.size()); }
  // Statements inside a block, until one of the named closing tags.
  std::vector<NodePtr> block_until(std::initializer_list<const char*> ends) {
    std::vector<NodePtr> out;
    while (!is_statement(ends)) {
      if (pos_ >= toks_.size()) {
        std::string names;
        for (const char* e : ends) names += std::string(names.empty() ? "" : " or ") + "{% " + e + " %}";
        error("missing " + names);
      }
      out.push_back(any());
    }
    return out;
  }

  NodePtr any();
  NodePtr statement();
  NodePtr set_statement(std::uint32_t at);
  NodePtr if_statement(std::uint32_t at);
  NodePtr for_statement(std::uint32_t at);
  NodePtr macro_statement(std::uint32_t at);
  NodePtr sequence(bool primary_only);
  NodePtr expression();
  NodePtr if_expression();
  NodePtr or_expression();
  NodePtr and_expression();
  NodePtr not_expression();
  NodePtr comparison();
  NodePtr additive();
  NodePtr multiplicative();
  NodePtr power();
  NodePtr test();
  NodePtr filter();
  NodePtr unary_sign();
  NodePtr call_member();
  NodePtr call(NodePtr callee);
  void arguments(Node& into);
  NodePtr member(NodePtr object);
  NodePtr subscript();
  NodePtr primary();
  NodePtr binary(NodePtr left, const std::string& op, NodePtr right) {
    auto n = make(Node_kind::Binary, left->offset);
    n->name = op;
    n->kids.push_back(std::move(left));
    n->kids.push_back(std::move(right));
    return n;
  }

  const std::string& source_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace tfm::chat
