// A vocabulary of the 256 single bytes: with it a grammar's matcher decides text byte by byte.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/grammar.h"

namespace tfm::testing {

inline std::shared_ptr<const TokenTrie> byte_vocab() {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.emplace_back(1, static_cast<char>(b));
  return std::make_shared<const TokenTrie>(v);
}

// Is `text` a complete sentence of g?
inline bool accepts(const Grammar& g, std::string_view text) {
  GrammarMatcher m(g, byte_vocab());
  return m.accept_bytes(text) && m.accepting();
}

}  // namespace tfm::testing
