// Inputs the fuzz targets (fuzz/, docs/reliability.md) found to break a property, as unit
// tests of the property itself; the inputs also stay in fuzz/corpus/<target>/regression-*.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace {

// fuzz/tokenizer_json: a WordLevel tokenizer.json without an unk_token loaded, but what it
// saved ("unk_token": null) did not load again.
TEST(FuzzRegression, WordLevelWithoutUnkSavesToAFileThatLoads) {
  const auto t = tfm::Tokenizer::from_json(
      R"({"pre_tokenizer":{"type":"WhitespaceSplit"},"model":{"type":"WordLevel","vocab":{"<pad>":0,"hi":1}}})");
  const std::string saved = t.to_json();
  ASSERT_NE(saved.find("\"unk_token\": null"), std::string::npos) << saved;
  const auto back = tfm::Tokenizer::from_json(saved);
  EXPECT_EQ(back.to_json(), saved);
  EXPECT_EQ(back.encode("hi hi"), t.encode("hi hi"));
  EXPECT_EQ(back.unk_id(), -1);
  EXPECT_THROW(tfm::Tokenizer::from_json(
                   R"({"pre_tokenizer":{"type":"WhitespaceSplit"},"model":{"type":"WordLevel","vocab":{"hi":0},"unk_token":3}})"),
               tfm::Error);
}

}  // namespace
