// Chat-template parser: tokens to a syntax tree, with the grammar and operator precedence of
// @huggingface/jinja. A syntax error is one tfm::Error naming the line and column.
#pragma once

#include <string>

#include "chat/ast.h"

namespace tfm::chat {

Program parse(const std::string& source);

}  // namespace tfm::chat
