// The tokenizer rules and the corner cases of BLEU/chrF that the fixtures do not reach, each
// expectation worked out by hand from sacreBLEU 2.6.0's definitions (tokenizers/*.py,
// metrics/bleu.py, metrics/chrf.py).
#include <gtest/gtest.h>

#include <cmath>

#include "tfm/error.h"
#include "tfm/metrics.h"

namespace {

using namespace tfm::metrics;

TEST(SacreBleuTokenizers, Rule13a) {
  // Punctuation split off; period and comma kept inside numbers; dash split after a digit;
  // the apostrophe and a dash between letters stay; &amp; and friends unescaped.
  EXPECT_EQ(sacrebleu_tokenize("Hello, world. It's 3.14 or 1,000!", BleuTokenizer::t13a),
            "Hello , world . It's 3.14 or 1,000 !");
  EXPECT_EQ(sacrebleu_tokenize("x-ray 1995-2000 a&amp;b &lt;tag&gt;", BleuTokenizer::t13a),
            "x-ray 1995 - 2000 a & b < tag >");
  EXPECT_EQ(sacrebleu_tokenize("end 2024.", BleuTokenizer::t13a), "end 2024 .");  // the padding space
  EXPECT_EQ(sacrebleu_tokenize("a<skipped>b", BleuTokenizer::t13a), "ab");
  EXPECT_EQ(sacrebleu_tokenize("a..b", BleuTokenizer::t13a), "a . . b");
  EXPECT_EQ(sacrebleu_tokenize("« Ça va ? »", BleuTokenizer::t13a), "« Ça va ? »");  // non-ASCII untouched
}

TEST(SacreBleuTokenizers, RuleIntl) {
  // Unicode punctuation split unless between digits; symbols always split; no padding, so a
  // number's final period stays (mteval-v14's known quirk).
  EXPECT_EQ(sacrebleu_tokenize("« Ça va ? » 3,5 €", BleuTokenizer::intl), "« Ça va ? » 3,5 €");
  EXPECT_EQ(sacrebleu_tokenize("«Bonjour»,dit-il.", BleuTokenizer::intl), "« Bonjour » , dit - il .");
  EXPECT_EQ(sacrebleu_tokenize("in 2024.", BleuTokenizer::intl), "in 2024.");
  EXPECT_EQ(sacrebleu_tokenize("a+b=c", BleuTokenizer::intl), "a + b = c");
}

TEST(SacreBleuTokenizers, RuleZhAndChar) {
  EXPECT_EQ(sacrebleu_tokenize("我爱你，Tom.", BleuTokenizer::zh), "我 爱 你 ， Tom .");
  // sacreBLEU's range table selects U+2001..U+2A6D, so curly quotes and the euro sign are
  // split like CJK characters.
  EXPECT_EQ(sacrebleu_tokenize("“x”5€", BleuTokenizer::zh), "“ x ” 5 €");
  EXPECT_EQ(sacrebleu_tokenize("  我 ", BleuTokenizer::zh), "我");
  EXPECT_EQ(sacrebleu_tokenize("ab c", BleuTokenizer::chars), "a b   c");
  EXPECT_EQ(sacrebleu_tokenize("a,b", BleuTokenizer::none), "a,b");
}

TEST(SacreBleuTokenizers, DefaultFollowsTheTarget) {
  EXPECT_EQ(default_bleu_tokenizer({"我喜欢茶。", "他是我哥哥。"}), BleuTokenizer::zh);
  EXPECT_EQ(default_bleu_tokenizer({"Je bois du thé.", "C'est mon frère."}), BleuTokenizer::t13a);
  EXPECT_EQ(default_bleu_tokenizer({}), BleuTokenizer::t13a);
}

TEST(SacreBleuMetric, NamesAreCheckedWithOneLineErrors) {
  EXPECT_THROW(bleu_tokenizer_from_name("13b"), tfm::Error);
  EXPECT_THROW(bleu_smooth_from_name("add_k"), tfm::Error);
  EXPECT_THROW(corpus_bleu({"a"}, {{"a", "b"}}), tfm::Error);
  EXPECT_THROW(corpus_chrf({"a"}, {}), tfm::Error);
}

TEST(SacreBleuMetric, HandWorkedScores) {
  // "the cat sat on the mat" vs "the cat is on the mat": matches 5/6, 3/5, 1/4, 0/3; exp
  // smoothing gives the 4-gram precision 1/(2*3); no brevity penalty.
  const BleuScore s = corpus_bleu({"the cat sat on the mat"}, {{"the cat is on the mat"}});
  EXPECT_NEAR(s.score, 100.0 * std::exp((std::log(5.0 / 6) + std::log(3.0 / 5) + std::log(1.0 / 4) + std::log(1.0 / 6)) / 4),
              1e-9);
  // Brevity penalty exp(1 - 8/4) on a perfect prefix.
  EXPECT_NEAR(corpus_bleu({"a b c d"}, {{"a b c d e f g h"}}).score, 100.0 * std::exp(1.0 - 2.0), 1e-9);
  // Two references: the closest length (a tie takes the shorter), n-grams clipped by the
  // largest count in any reference.
  const BleuScore m = corpus_bleu({"a a a b"}, {{"a b"}, {"a a c d e f"}});
  EXPECT_EQ(m.ref_len, 2);  // |4-2| = |4-6|: the shorter
  EXPECT_EQ(m.counts[0], 3);  // a clipped at 2 (second reference), b 1
  // Nothing matches: 0 whatever the smoothing.
  EXPECT_EQ(corpus_bleu({"x y z w"}, {{"a b c d"}}).score, 0.0);
}

TEST(SacreBleuMetric, EffectiveOrderAndCase) {
  BleuOptions o;
  // Two tokens: no 3- or 4-grams. Without effective order log(0) is floored and the score is
  // 0; with it the average runs over orders 1 and 2 only.
  EXPECT_NEAR(corpus_bleu({"the cat"}, {{"the cat"}}, o).score, 0.0, 1e-300);
  o.effective_order = true;
  const BleuScore e = corpus_bleu({"the cat"}, {{"the cat"}}, o);
  EXPECT_NEAR(e.score, 100.0, 1e-12);
  EXPECT_EQ(e.signature, "nrefs:1|case:mixed|eff:yes|tok:13a|smooth:exp|version:2.6.0");
  o.lowercase = true;
  const BleuScore l = sentence_bleu("The CAT.", {"the cat."}, o);
  EXPECT_NEAR(l.score, 100.0, 1e-12);
  EXPECT_EQ(l.signature, "nrefs:1|case:lc|eff:yes|tok:13a|smooth:exp|version:2.6.0");
}

TEST(ChrfMetric, HandWorkedScoresAndChrfPlusPlus) {
  EXPECT_NEAR(corpus_chrf({"abc"}, {{"abc"}}).score, 100.0, 1e-12);
  EXPECT_EQ(corpus_chrf({"abc"}, {{"xyz"}}).score, 0.0);
  // "ab" vs "abc": orders 1 and 2 have n-grams on both sides: P = 1, R = 2/3 and 1/2;
  // averaged P = 1, R = 7/12; F2 = 5 P R / (4 P + R).
  const double r = 7.0 / 12;
  EXPECT_NEAR(corpus_chrf({"ab"}, {{"abc"}}).score, 100.0 * 5 * r / (4 + r), 1e-12);
  ChrfOptions pp;
  pp.word_order = 2;
  const ChrfScore s = corpus_chrf({"a b."}, {{"a b."}}, pp);
  EXPECT_EQ(s.name, "chrF2++");
  EXPECT_NEAR(s.score, 100.0, 1e-12);
  EXPECT_EQ(s.signature, "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no|version:2.6.0");
}

}  // namespace
