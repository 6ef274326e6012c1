// Translation metrics that equal sacreBLEU 2.6.0 (Post, 2018): corpus BLEU with its five
// tokenizers (13a, intl, zh, char, none) and four smoothing methods, several references per
// segment, effective order and the signature string; chrF (chrF2 by default, chrF++ with
// word_order 2). Every figure is computed as sacreBLEU computes it (same sums in the same
// order), so scores agree to rounding error; nothing is rounded until printed.
//
//   auto s = tfm::metrics::corpus_bleu(hyps, {refs}, {});
//   std::printf("BLEU = %.2f (%s)\n", s.score, s.signature.c_str());
//
// Text is UTF-8; bytes that are not valid UTF-8 count as U+FFFD (the replacement character),
// one per maximal invalid subpart as Python's decode(errors='replace'). Errors (unknown
// tokenizer name, mismatched counts) throw tfm::Error.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::metrics {

// The sacreBLEU release whose definitions these are; it ends every signature.
inline constexpr const char* kSacreBleuVersion = "2.6.0";

enum class BleuTokenizer {
  t13a,  // mteval-v13a: ASCII punctuation split off (the WMT standard; sacreBLEU's default)
  intl,  // mteval-v14 international: Unicode punctuation and symbols split off
  zh,    // Chinese: every CJK character a token, the rest as 13a
  chars, // every non-space character a token
  none,  // whitespace only
};
// "13a", "intl", "zh", "char", "none" (sacreBLEU's names); throws on anything else.
BleuTokenizer bleu_tokenizer_from_name(std::string_view name);
const char* to_string(BleuTokenizer t);
// The tokenizer sacreBLEU would pick for these references: zh when Han characters are at least
// half of their letters (a Chinese target), else 13a.
BleuTokenizer default_bleu_tokenizer(const std::vector<std::string>& references);
// The segment as sacreBLEU's tokenizer writes it (tokens separated by single spaces). BLEU
// strips trailing whitespace first (sacreBLEU's _preprocess_segment); this function does not.
std::string sacrebleu_tokenize(std::string_view line, BleuTokenizer t);

// The line without trailing whitespace as Python's str.rstrip() sees it (Unicode spaces too):
// how sacreBLEU's command line reads every hypothesis and reference line. Invalid UTF-8
// becomes U+FFFD (valid_utf8).
std::string rstrip_whitespace(std::string_view line);
// The text with every invalid UTF-8 subpart replaced by U+FFFD (what the metrics score).
std::string valid_utf8(std::string_view text);

enum class BleuSmooth { exp, floor, add_k, none };
BleuSmooth bleu_smooth_from_name(std::string_view name);  // "exp", "floor", "add-k", "none"
const char* to_string(BleuSmooth s);

struct BleuOptions {
  BleuTokenizer tokenize = BleuTokenizer::t13a;
  BleuSmooth smooth = BleuSmooth::exp;
  std::optional<double> smooth_value;  // floor: 0.1, add-k: 1 when unset
  bool lowercase = false;
  bool effective_order = false;  // average only the orders that have n-grams (sentence BLEU)
  int max_order = 4;
};

struct BleuScore {
  double score = 0;                 // 0..100
  std::vector<double> counts;       // clipped matches per order (add-k adds k from order 2 on)
  std::vector<double> totals;       // hypothesis n-grams per order (same)
  std::vector<double> precisions;   // percent
  double bp = 0;                    // brevity penalty
  std::int64_t sys_len = 0, ref_len = 0;
  std::string signature;            // nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
  // "95.7/75.0/63.5/54.8 (BP = 0.842 ratio = 0.854 hyp_len = 1849 ref_len = 2166)"
  std::string verbose() const;
  // sacreBLEU's text line: "BLEU|<signature> = 59.56 <verbose>" with `width` decimals.
  std::string format(int width = 2) const;
};

// The corpus statistics BLEU is computed from (sacreBLEU's _extract_corpus_statistics, summed):
// clipped matches and totals per order, hypothesis length and closest reference length. They
// depend on the tokenizer, case and max_order of `opt`, not on its smoothing.
struct BleuStatistics {
  std::vector<std::int64_t> correct, total;
  std::int64_t sys_len = 0, ref_len = 0;
  std::size_t nrefs = 0;
};
BleuStatistics bleu_statistics(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                               const BleuOptions& opt = {});
// The score from statistics with opt's smoothing and effective order (sacreBLEU's compute_bleu).
BleuScore bleu_from_statistics(const BleuStatistics& stats, const BleuOptions& opt = {});

// refs[r][i] is reference r of segment i (one stream per reference file, as sacreBLEU takes
// them); every stream has hyps.size() segments. An empty line is still a reference (of
// length 0), as in sacreBLEU's command line.
BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& opt = {});
// One segment against its references (sacreBLEU's sentence_score; use effective_order).
BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs, const BleuOptions& opt = {});

struct ChrfOptions {
  int char_order = 6;
  int word_order = 0;       // 2: chrF++
  int beta = 2;
  bool lowercase = false;
  bool whitespace = false;  // keep spaces inside character n-grams
  bool eps_smoothing = false;
};

struct ChrfScore {
  double score = 0;        // 0..100
  std::string name;        // chrF2, chrF2++
  std::string signature;   // nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0
  std::string format(int width = 2) const;  // "chrF2|<signature> = 73.46"
};

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& opt = {});

// ---- speech recognition: word and character error rates (jiwer's definitions) -------------
struct ErrorCounts {
  std::int64_t hits = 0, substitutions = 0, deletions = 0, insertions = 0;
  std::int64_t reference = 0;  // words (or characters) of the references
  double rate() const;          // (S + D + I) / reference
  ErrorCounts& operator+=(const ErrorCounts& o);
};
struct ErrorRates {
  ErrorCounts words, chars;
};
// none: the text as is (jiwer's default transforms only); basic: Whisper's BasicTextNormalizer
// (lower case, [..] <..> (..) spans removed, NFKC, marks, symbols and punctuation as spaces,
// whitespace collapsed).
enum class TranscriptNormalizer { none, basic };
std::string normalize_transcript(std::string_view text, TranscriptNormalizer how);
// One pair: words are separated by spaces (runs collapsed, ends stripped); characters are
// the stripped text's code points, spaces included.
ErrorCounts word_errors(std::string_view reference, std::string_view hypothesis);
ErrorCounts char_errors(std::string_view reference, std::string_view hypothesis);
// A corpus: counts summed over the pairs (jiwer.wer / jiwer.cer over lists); an empty
// reference is an error (jiwer refuses it too).
ErrorRates error_rates(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses,
                       TranscriptNormalizer how = TranscriptNormalizer::none);

}  // namespace tfm::metrics
