// Constrained decoding: grammars (llama.cpp's GBNF, or a JSON Schema turned into one) that
// decide, token by token, which tokens of the WHOLE vocabulary may come next, so what a model
// writes always parses — also a model that has learnt nothing (docs/structured_output.md).
//
//   Grammar g = Grammar::from_json_schema(R"({"type": "object", "properties": {...}})");
//   auto vocab = std::make_shared<const TokenTrie>(token_bytes(tokenizer));   // once per model
//   GrammarMatcher m(g, vocab);
//   for (;;) {
//     const TokenMask& ok = m.allowed(tokens_left);   // bit t: token t may come next
//     ... sample among ok (an end token only when m.accepting()) ...;  m.accept(token);
//   }
//
// The automaton works on BYTES: character classes are compiled to their UTF-8 byte sequences,
// so a token that ends inside a character is fine, and every accepted text is valid UTF-8.
// `tokens_left` makes the promise hold under a token budget: once the budget comes down to the
// shortest way to finish, only tokens that keep a finish within it are allowed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

struct GrammarRules;  // the compiled, byte-level rules (src/grammar/rules.h)

class Grammar {
 public:
  // llama.cpp's GBNF: `name ::= alternatives`, "literals", [classes], [^negated], ., (groups),
  // * + ? {m} {m,} {m,n}, # comments; the start rule is `root`. Errors name the line.
  static Grammar parse(std::string_view gbnf, const std::string& where = "grammar");
  // JSON Schema text (docs/structured_output.md lists the keywords); a keyword that would
  // constrain the output and is not supported is an error naming it and its place.
  static Grammar from_json_schema(std::string_view schema, const std::string& where = "json_schema");
  // Any JSON object (OpenAI's response_format {"type": "json_object"}).
  static Grammar json_object();

  const std::string& gbnf() const { return gbnf_; }  // the source (a schema's: generated)
  const GrammarRules& rules() const { return *rules_; }
  const std::shared_ptr<const GrammarRules>& shared_rules() const { return rules_; }

 private:
  std::string gbnf_;
  std::shared_ptr<const GrammarRules> rules_;
};

// JSON Schema text to GBNF text (what Grammar::from_json_schema parses). The schema's rule is
// `root_name`; its helper rules, and the shared json-*, format-* and ws rules, come after it, so
// a larger grammar can embed it under another name.
std::string json_schema_to_gbnf(std::string_view schema, const std::string& where = "json_schema",
                                const std::string& root_name = "root");

// The vocabulary as bytes in a trie. token_bytes[t] is what token t adds to the text; an
// empty entry (special tokens, the end tokens) is never allowed by a grammar.
class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  std::int64_t vocab_size() const { return vocab_; }
  const std::string& bytes(std::int32_t token) const { return bytes_[static_cast<std::size_t>(token)]; }

  struct Node {
    std::int32_t first_child = 0, num_children = 0;
    std::int32_t first_token = 0, num_tokens = 0;  // into tokens_
    std::uint8_t byte = 0;
  };
  const std::vector<Node>& nodes() const { return nodes_; }   // nodes_[0]: the root
  const std::vector<std::int32_t>& tokens() const { return tokens_; }

 private:
  std::int64_t vocab_ = 0;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<std::int32_t> tokens_;
};

// A bitmask over the vocabulary.
struct TokenMask {
  std::vector<std::uint64_t> words;
  bool test(std::int32_t t) const { return (words[static_cast<std::size_t>(t) >> 6] >> (t & 63)) & 1; }
  bool any() const;
  std::int64_t count() const;
};

class GrammarMatcher {
 public:
  GrammarMatcher(const Grammar& grammar, std::shared_ptr<const TokenTrie> vocab);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // The tokens that may come next. tokens_left > 0: counting this one, at most that many
  // tokens remain, and only tokens after which the shortest finish still fits are allowed.
  const TokenMask& allowed(std::int64_t tokens_left = 0);
  // Takes token t (its bytes); throws when the grammar does not allow it.
  void accept(std::int32_t token);
  // Takes raw bytes (a prompt's forced prefix, tests); false and unchanged when not allowed.
  bool accept_bytes(std::string_view bytes);
  bool accepting() const;      // the text so far is a complete sentence of the grammar
  bool can_continue() const;   // some longer text is still possible
  std::int64_t bytes_to_finish() const;  // length of the shortest completion (0 when accepting)

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tfm
