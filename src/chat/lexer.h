// Chat-template lexer: Hugging Face's preprocessing (trim_blocks, lstrip_blocks, the final
// newline dropped) and tokenization, with every token keeping its offset in the original text
// so errors name a line and column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tfm::chat {

enum class Tok : std::uint8_t {
  Text, Number, String, Identifier, Equals, OpenParen, CloseParen, OpenStatement, CloseStatement,
  OpenExpression, CloseExpression, OpenSquare, CloseSquare, OpenCurly, CloseCurly, Comma, Dot, Colon,
  Pipe, Additive, Multiplicative, Power, Comparison, Unary, Comment
};

struct Token {
  Tok type;
  std::string value;
  std::uint32_t offset;  // byte offset in the original template text
};

// "line L, column C" (1-based, column in bytes) of a byte offset in `source`.
std::string describe_position(const std::string& source, std::size_t offset);

// `s` with control characters written as \n, \t, \xHH: error messages stay one line.
std::string one_line(const std::string& s);

// Throws tfm::Error("chat template", "line L, column C: ...") on a lexical error.
std::vector<Token> tokenize(const std::string& source);

}  // namespace tfm::chat
