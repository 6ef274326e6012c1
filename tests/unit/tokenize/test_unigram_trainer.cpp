// Unigram training (unigram_trainer.cpp): deterministic, decodes back to its input, splits
// frequent words less than rare ones, and keeps every char of the corpus. Its parity with
// HF tokenizers and its quality against sentencepiece are in tests/cli/tokenizer_train_unigram.sh.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace tfm {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> lines;
  for (int i = 0; i < 200; ++i) {
    lines.push_back("the quick brown fox jumps over the lazy dog " + std::to_string(i % 17));
    lines.push_back("我们 今天 去 公园 散步 the fox");
  }
  lines.push_back("a zebra quietly");
  return lines;
}

TokenizerTrainOptions unigram(std::int64_t size) {
  TokenizerTrainOptions o;
  o.kind = TokenizerKind::unigram;
  o.vocab_size = size;
  return o;
}

TEST(UnigramTrainer, DeterministicAndLossless) {
  const Tokenizer a = Tokenizer::train(corpus(), unigram(80));
  const Tokenizer b = Tokenizer::train(corpus(), unigram(80));
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.vocab_size(), 80);
  for (const std::string text : {"the lazy fox jumps", "我们 去 公园", "a zebra quietly"})
    EXPECT_EQ(a.decode(a.encode(text)), text) << text;
}

TEST(UnigramTrainer, FrequentWordsTakeFewerPiecesThanRareOnes) {
  const Tokenizer t = Tokenizer::train(corpus(), unigram(80));
  EXPECT_EQ(t.encode("the").size(), 1u);  // "▁the": 400 uses
  EXPECT_GT(t.encode("zebra").size(), 1u);  // seen once
}

TEST(UnigramTrainer, VocabularyBelowTheCharsIsAnError) {
  EXPECT_THROW(Tokenizer::train(corpus(), unigram(10)), Error);
}

}  // namespace
}  // namespace tfm
