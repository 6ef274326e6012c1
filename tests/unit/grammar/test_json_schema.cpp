// JSON Schema to grammar: what the generated grammar accepts and refuses, decided byte by
// byte, and the errors for keywords and schemas it does not handle.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/grammar.h"
#include "unit/grammar/byte_vocab.h"

namespace tfm {
namespace {

using testing::byte_vocab;
using testing::accepts;

std::string error_of(std::string_view schema) {
  try {
    Grammar::from_json_schema(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonSchema, ObjectsRequiredOptionalAndOrder) {
  const Grammar g = Grammar::from_json_schema(R"({"type": "object", "properties": {
      "b": {"type": "integer"}, "a": {"type": "string", "maxLength": 3}, "c": {"type": "boolean"}},
      "required": ["a"], "additionalProperties": false})");
  EXPECT_TRUE(accepts(g, R"({"a":"xyz"})"));
  EXPECT_TRUE(accepts(g, R"({"b":-12,"a":"","c":true})"));
  EXPECT_TRUE(accepts(g, R"({ "b" : 0 , "a":"\u00e9\n" })"));
  EXPECT_FALSE(accepts(g, R"({"b":1})"));             // a is required
  EXPECT_FALSE(accepts(g, R"({"a":"x","b":1})"));      // declared order (b before a)
  EXPECT_FALSE(accepts(g, R"({"a":"wxyz"})"));         // maxLength
  EXPECT_FALSE(accepts(g, R"({"a":"x","d":1})"));      // no extra properties
  EXPECT_FALSE(accepts(g, R"({"b":01,"a":""})"));      // JSON has no leading zeros
  EXPECT_FALSE(accepts(g, R"({"a":"\ud800"})"));       // no lone surrogates
  EXPECT_FALSE(accepts(g, R"({,"a":""})"));
}

TEST(JsonSchema, ArraysEnumsConstAndAlternatives) {
  const Grammar g = Grammar::from_json_schema(R"({"type": "array", "items": {"anyOf": [
      {"enum": ["x", 2, null]}, {"const": {"k": [1]}}, {"type": "number"}]}, "minItems": 1, "maxItems": 3})");
  EXPECT_TRUE(accepts(g, R"(["x"])"));
  EXPECT_TRUE(accepts(g, R"([2, null, {"k":[1]}])"));
  EXPECT_TRUE(accepts(g, R"([1.5e-3])"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, R"([1,2,3,4])"));
  EXPECT_FALSE(accepts(g, R"(["y"])"));
  const Grammar tuple = Grammar::from_json_schema(R"({"prefixItems": [{"type": "string"}, {"type": "null"}], "items": false})");
  EXPECT_TRUE(accepts(tuple, R"(["a", null])"));
  EXPECT_FALSE(accepts(tuple, R"(["a", null, 1])"));
}

TEST(JsonSchema, RefsRecursionAndTypeLists) {
  const Grammar g = Grammar::from_json_schema(R"({"$defs": {"t": {"type": "object",
      "properties": {"v": {"type": ["integer", "null"]}, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
      "required": ["v", "kids"]}}, "$ref": "#/$defs/t"})");
  EXPECT_TRUE(accepts(g, R"({"v":1,"kids":[{"v":null,"kids":[]},{"v":2,"kids":[{"v":3,"kids":[]}]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"kids":[{"v":"s","kids":[]}]})"));
}

TEST(JsonSchema, FormatsAndPatterns) {
  auto string_schema = [](const std::string& kw) { return Grammar::from_json_schema("{\"type\": \"string\", " + kw + "}"); };
  const Grammar date = string_schema(R"("format": "date")");
  EXPECT_TRUE(accepts(date, R"("2024-02-28")"));
  EXPECT_TRUE(accepts(date, R"("1999-12-31")"));
  EXPECT_FALSE(accepts(date, R"("2024-02-30")"));
  EXPECT_FALSE(accepts(date, R"("2024-04-31")"));
  EXPECT_FALSE(accepts(date, R"("2024-13-01")"));
  const Grammar uuid = string_schema(R"("format": "uuid")");
  EXPECT_TRUE(accepts(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(accepts(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
  const Grammar ip = string_schema(R"("format": "ipv4")");
  EXPECT_TRUE(accepts(ip, R"("255.0.10.199")"));
  EXPECT_FALSE(accepts(ip, R"("256.0.0.1")"));
  EXPECT_FALSE(accepts(ip, R"("01.0.0.1")"));
  const Grammar dt = string_schema(R"("format": "date-time")");
  EXPECT_TRUE(accepts(dt, R"("2024-01-02T03:04:05.123+05:30")"));
  EXPECT_FALSE(accepts(dt, R"("2024-01-02T24:00:00Z")"));

  const Grammar p = string_schema(R"("pattern": "^(foo|ba[rz])-\\w{2,3}\\.?$")");
  EXPECT_TRUE(accepts(p, R"("foo-ab")"));
  EXPECT_TRUE(accepts(p, R"("baz-a_1.")"));
  EXPECT_FALSE(accepts(p, R"("bar-a")"));
  EXPECT_FALSE(accepts(p, R"("qux-ab")"));
  // Unanchored: anything around the match; characters JSON must escape are escaped.
  const Grammar q = string_schema(R"("pattern": "[0-9]\"")");
  EXPECT_TRUE(accepts(q, R"("ab 7\" c")"));
  EXPECT_TRUE(accepts(q, R"("7\"")"));
  EXPECT_FALSE(accepts(q, R"("7"")"));
  EXPECT_FALSE(accepts(q, R"("ab")"));
  const Grammar neg = string_schema(R"("pattern": "^[^a-z\\s]+$")");
  EXPECT_TRUE(accepts(neg, "\"AB\\\\\\u0001\xc3\xa9\""));  // backslash, U+0001 escaped, é raw
  EXPECT_FALSE(accepts(neg, R"("A b")"));
  EXPECT_FALSE(accepts(neg, R"("A\nb")"));
}

TEST(JsonSchema, RefusesWhatItDoesNotHandle) {
  EXPECT_NE(error_of(R"({"type": "integer", "minimum": 0})").find("unsupported keyword 'minimum' at '/'"), std::string::npos);
  EXPECT_NE(error_of(R"({"properties": {"a": {"type": "number", "multipleOf": 2}}})").find("'multipleOf' at '/properties/a'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "format": "hostname"})").find("unsupported format 'hostname'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "a\\bb"})").find("word boundaries"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "pattern": "a^b"})").find("anchors"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "array", "uniqueItems": true})").find("uniqueItems"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#/nowhere"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "http://x/y"})").find("not local"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref": "#"})").find("matches no text"), std::string::npos);  // it only refers to itself
  EXPECT_NE(error_of(R"({"type": "object", "required": ["x"], "additionalProperties": false})").find("forbidden"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum": []})").find("non-empty"), std::string::npos);
  EXPECT_NE(error_of(R"({"type": "string", "maxLength": 1, "minLength": 2})").find("maxLength < minLength"), std::string::npos);
  EXPECT_NE(error_of("{not json").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of("false").find("allows no value"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type": "string", "title": "ok", "description": "annotations are fine"})"), "no error");
}

// A model split over processes sends a request's grammar to the other ranks as its GBNF
// source (tools/server/lockstep.cpp): a schema's generated grammar, parsed again, must decide
// every text as the schema's does.
TEST(JsonSchema, TheGeneratedGbnfParsesToTheSameGrammar) {
  const Grammar g = Grammar::from_json_schema(R"({"type": "object", "properties": {
      "n": {"type": "integer"}, "s": {"type": "string", "pattern": "^[a-c]+$"},
      "e": {"enum": ["x", 2, null]}, "l": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}},
      "required": ["n", "s"]})");
  for (const Grammar& from : {g, Grammar::json_object()}) {
    const Grammar again = Grammar::parse(from.gbnf());
    EXPECT_EQ(again.gbnf(), from.gbnf());
    for (const char* text : {R"({"n":1,"s":"abc"})", R"({"n":-3,"s":"a","e":null,"l":[true,false]})", R"({"n":1})",
                             R"({"n":1,"s":"abd"})", R"({"n":1,"s":"a","l":[true,true,true]})", R"({})", R"([1])"})
      EXPECT_EQ(accepts(again, text), accepts(from, text)) << text;
  }
  EXPECT_TRUE(accepts(Grammar::parse(g.gbnf()), R"({"n":1,"s":"abc"})"));
  EXPECT_FALSE(accepts(Grammar::parse(g.gbnf()), R"({"n":1,"s":"abd"})"));
}

TEST(JsonSchema, JsonObjectIsAnyObject) {
  const Grammar g = Grammar::json_object();
  EXPECT_TRUE(accepts(g, R"({"a": [1, {"b": null}, "c"], "d": -0.5e+10})"));
  EXPECT_FALSE(accepts(g, "[1]"));
  EXPECT_FALSE(accepts(g, R"({"a": })"));
}

}  // namespace
}  // namespace tfm
