// A JSON Schema "pattern" (an ECMAScript regular expression, as ajv runs it with the u flag)
// turned into a GBNF expression over the CONTENT of a JSON string: every character the
// regex matches is written the way JSON writes it (", \ and control characters escaped), so
// the string, once parsed, matches the pattern.
#pragma once

#include <string>
#include <string_view>

#include "grammar/codepoints.h"

namespace tfm {

// The pattern's language as a GBNF expression (parenthesised); unanchored ends match any
// characters there. `where` names the schema place in errors (lookarounds, backreferences,
// word boundaries and anchors inside the pattern are refused).
std::string regex_to_gbnf(std::string_view pattern, const std::string& where);

// One JSON-string character from `set`, as a GBNF expression: raw where JSON allows it,
// escaped where it must be.
std::string json_char_gbnf(const CodePointSet& set);

// A GBNF literal ("...") of raw bytes.
std::string gbnf_literal(std::string_view bytes);

}  // namespace tfm
