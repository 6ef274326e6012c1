// Corpus BLEU as sacreBLEU 2.6.0 computes it (metrics/bleu.py): per segment, the hypothesis
// n-grams clipped by the largest count of each n-gram in any reference, the reference length
// closest to the hypothesis length (the shorter on a tie); sums over the corpus; then the
// precisions with the chosen smoothing and the brevity penalty.
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "metrics/text.h"
#include "tfm/error.h"
#include "tfm/metrics.h"

namespace tfm::metrics {
namespace {

using NgramCounts = std::unordered_map<std::string, std::int64_t>;

// The tokens of one segment after sacreBLEU's preprocessing (optional lower-casing, trailing
// whitespace stripped, the tokenizer), split at whitespace as str.split() does.
std::vector<std::string> segment_tokens(const std::string& text, const BleuOptions& opt) {
  std::u32string s = detail::decode_utf8(text);
  if (opt.lowercase) s = detail::py_lower(s);
  const std::string stripped = detail::encode_utf8(detail::py_rstrip(s));
  const std::string tokenized = sacrebleu_tokenize(stripped, opt.tokenize);
  std::vector<std::string> out;
  for (const auto& w : detail::py_split(detail::decode_utf8(tokenized))) out.push_back(detail::encode_utf8(w));
  return out;
}

// All n-grams of orders 1..max_order; keys join the tokens with a space (tokens hold none).
NgramCounts ngrams(const std::vector<std::string>& tokens, int max_order) {
  NgramCounts out;
  for (int n = 1; n <= max_order; ++n) {
    for (std::size_t i = 0; i + static_cast<std::size_t>(n) <= tokens.size(); ++i) {
      std::string key = tokens[i];
      for (int k = 1; k < n; ++k) key.append(1, ' ').append(tokens[i + static_cast<std::size_t>(k)]);
      ++out[key];
    }
  }
  return out;
}

std::int64_t order_of(const std::string& key) {
  std::int64_t n = 1;
  for (char c : key) n += c == ' ';
  return n;
}

// sacreBLEU's _get_closest_ref_len.
std::int64_t closest_ref_len(std::int64_t hyp_len, const std::vector<std::int64_t>& ref_lens) {
  std::int64_t best_diff = -1, best = -1;
  for (std::int64_t r : ref_lens) {
    const std::int64_t diff = std::llabs(hyp_len - r);
    if (best_diff == -1 || diff < best_diff) best_diff = diff, best = r;
    else if (diff == best_diff && r < best) best = r;
  }
  return best;
}

double default_smooth_value(BleuSmooth s) { return s == BleuSmooth::floor ? 0.1 : s == BleuSmooth::add_k ? 1.0 : 0.0; }

// utils.my_log: log, floored at -9999999999 for 0.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

void check_streams(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                   const char* where) {
  TFM_CHECK(!refs.empty(), where, "no reference streams");
  for (std::size_t r = 0; r < refs.size(); ++r)
    TFM_CHECK(refs[r].size() == hyps.size(), where, "reference stream ", r + 1, " has ", refs[r].size(),
              " segments for ", hyps.size(), " hypotheses");
}

// sacreBLEU's BLEU.compute_bleu on the summed statistics.
BleuScore compute_bleu(std::vector<double> correct, std::vector<double> total, std::int64_t sys_len, std::int64_t ref_len,
                       const BleuOptions& opt) {
  const double smooth_value = opt.smooth_value ? *opt.smooth_value : default_smooth_value(opt.smooth);
  BleuScore s;
  s.sys_len = sys_len;
  s.ref_len = ref_len;
  s.bp = 1.0;
  if (sys_len < ref_len) s.bp = sys_len > 0 ? std::exp(1.0 - static_cast<double>(ref_len) / static_cast<double>(sys_len)) : 0.0;
  const auto orders = static_cast<std::size_t>(opt.max_order);
  s.precisions.assign(orders, 0.0);
  bool any = false;
  for (double c : correct) any = any || c != 0;
  if (any) {
    double smooth_mteval = 1.0;
    std::size_t eff_order = orders;
    for (std::size_t n = 1; n <= orders; ++n) {
      if (opt.smooth == BleuSmooth::add_k && n > 1) correct[n - 1] += smooth_value, total[n - 1] += smooth_value;
      if (total[n - 1] == 0) break;
      if (opt.effective_order) eff_order = n;
      if (correct[n - 1] == 0) {
        if (opt.smooth == BleuSmooth::exp) {
          smooth_mteval *= 2;
          s.precisions[n - 1] = 100. / (smooth_mteval * total[n - 1]);
        } else if (opt.smooth == BleuSmooth::floor) {
          s.precisions[n - 1] = 100. * smooth_value / total[n - 1];
        }
      } else {
        s.precisions[n - 1] = 100. * correct[n - 1] / total[n - 1];
      }
    }
    double log_sum = 0;  // summed left to right, as Python's sum()
    for (std::size_t n = 0; n < eff_order; ++n) log_sum += my_log(s.precisions[n]);
    s.score = s.bp * std::exp(log_sum / static_cast<double>(eff_order));
  }
  s.counts = std::move(correct);
  s.totals = std::move(total);
  return s;
}

std::string signature(const std::string& nrefs, const BleuOptions& opt) {
  std::string smooth = to_string(opt.smooth);
  if (opt.smooth == BleuSmooth::floor || opt.smooth == BleuSmooth::add_k) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "[%.2f]", opt.smooth_value ? *opt.smooth_value : default_smooth_value(opt.smooth));
    smooth += buf;
  }
  return "nrefs:" + nrefs + "|case:" + (opt.lowercase ? "lc" : "mixed") + "|eff:" + (opt.effective_order ? "yes" : "no") +
         "|tok:" + to_string(opt.tokenize) + "|smooth:" + smooth + "|version:" + kSacreBleuVersion;
}

}  // namespace

BleuSmooth bleu_smooth_from_name(std::string_view name) {
  if (name == "exp") return BleuSmooth::exp;
  if (name == "floor") return BleuSmooth::floor;
  if (name == "add-k") return BleuSmooth::add_k;
  if (name == "none") return BleuSmooth::none;
  fail("bleu", "unknown smoothing method '", name, "'; allowed: exp, floor, add-k, none");
}

const char* to_string(BleuSmooth s) {
  switch (s) {
    case BleuSmooth::exp: return "exp";
    case BleuSmooth::floor: return "floor";
    case BleuSmooth::add_k: return "add-k";
    case BleuSmooth::none: return "none";
  }
  return "?";
}

BleuStatistics bleu_statistics(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                               const BleuOptions& opt) {
  check_streams(hyps, refs, "bleu");
  TFM_CHECK(opt.max_order >= 1, "bleu", "max_order must be >= 1, got ", opt.max_order);
  const auto orders = static_cast<std::size_t>(opt.max_order);
  BleuStatistics st;
  st.correct.assign(orders, 0);
  st.total.assign(orders, 0);
  st.nrefs = refs.size();
  for (std::size_t i = 0; i < hyps.size(); ++i) {
    NgramCounts ref_max;
    std::vector<std::int64_t> ref_lens;
    for (const auto& stream : refs) {
      const auto toks = segment_tokens(stream[i], opt);
      ref_lens.push_back(static_cast<std::int64_t>(toks.size()));
      for (const auto& [g, c] : ngrams(toks, opt.max_order)) {
        auto& m = ref_max[g];
        m = std::max(m, c);
      }
    }
    const auto hyp_toks = segment_tokens(hyps[i], opt);
    const auto hyp_len = static_cast<std::int64_t>(hyp_toks.size());
    st.sys_len += hyp_len;
    st.ref_len += closest_ref_len(hyp_len, ref_lens);
    for (const auto& [g, c] : ngrams(hyp_toks, opt.max_order)) {
      const auto n = static_cast<std::size_t>(order_of(g) - 1);
      st.total[n] += c;
      const auto it = ref_max.find(g);
      if (it != ref_max.end()) st.correct[n] += std::min(c, it->second);
    }
  }
  return st;
}

BleuScore bleu_from_statistics(const BleuStatistics& st, const BleuOptions& opt) {
  TFM_CHECK(st.correct.size() == static_cast<std::size_t>(opt.max_order) && st.total.size() == st.correct.size(), "bleu",
            "statistics of ", st.correct.size(), " orders for max_order ", opt.max_order);
  TFM_CHECK(opt.smooth != BleuSmooth::add_k || !opt.smooth_value || *opt.smooth_value >= 0, "bleu",
            "add-k smoothing needs k >= 0");
  BleuScore s = compute_bleu(std::vector<double>(st.correct.begin(), st.correct.end()),
                             std::vector<double>(st.total.begin(), st.total.end()), st.sys_len, st.ref_len, opt);
  s.signature = signature(std::to_string(st.nrefs), opt);
  return s;
}

BleuScore corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::vector<std::string>>& refs,
                      const BleuOptions& opt) {
  return bleu_from_statistics(bleu_statistics(hyps, refs, opt), opt);
}

BleuScore sentence_bleu(const std::string& hyp, const std::vector<std::string>& refs, const BleuOptions& opt) {
  std::vector<std::vector<std::string>> streams;
  for (const auto& r : refs) streams.push_back({r});
  return corpus_bleu({hyp}, streams, opt);
}

std::string BleuScore::verbose() const {
  std::string out;
  char buf[160];
  for (std::size_t n = 0; n < precisions.size(); ++n) {
    std::snprintf(buf, sizeof buf, "%s%.1f", n ? "/" : "", precisions[n]);
    out += buf;
  }
  const double ratio = ref_len ? static_cast<double>(sys_len) / static_cast<double>(ref_len) : 0.0;
  std::snprintf(buf, sizeof buf, " (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)", bp, ratio,
                static_cast<long long>(sys_len), static_cast<long long>(ref_len));
  return out + buf;
}

std::string BleuScore::format(int width) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", width, score);
  return "BLEU|" + signature + " = " + buf + " " + verbose();
}

}  // namespace tfm::metrics
