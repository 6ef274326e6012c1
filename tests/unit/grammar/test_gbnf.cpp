// GBNF parsing and the byte-level matcher: what a grammar accepts, rejects, and the errors
// it gives for bad grammars.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/error.h"
#include "tfm/grammar.h"
#include "unit/grammar/byte_vocab.h"

namespace tfm {
namespace {

// A vocabulary of every single byte: the matcher then decides text byte by byte.
using testing::byte_vocab;
bool matches(const Grammar& g, std::string_view text) { return testing::accepts(g, text); }

TEST(Gbnf, LiteralsClassesAndRepetitions) {
  const Grammar g = Grammar::parse(R"(
    root ::= "a" digit{2,3} ("x" | "yz")* [^a-c\n]? # trailing comment
    digit ::= [0-9]
  )");
  EXPECT_TRUE(matches(g, "a12"));
  EXPECT_TRUE(matches(g, "a123xyzx"));
  EXPECT_TRUE(matches(g, "a123xd"));
  EXPECT_TRUE(matches(g, "a12\xc3\xa9"));  // é: a two-byte member of [^a-c\n]
  EXPECT_FALSE(matches(g, "a1"));
  EXPECT_FALSE(matches(g, "a12345"));  // 3 digits and one class member at most
  EXPECT_FALSE(matches(g, "a12b"));
  EXPECT_FALSE(matches(g, "a12yzb"));  // b is outside [^a-c\n]
  EXPECT_FALSE(matches(g, "a12\n"));
  EXPECT_FALSE(matches(g, "a12\xc3"));  // half a character is not a sentence
}

TEST(Gbnf, AnyCharacterIsValidUtf8Only) {
  const Grammar g = Grammar::parse("root ::= .+");
  EXPECT_TRUE(matches(g, "\xe2\x82\xac\xf0\x9f\x98\x80z"));
  EXPECT_FALSE(matches(g, "\xff"));
  EXPECT_FALSE(matches(g, "\xed\xa0\x80"));  // a surrogate's encoding
  EXPECT_FALSE(matches(g, "\xc0\xaf"));      // overlong
}

TEST(Gbnf, RecursionAndEscapes) {
  const Grammar g = Grammar::parse(R"g(root ::= "(" root ")" | "\x41\u00e9\t")g");
  EXPECT_TRUE(matches(g, "((A\xc3\xa9\t))"));
  EXPECT_FALSE(matches(g, "((A\xc3\xa9\t)"));
}

TEST(Gbnf, ErrorsNameTheLine) {
  auto message = [](std::string_view text) {
    try {
      Grammar::parse(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("root ::= foo").find("rule 'foo' is used but not defined"), std::string::npos);
  EXPECT_NE(message("a ::= \"x\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(message("root ::= root \"x\" | \"y\"").find("left recursion"), std::string::npos);
  EXPECT_NE(message("root ::= x? root | \"y\"\nx ::= \"a\"").find("left recursion"), std::string::npos);
  EXPECT_NE(message("root ::= \"x\" root").find("matches no text"), std::string::npos);
  EXPECT_NE(message("root ::=\n  \"a\"\n  [b-a]").find("line 3"), std::string::npos);
  EXPECT_NE(message("root ::= \"abc").find("unterminated string"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{3,2}").find("out of order"), std::string::npos);
  EXPECT_NE(message("root ::= \"a\"{99999}").find("repetition count"), std::string::npos);
  EXPECT_NE(message("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(message("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
}

// A grammar whose text can be read in exponentially many ways (fuzz_grammar's input: every
// '(' may open any of the alternatives) is refused with the reason as the matcher meets it,
// not followed for minutes; an unambiguous nesting of the same depth is followed.
TEST(GrammarMatcher, AGrammarTooAmbiguousToFollowIsAnErrorNotAHang) {
  const Grammar g = Grammar::parse("root ::= \"(\" root \")\" \"(\" root \")\" | . \"(%\" root \")\" | . \"(\" root \")\" | .\n");
  GrammarMatcher m(g, testing::byte_vocab());
  const std::string text(64, '(');
  const std::string error = test::error_message([&] {
    for (std::size_t i = 0; i < text.size(); ++i) {
      (void)m.allowed(static_cast<std::int64_t>(64 - i));
      ASSERT_TRUE(m.accept_bytes(text.substr(i, 1)));
    }
  });
  EXPECT_NE(error.find("too ambiguous to follow"), std::string::npos) << error;
  const Grammar nested = Grammar::parse("root ::= \"(\" root \")\" | \"x\"");
  EXPECT_TRUE(testing::accepts(nested, std::string(200, '(') + "x" + std::string(200, ')')));
}

TEST(GrammarMatcher, MaskOverMultiByteTokens) {
  // Tokens that end inside a character, and tokens spanning several elements.
  const std::vector<std::string> vocab = {"{", "}", "\"", "ab", "\xc3", "\xa9", "\xc3\xa9", "\"}", "", "x"};
  const auto trie = std::make_shared<const TokenTrie>(vocab);
  const Grammar g = Grammar::parse(R"(root ::= "{" "\"" [a-b\u00e9]* "\"" "}")");
  GrammarMatcher m(g, trie);
  auto allowed = [&](std::int64_t left = 0) {
    std::vector<int> ids;
    const TokenMask& mask = m.allowed(left);
    for (std::int32_t t = 0; t < trie->vocab_size(); ++t)
      if (mask.test(t)) ids.push_back(t);
    return ids;
  };
  EXPECT_EQ(allowed(), std::vector<int>({0}));
  m.accept(0);
  EXPECT_EQ(allowed(), std::vector<int>({2}));
  m.accept(2);
  EXPECT_EQ(allowed(), std::vector<int>({2, 3, 4, 6, 7}));
  m.accept(4);  // half of é
  EXPECT_EQ(allowed(), std::vector<int>({5}));
  EXPECT_FALSE(m.accepting());
  m.accept(5);
  EXPECT_EQ(m.bytes_to_finish(), 2);
  // With two tokens left, only tokens after which the rest fits one more token of ONE byte
  // (the matcher counts on single bytes, not on longer tokens): '"' (then '}') and '"}'.
  EXPECT_EQ(allowed(2), std::vector<int>({2, 7}));
  EXPECT_EQ(allowed(3), std::vector<int>({2, 3, 6, 7}));  // half an é would leave 3 bytes
  // With one left, only the token that finishes.
  EXPECT_EQ(allowed(1), std::vector<int>({7}));
  m.accept(7);
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.allowed().any());
  EXPECT_THROW(m.accept(0), Error);
}

}  // namespace
}  // namespace tfm

namespace tfm {
namespace {

TEST(GrammarMatcher, CompleteTextEndsRatherThanStartingWhatCannotFinish) {
  // After "x" the text is complete; another "-yyyy" needs 5 bytes. With 3 tokens left no token
  // may start it (the caller ends the text instead); with 6 left it may.
  const Grammar g = Grammar::parse(R"(root ::= "x" ("-yyyy")*)");
  GrammarMatcher m(g, testing::byte_vocab());
  ASSERT_TRUE(m.accept_bytes("x"));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.allowed(3).any());
  EXPECT_TRUE(m.allowed(6).test('-'));
  // Not complete and short of budget: the tokens nearest to a finish, rather than none.
  ASSERT_TRUE(m.accept_bytes("-y"));
  EXPECT_TRUE(m.allowed(2).test('y'));
}

}  // namespace
}  // namespace tfm
