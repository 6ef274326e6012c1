// Unigram training (`tfm tokenizer train --type unigram`) with SentencePiece's algorithm
// (Kudo 2018; sentencepiece's unigram_model_trainer): NFKC and Metaspace make the words,
// then
//   1. seed: every char plus the most frequent substrings (ranked by frequency x length) as
//      pieces, scored by their log relative frequency;
//   2. EM: expected piece counts from forward-backward over each word's lattice, new scores
//      digamma(count) - digamma(total) (the Bayesian M-step), pieces expected < 0.5 times
//      dropped; two rounds per pruning step;
//   3. pruning: each piece's loss is the drop in corpus likelihood if its Viterbi uses went
//      to its best alternative segmentation; the lowest-loss pieces go, keeping 75% per step;
//   4. stop at 1.1 x the target size, then keep the rare-char fallbacks (every covered char)
//      and the best-scored pieces up to the target.
// The result is a Unigram tokenizer.json (NFKC, Metaspace, reserved tokens first) that HF
// `tokenizers` loads as it is (tests/cli/tokenizer_train_unigram.sh).
//
// Where this differs from sentencepiece, on purpose: seed substrings come from counting every
// substring of every distinct word (up to 16 chars) rather than from a suffix array's
// branching substrings — equal on what it keeps for corpora this engine trains on, and far
// simpler; chars are never dropped by the M-step (they are the fallback of every word).
#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <omp.h>

#include <nlohmann/json.hpp>
#include <unicode/uchar.h>
#include <unicode/uscript.h>

#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tokenize/components.h"
#include "tokenize/tokenizer_impl.h"
#include "tokenize/unicode.h"

namespace tfm::tok {

namespace {

constexpr int kMaxPieceChars = 16;           // sentencepiece's max_sentencepiece_length
constexpr std::size_t kSeedSize = 1000000;   // seed_sentencepiece_size
constexpr double kShrinkingFactor = 0.75;    // shrinking_factor
constexpr int kSubIterations = 2;            // num_sub_iterations
constexpr double kMinExpectedCount = 0.5;    // pieces expected fewer times leave in the M-step
constexpr std::uint32_t kMetaspace = 0x2581; // ▁

struct Word {
  std::string text;
  std::vector<std::uint32_t> at;  // byte offset of each char, then text.size()
  double count = 0;
  std::size_t chars() const { return at.size() - 1; }
  std::string_view span(std::size_t i, std::size_t j) const {
    return std::string_view(text).substr(at[i], at[j] - at[i]);
  }
};

// The class a char belongs to for the "one script per piece" rule (sentencepiece's
// split_by_unicode_script and split_by_number): Hiragana, Katakana and the prolonged sound
// mark count as Han; digits are a class of their own; ▁ belongs to every class.
int script_class(std::uint32_t cp) {
  if (cp == kMetaspace) return -1;
  if (u_isdigit(static_cast<UChar32>(cp))) return -2;
  UErrorCode err = U_ZERO_ERROR;
  const UScriptCode s = uscript_getScript(static_cast<UChar32>(cp), &err);
  if (U_FAILURE(err)) return USCRIPT_UNKNOWN;
  if (s == USCRIPT_HIRAGANA || s == USCRIPT_KATAKANA || cp == 0x30FC) return USCRIPT_HAN;
  return s;
}

std::size_t char_count(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// sentencepiece's Digamma: recurrence up to 7, then the asymptotic series.
double digamma(double x) {
  double r = 0;
  for (; x < 7; ++x) r -= 1 / x;
  x -= 0.5;
  const double xx = 1 / x, xx2 = xx * xx, xx4 = xx2 * xx2;
  return r + std::log(x) + xx2 / 24 - 7.0 / 960 * xx4 + 31.0 / 8064 * xx4 * xx2 - 127.0 / 30720 * xx4 * xx4;
}

double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<double>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

struct Pieces {
  std::vector<std::string> text;
  std::vector<double> score;
  std::vector<bool> is_char;
  // Chars expected fewer than 0.5 times: sentencepiece drops them in the M-step, leaving the
  // lattice an unk node (lowest score - 10) there; they stay here with that score instead,
  // and come back at the end just below the lowest piece.
  std::vector<bool> rare;
  TokenIdMap ids;
  double unk_score = 0;

  void rebuild() {
    ids.clear();
    double lowest = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      ids.emplace(text[i], static_cast<std::int32_t>(i));
      lowest = std::min(lowest, score[i]);
    }
    unk_score = lowest - 10;  // what the Unigram model gives an uncovered char
  }
  // Calls f(end_char, id, score) for every piece starting at char i of w (id -1: unk char).
  template <class F>
  void edges(const Word& w, std::size_t i, F&& f) const {
    bool single = false;
    const std::size_t last = std::min(w.chars(), i + kMaxPieceChars);
    for (std::size_t j = i + 1; j <= last; ++j) {
      const auto it = ids.find(w.span(i, j));
      if (it == ids.end()) continue;
      single |= j == i + 1;
      f(j, it->second, score[static_cast<std::size_t>(it->second)]);
    }
    if (!single) f(i + 1, -1, unk_score);
  }
};

// The best segmentation's score and pieces; `banned` (a piece id) is left out of the lattice.
double viterbi(const Pieces& p, const Word& w, std::vector<std::int32_t>* path, std::int32_t banned = -1) {
  const std::size_t n = w.chars();
  const double none = -std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, none);
  std::vector<std::pair<std::size_t, std::int32_t>> back(n + 1);
  best[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (best[i] == none) continue;
    p.edges(w, i, [&](std::size_t j, std::int32_t id, double s) {
      if (id == banned && id >= 0) return;
      if (best[i] + s > best[j]) {
        best[j] = best[i] + s;
        back[j] = {i, id};
      }
    });
  }
  if (path) {
    path->clear();
    for (std::size_t j = n; j > 0 && best[n] != none; j = back[j].first) path->push_back(back[j].second);
    std::reverse(path->begin(), path->end());
  }
  return best[n];
}

// One E-step and M-step. Returns the corpus log-likelihood (the objective EM raises).
double em_round(Pieces& p, const std::vector<Word>& words) {
  const std::size_t np = p.text.size();
  const int threads = static_cast<int>(std::max<std::int64_t>(1, num_threads()));
  std::vector<std::vector<double>> expected(static_cast<std::size_t>(threads), std::vector<double>(np, 0.0));
  std::vector<double> likelihood(static_cast<std::size_t>(threads), 0.0);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64)
  for (std::size_t wi = 0; wi < words.size(); ++wi) {
    const Word& w = words[wi];
    const int t = omp_get_thread_num();
    const std::size_t n = w.chars();
    const double none = -std::numeric_limits<double>::infinity();
    std::vector<double> alpha(n + 1, none), beta(n + 1, none);
    alpha[0] = 0;
    for (std::size_t i = 0; i < n; ++i)
      p.edges(w, i, [&](std::size_t j, std::int32_t, double s) { alpha[j] = log_add(alpha[j], alpha[i] + s); });
    beta[n] = 0;
    for (std::size_t i = n; i-- > 0;)
      p.edges(w, i, [&](std::size_t j, std::int32_t, double s) { beta[i] = log_add(beta[i], s + beta[j]); });
    const double z = alpha[n];
    likelihood[static_cast<std::size_t>(t)] += w.count * z;
    auto& e = expected[static_cast<std::size_t>(t)];
    for (std::size_t i = 0; i < n; ++i)
      p.edges(w, i, [&](std::size_t j, std::int32_t id, double s) {
        if (id >= 0) e[static_cast<std::size_t>(id)] += w.count * std::exp(alpha[i] + s + beta[j] - z);
      });
  }
  std::vector<double> count(np, 0.0);
  double objective = 0;
  for (int t = 0; t < threads; ++t) {
    objective += likelihood[static_cast<std::size_t>(t)];
    for (std::size_t i = 0; i < np; ++i) count[i] += expected[static_cast<std::size_t>(t)][i];
  }
  // M-step: the Bayesian estimate (digamma) sentencepiece uses; rare non-chars leave.
  Pieces next;
  double total = 0;
  for (std::size_t i = 0; i < np; ++i) {
    const bool rare = count[i] < kMinExpectedCount;
    if (!p.is_char[i] && rare) continue;
    next.text.push_back(p.text[i]);
    next.score.push_back(rare ? 0.0 : count[i]);
    next.is_char.push_back(p.is_char[i]);
    next.rare.push_back(rare);
    if (!rare) total += count[i];
  }
  const double log_total = digamma(total);
  double lowest = 0;
  for (std::size_t i = 0; i < next.score.size(); ++i)
    if (!next.rare[i]) lowest = std::min(lowest, next.score[i] = digamma(next.score[i]) - log_total);
  for (std::size_t i = 0; i < next.score.size(); ++i)
    if (next.rare[i]) next.score[i] = lowest - 10;
  p = std::move(next);
  p.rebuild();
  return objective;
}

// Keeps max(target, 75%) of the pieces: those whose removal would cost the likelihood most.
void prune(Pieces& p, const std::vector<Word>& words, std::size_t target) {
  const std::size_t np = p.text.size();
  // Each piece's best segmentation without itself; a piece that loses to it is never used.
  std::vector<std::vector<std::int32_t>> alternative(np);
  std::vector<bool> removable(np, false);
  for (std::size_t i = 0; i < np; ++i) {
    if (p.is_char[i]) continue;
    Word w{p.text[i], {}, 1};
    for (std::size_t b = 0; b < w.text.size();) {
      w.at.push_back(static_cast<std::uint32_t>(b));
      std::uint32_t cp;
      b += static_cast<std::size_t>(next_cp(w.text, b, cp));
    }
    w.at.push_back(static_cast<std::uint32_t>(w.text.size()));
    const double alt = viterbi(p, w, &alternative[i], static_cast<std::int32_t>(i));
    if (alt > p.score[i]) removable[i] = true;
  }
  // How often the current Viterbi segmentation of the corpus uses each piece.
  std::vector<double> freq(np, 0.0);
  std::vector<std::int32_t> path;
  for (const Word& w : words) {
    viterbi(p, w, &path);
    for (std::int32_t id : path)
      if (id >= 0) freq[static_cast<std::size_t>(id)] += w.count;
  }
  double sum = 0, all_words = 0;
  for (double f : freq) sum += f;
  for (const Word& w : words) all_words += w.count;
  const double log_sum = std::log(sum);
  std::vector<std::pair<double, std::size_t>> candidates;
  std::vector<bool> keep(np, false);
  for (std::size_t i = 0; i < np; ++i) {
    if (p.is_char[i]) {
      keep[i] = true;
      continue;
    }
    if (freq[i] == 0 || removable[i]) continue;
    // Likelihood change when piece i's uses move to its alternative's pieces, weighted by
    // the share of words that use it.
    const double share = freq[i] / all_words;
    const double logp = std::log(freq[i]) - log_sum;
    const double log_sum_alt = std::log(sum + freq[i] * (static_cast<double>(alternative[i].size()) - 1));
    double logp_alt = 0;
    for (std::int32_t a : alternative[i])
      logp_alt += std::log((a >= 0 ? freq[static_cast<std::size_t>(a)] : 0.0) + freq[i]) - log_sum_alt;
    candidates.push_back({share * (logp - logp_alt), i});
  }
  std::size_t kept = static_cast<std::size_t>(std::count(keep.begin(), keep.end(), true));
  const std::size_t size = std::max(target, static_cast<std::size_t>(kShrinkingFactor * static_cast<double>(np)));
  std::stable_sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& c : candidates) {
    if (kept >= size) break;
    keep[c.second] = true;
    ++kept;
  }
  Pieces next;
  for (std::size_t i = 0; i < np; ++i)
    if (keep[i]) {
      next.text.push_back(p.text[i]);
      next.score.push_back(p.score[i]);
      next.is_char.push_back(p.is_char[i]);
      next.rare.push_back(p.rare[i]);
    }
  p = std::move(next);
  p.rebuild();
}

}  // namespace

nlohmann::json train_unigram_doc(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts) {
  const char* where = "tokenizer train";
  std::vector<std::string> specials = opts.reserved;
  for (const auto& s : opts.extra_specials)
    if (std::find(specials.begin(), specials.end(), s) == specials.end()) specials.push_back(s);
  const std::int64_t vocab_size = opts.vocab_size > 0 ? opts.vocab_size : 8000;
  TFM_CHECK(vocab_size > static_cast<std::int64_t>(specials.size()), where, "unigram vocab_size ", vocab_size,
            " leaves no room beside the ", specials.size(), " reserved tokens");
  const auto target = static_cast<std::size_t>(vocab_size) - specials.size();

  // Words: NFKC, then Metaspace (▁ before every word), counted once each.
  const auto normalizer = make_unicode_normalizer(uprops::Form::nfkc);
  const auto pre = make_metaspace(kMetaspace, PrependScheme::always, true);
  std::unordered_map<std::string, double> counts;
  for (const auto& line : corpus) {
    if (!unicode::is_valid_utf8(line)) continue;
    PreTokenized pt{Split{Piece{line, {}, 0, false}, {}, false}};
    normalizer->normalize(pt[0].piece);
    pre->pre_tokenize(pt);
    for (const Split& s : pt)
      if (!s.piece.text.empty()) counts[s.piece.text] += 1;
  }
  TFM_CHECK(!counts.empty(), where, "no valid UTF-8 text to train a unigram tokenizer on");
  std::vector<Word> words;
  words.reserve(counts.size());
  for (auto& [text, count] : counts) words.push_back({text, {}, count});
  std::sort(words.begin(), words.end(), [](const Word& a, const Word& b) { return a.text < b.text; });
  std::vector<std::vector<int>> classes(words.size());
  for (std::size_t wi = 0; wi < words.size(); ++wi) {
    Word& w = words[wi];
    for (std::size_t b = 0; b < w.text.size();) {
      w.at.push_back(static_cast<std::uint32_t>(b));
      std::uint32_t cp;
      b += static_cast<std::size_t>(next_cp(w.text, b, cp));
      classes[wi].push_back(script_class(cp));
    }
    w.at.push_back(static_cast<std::uint32_t>(w.text.size()));
  }

  // Seed: chars (every one, so each word has a path), then substrings by frequency x length.
  std::unordered_map<std::string, double> char_freq, sub_freq;
  for (std::size_t wi = 0; wi < words.size(); ++wi) {
    const Word& w = words[wi];
    const auto& cls = classes[wi];
    for (std::size_t i = 0; i < w.chars(); ++i) {
      char_freq[std::string(w.span(i, i + 1))] += w.count;
      int script = cls[i];
      for (std::size_t j = i + 1; j < w.chars() && j < i + kMaxPieceChars; ++j) {
        const int c = cls[j];
        if (c == -1) break;  // ▁ only starts a piece
        if (script == -1) script = c;
        if (c != script) break;  // one script (or digits) per piece
        sub_freq[std::string(w.span(i, j + 1))] += w.count;
      }
    }
  }
  std::vector<std::pair<double, std::string>> seed;
  for (auto& [s, f] : sub_freq)
    if (f >= 2) seed.push_back({f * static_cast<double>(char_count(s)), s});
  std::sort(seed.begin(), seed.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  if (seed.size() > kSeedSize) seed.resize(kSeedSize);
  Pieces p;
  std::vector<std::pair<double, std::string>> chars;
  for (auto& [c, f] : char_freq) chars.push_back({f, c});
  std::sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  TFM_CHECK(chars.size() <= target, where, "unigram vocab_size ", vocab_size, " is below the ",
            chars.size() + specials.size(), " tokens the reserved tokens and the ", chars.size(), " chars need");
  double total = 0;
  for (const auto& [f, c] : chars) {
    p.text.push_back(c);
    p.score.push_back(f);
    p.is_char.push_back(true);
    p.rare.push_back(false);
    total += f;
  }
  for (const auto& [f, s] : seed) {
    p.text.push_back(s);
    p.score.push_back(f);
    p.is_char.push_back(false);
    p.rare.push_back(false);
    total += f;
  }
  for (double& s : p.score) s = std::log(s) - std::log(total);
  p.rebuild();

  // EM with pruning until 1.1 x the target.
  const auto desired = static_cast<std::size_t>(1.1 * static_cast<double>(target));
  for (;;) {
    for (int it = 0; it < kSubIterations; ++it) em_round(p, words);
    if (p.text.size() <= desired) break;
    prune(p, words, desired);
  }

  // Final: every char, then the best-scored pieces up to the target, by descending score;
  // rare chars just below the lowest piece, the more frequent first (1e-4 apart, as
  // sentencepiece spaces the required chars it adds back).
  double lowest = 0;
  for (std::size_t i = 0; i < p.text.size(); ++i)
    if (!p.rare[i]) lowest = std::min(lowest, p.score[i]);
  double penalty = 1e-4;
  for (std::size_t i = 0; i < p.text.size(); ++i)
    if (p.rare[i]) p.score[i] = lowest - penalty, penalty += 1e-4;
  std::vector<std::size_t> order(p.text.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return p.score[a] > p.score[b]; });
  std::vector<bool> chosen(p.text.size(), false);
  std::size_t n_chosen = 0;
  for (std::size_t i = 0; i < p.text.size(); ++i)
    if (p.is_char[i]) chosen[i] = true, ++n_chosen;
  for (std::size_t i : order) {
    if (n_chosen >= target) break;
    if (!chosen[i]) chosen[i] = true, ++n_chosen;
  }

  using nlohmann::json;
  json vocab = json::array();
  for (const auto& s : specials) vocab.push_back(json::array({s, 0.0}));
  for (std::size_t i : order)
    if (chosen[i]) vocab.push_back(json::array({p.text[i], p.score[i]}));
  json added = json::array();
  for (std::size_t i = 0; i < specials.size(); ++i)
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  const auto unk = std::find(specials.begin(), specials.end(), std::string("<unk>"));
  const json metaspace = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "always"}, {"split", true}};
  json doc;
  doc["version"] = "1.0";
  doc["truncation"] = nullptr;
  doc["padding"] = nullptr;
  doc["added_tokens"] = added;
  doc["normalizer"] = {{"type", "NFKC"}};
  doc["pre_tokenizer"] = metaspace;
  doc["post_processor"] = nullptr;
  doc["decoder"] = metaspace;
  doc["model"] = {{"type", "Unigram"},
                  {"unk_id", unk == specials.end() ? json(nullptr) : json(unk - specials.begin())},
                  {"vocab", vocab},
                  {"byte_fallback", false}};
  return doc;
}

}  // namespace tfm::tok
