// chrF / chrF++ as sacreBLEU 2.6.0 computes it (metrics/chrf.py, Popović 2015/2017): per
// order, hypothesis, reference and matching character (then word) n-gram counts; per segment
// the statistics of the reference with the best segment F-score; summed over the corpus; the
// F-beta of the precision and recall averaged over the orders that have n-grams on both sides.
#include <cstdio>
#include <string_view>
#include <unordered_map>

#include "metrics/text.h"
#include "tfm/error.h"
#include "tfm/metrics.h"

namespace tfm::metrics {
namespace {

using Counts = std::unordered_map<std::string, std::int64_t>;

// Character n-grams of orders 1..max_order, whitespace removed unless kept.
std::vector<Counts> char_ngrams(const std::u32string& line, int max_order, bool whitespace) {
  std::u32string s;
  if (whitespace) {
    s = line;
  } else {
    for (const auto& w : detail::py_split(line)) s += w;
  }
  std::vector<Counts> out(static_cast<std::size_t>(max_order));
  for (int n = 1; n <= max_order; ++n)
    for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= s.size(); ++i)
      ++out[static_cast<std::size_t>(n - 1)][detail::encode_utf8(std::u32string_view(s).substr(i, static_cast<std::size_t>(n)))];
  return out;
}

// CHRF._remove_punctuation: a word's last (else first) character split off when it is ASCII
// punctuation and the word is longer than one character.
std::vector<std::u32string> words_without_punctuation(const std::u32string& line) {
  static constexpr std::u32string_view kPuncts = U"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
  std::vector<std::u32string> out;
  for (auto& w : detail::py_split(line)) {
    if (w.size() == 1) {
      out.push_back(w);
    } else if (kPuncts.find(w.back()) != std::u32string_view::npos) {
      out.push_back(w.substr(0, w.size() - 1));
      out.push_back(w.substr(w.size() - 1));
    } else if (kPuncts.find(w.front()) != std::u32string_view::npos) {
      out.push_back(w.substr(0, 1));
      out.push_back(w.substr(1));
    } else {
      out.push_back(w);
    }
  }
  return out;
}

Counts word_ngrams(const std::vector<std::u32string>& words, int n) {
  Counts out;
  for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= words.size(); ++i) {
    std::u32string key = words[i];
    for (int k = 1; k < n; ++k) key.append(1, U' ').append(words[i + static_cast<std::size_t>(k)]);
    ++out[detail::encode_utf8(key)];
  }
  return out;
}

std::vector<Counts> all_ngrams(const std::string& text, const ChrfOptions& opt) {
  std::u32string s = detail::decode_utf8(text);
  if (opt.lowercase) s = detail::py_lower(s);
  auto out = char_ngrams(s, opt.char_order, opt.whitespace);
  if (opt.word_order > 0) {
    const auto words = words_without_punctuation(s);
    for (int n = 1; n <= opt.word_order; ++n) out.push_back(word_ngrams(words, n));
  }
  return out;
}

// [hyp count (0 when the reference has none of this order), ref count, matches] per order.
void match_statistics(const Counts& hyp, const Counts& ref, std::vector<double>& stats) {
  std::int64_t match = 0, hyp_count = 0, ref_count = 0;
  for (const auto& [g, c] : hyp) {
    hyp_count += c;
    const auto it = ref.find(g);
    if (it != ref.end()) match += std::min(c, it->second);
  }
  for (const auto& [g, c] : ref) ref_count += c;
  stats.push_back(static_cast<double>(ref.empty() ? 0 : hyp_count));
  stats.push_back(static_cast<double>(ref_count));
  stats.push_back(static_cast<double>(match));
}

// CHRF._compute_f_score.
double f_score(const std::vector<double>& stats, const ChrfOptions& opt) {
  const double eps = 1e-16, factor = static_cast<double>(opt.beta) * static_cast<double>(opt.beta);
  const int order = opt.char_order + opt.word_order;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (int i = 0; i < order; ++i) {
    const double n_hyp = stats[static_cast<std::size_t>(3 * i)], n_ref = stats[static_cast<std::size_t>(3 * i + 1)],
                 n_match = stats[static_cast<std::size_t>(3 * i + 2)];
    const double prec = n_hyp > 0 ? n_match / n_hyp : eps;
    const double rec = n_ref > 0 ? n_match / n_ref : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (opt.eps_smoothing) return 100 * score / order;
  if (effective_order == 0) {
    avg_prec = avg_rec = 0.0;
  } else {
    avg_prec /= effective_order;
    avg_rec /= effective_order;
  }
  if (avg_prec + avg_rec == 0) return 0.0;
  score = (1 + factor) * avg_prec * avg_rec;
  score /= (factor * avg_prec) + avg_rec;
  return 100 * score;
}

}  // namespace

ChrfScore corpus_chrf(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const ChrfOptions& opt) {
  TFM_CHECK(!refs.empty(), "chrf", "no reference streams");
  for (std::size_t r = 0; r < refs.size(); ++r)
    TFM_CHECK(refs[r].size() == hyps.size(), "chrf", "reference stream ", r + 1, " has ", refs[r].size(),
              " segments for ", hyps.size(), " hypotheses");
  TFM_CHECK(opt.char_order >= 0 && opt.word_order >= 0 && opt.char_order + opt.word_order >= 1, "chrf",
            "char_order + word_order must be >= 1");
  const auto width = static_cast<std::size_t>(3 * (opt.char_order + opt.word_order));
  std::vector<double> sum(width, 0.0);
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    const auto h = all_ngrams(hyps[i], opt);
    std::vector<double> best;
    double best_f = -1.0;
    for (const auto& stream : refs) {
      const auto r = all_ngrams(stream[i], opt);
      std::vector<double> stats;
      for (std::size_t k = 0; k < h.size(); ++k) match_statistics(h[k], r[k], stats);
      const double f = f_score(stats, opt);
      if (f > best_f) best_f = f, best = std::move(stats);
    }
    for (std::size_t k = 0; k < width; ++k) sum[k] += best[k];
  }
  ChrfScore s;
  s.score = f_score(sum, opt);
  s.name = "chrF" + std::to_string(opt.beta) + std::string(static_cast<std::size_t>(opt.word_order), '+');
  s.signature = "nrefs:" + std::to_string(refs.size()) + "|case:" + (opt.lowercase ? "lc" : "mixed") +
                "|eff:" + (opt.eps_smoothing ? "no" : "yes") + "|nc:" + std::to_string(opt.char_order) +
                "|nw:" + std::to_string(opt.word_order) + "|space:" + (opt.whitespace ? "yes" : "no") +
                "|version:" + kSacreBleuVersion;
  return s;
}

std::string ChrfScore::format(int width) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, score);
  return name + "|" + signature + " = " + buf;
}

}  // namespace tfm::metrics
