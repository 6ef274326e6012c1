// Fuzz target: the grammar compilers and the matcher. The first byte picks GBNF (even) or JSON
// Schema (odd) for the rest; what compiles is then run: the matcher takes the input's bytes one
// at a time over a vocabulary of single bytes and a few longer tokens, asking for the mask at
// each step. Bad grammars and schemas must be tfm::Error (the server answers 400 for them);
// anything else, a crash, a hang or a sanitizer report fails.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/grammar.h"

namespace {

std::shared_ptr<const tfm::TokenTrie> vocab() {
  static const auto v = [] {
    std::vector<std::string> t;
    for (int b = 0; b < 256; ++b) t.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"{\"", "\":", "\",\"", "true", "null", "\xc3\xa9", "\xe2\x82", "  ", "\n"}) t.emplace_back(s);
    t.emplace_back();  // a special token: never allowed
    return std::make_shared<const tfm::TokenTrie>(t);
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const tfm::Grammar g = (data[0] & 1) ? tfm::Grammar::from_json_schema(text) : tfm::Grammar::parse(text);
    tfm::GrammarMatcher m(g, vocab());
    for (std::size_t i = 0; i < text.size() && i < 64; ++i) {
      (void)m.allowed(static_cast<std::int64_t>(64 - i));  // under a budget (steered)
      const tfm::TokenMask mask = m.allowed();              // without one
      const auto byte = static_cast<std::uint8_t>(text[i]);
      const bool ok = m.accept_bytes(text.substr(i, 1));
      tfm::fuzz::require(ok == mask.test(byte), "the mask allows exactly the bytes the matcher takes");
      if (!ok) break;
    }
  } catch (const tfm::Error&) {
  } catch (const std::exception&) {
    tfm::fuzz::require(false, "grammar errors are tfm::Error");
  }
  return 0;
}
