// Word and character error rates (jiwer's definitions) and Whisper's basic normaliser.
#include <gtest/gtest.h>

#include "tfm/error.h"
#include "tfm/metrics.h"

using namespace tfm::metrics;

TEST(Wer, CountsEditsOverReferenceWords) {
  const ErrorCounts c = word_errors("hello world", "hello duck");
  EXPECT_EQ(c.substitutions, 1);
  EXPECT_EQ(c.hits, 1);
  EXPECT_DOUBLE_EQ(c.rate(), 0.5);
  // jiwer's example: corpus counts are summed, not sentence rates averaged.
  const ErrorRates r = error_rates({"i love cats", "hello world"}, {"i hate cats", "hello"});
  EXPECT_EQ(r.words.reference, 5);
  EXPECT_EQ(r.words.substitutions, 1);
  EXPECT_EQ(r.words.deletions, 1);
  EXPECT_DOUBLE_EQ(r.words.rate(), 0.4);
  // Insertions can push the rate past 1.
  EXPECT_DOUBLE_EQ(word_errors("a", "x y z").rate(), 3.0);
  // Repeated and outer spaces do not make words.
  EXPECT_DOUBLE_EQ(word_errors("  the  cat ", "the cat").rate(), 0.0);
}

TEST(Wer, CharacterRateCountsCodePointsAndSpaces) {
  EXPECT_DOUBLE_EQ(char_errors("hello", "helo").rate(), 0.2);
  EXPECT_DOUBLE_EQ(char_errors("ab cd", "abcd").rate(), 0.2);  // the space is a character
  EXPECT_DOUBLE_EQ(char_errors("日本語", "日本").rate(), 1.0 / 3.0);
}

TEST(Wer, BasicNormalizerAsWhisper) {
  EXPECT_EQ(normalize_transcript("Hello, World! [music] (laughs) <unk>", TranscriptNormalizer::basic), "hello world");
  EXPECT_EQ(normalize_transcript("Don't\tstop—now.", TranscriptNormalizer::basic), "don t stop now");
  EXPECT_EQ(normalize_transcript("Ｆｕｌｌ", TranscriptNormalizer::basic), "full");  // NFKC
  const ErrorRates r = error_rates({"Hello, world."}, {"hello world"}, TranscriptNormalizer::basic);
  EXPECT_DOUBLE_EQ(r.words.rate(), 0.0);
}

TEST(Wer, EmptyReferenceAndMismatchedCountsAreErrors) {
  EXPECT_THROW(error_rates({"  "}, {"x"}), tfm::Error);
  EXPECT_THROW(error_rates({"a", "b"}, {"a"}), tfm::Error);
}
