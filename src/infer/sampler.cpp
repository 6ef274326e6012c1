// Sampler: llama.cpp's default chain over one row of logits.
//
//   penalty -> top-k -> softmax -> top-p -> min-p -> temperature -> renormalise -> draw
//
// The filters see the penalised logits at temperature 1; temperature only reshapes the
// distribution over the survivors (llama.cpp applies it last in its default chain, so a
// low temperature never changes WHICH tokens may be drawn, only how likely each one is).
// Everything after the f32 logits is double, so the filters' boundaries are decided by the
// formulas below, not by float rounding:
//   top-k: sort by logit desc, ties by smaller id; keep the first k (ties at the k-th place
//          keep the smaller ids).
//   top-p: p_i = exp(l_i - l_max) / sum over the top-k survivors; keep the smallest prefix of
//          the sorted list whose cumulative p reaches p (cum >= p); at least one token.
//   min-p: keep exp(l_i - l_max) >= min_p (the ratio to the most likely token; >= keeps a
//          token sitting exactly on the threshold).
#include <algorithm>
#include <cmath>

#include "kernels/random.h"
#include "tfm/error.h"
#include "tfm/generate.h"

namespace tfm {
namespace {

constexpr const char* kOp = "sampler";

void validate(const SamplingOptions& o) {
  TFM_CHECK(std::isfinite(o.temperature), kOp, "temperature must be finite (<= 0: greedy), got ", o.temperature);
  TFM_CHECK(o.top_k >= 0, kOp, "top_k must be >= 0 (0: off), got ", o.top_k);
  TFM_CHECK(o.top_p > 0 && o.top_p <= 1, kOp, "top_p must be in (0, 1] (1: off), got ", o.top_p);
  TFM_CHECK(o.min_p >= 0 && o.min_p <= 1, kOp, "min_p must be in [0, 1] (0: off), got ", o.min_p);
  TFM_CHECK(o.repeat_penalty > 0 && std::isfinite(o.repeat_penalty), kOp,
            "repeat_penalty must be a finite number > 0 (1: off), got ", o.repeat_penalty);
  TFM_CHECK(o.repeat_last_n >= -1, kOp, "repeat_last_n must be >= -1 (-1: all, 0: none), got ", o.repeat_last_n);
  TFM_CHECK(std::isfinite(o.frequency_penalty) && std::isfinite(o.presence_penalty), kOp,
            "frequency_penalty and presence_penalty must be finite, got ", o.frequency_penalty, " and ", o.presence_penalty);
}

// The logits in double with CTRL's repetition penalty (Keskar et al. 2019, as llama.cpp):
// each DISTINCT token of the window is penalised once, however often it occurs there.
std::vector<double> penalised_logits(std::span<const float> logits, std::span<const std::int32_t> history,
                                     const SamplingOptions& o) {
  const auto V = static_cast<std::int64_t>(logits.size());
  TFM_CHECK(V > 0, kOp, "empty logits");
  std::vector<double> l(logits.begin(), logits.end());  // (V)
  for (std::int64_t v = 0; v < V; ++v)
    TFM_CHECK(std::isfinite(l[v]), kOp, "logit ", v, " is ", logits[v], " (NaN/Inf logits cannot be sampled)");
  const auto H = static_cast<std::int64_t>(history.size());
  const std::int64_t n = o.repeat_last_n < 0 ? H : std::min(H, o.repeat_last_n);
  std::vector<char> seen(static_cast<std::size_t>(V), 0);
  for (std::int64_t i = H - n; i < H; ++i) {
    const std::int32_t t = history[i];
    TFM_CHECK(t >= 0 && t < V, kOp, "history token ", t, " at position ", i, " is outside the vocabulary of ", V);
    if (o.repeat_penalty == 1.0 || seen[t]) continue;
    seen[t] = 1;
    l[t] = l[t] > 0 ? l[t] / o.repeat_penalty : l[t] * o.repeat_penalty;
  }
  // OpenAI's frequency and presence penalties over the same window (after CTRL's, as
  // llama.cpp): l -= count * frequency + (count > 0) * presence.
  if (o.frequency_penalty != 0 || o.presence_penalty != 0) {
    std::vector<std::int64_t> count(static_cast<std::size_t>(V), 0);
    for (std::int64_t i = H - n; i < H; ++i) ++count[static_cast<std::size_t>(history[i])];
    for (std::int64_t v = 0; v < V; ++v)
      if (count[v] > 0) l[v] -= static_cast<double>(count[v]) * o.frequency_penalty + o.presence_penalty;
  }
  return l;
}

// A uniform double in [0, 1) with 53 random bits from two Philox words: a 24-bit float
// (uniform_from_bits) would make tokens with p < 2^-24 undrawable.
double uniform53(std::uint64_t seed, std::uint64_t stream, std::uint64_t draw) {
  const auto w = kernels::philox4x32(seed, stream, draw);
  const std::uint64_t bits = (static_cast<std::uint64_t>(w[0] >> 5) << 26) | (w[1] >> 6);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);  // 2^53
}

}  // namespace

Sampler::Sampler(SamplingOptions o) : o_(o) { validate(o_); }

std::vector<Candidate> Sampler::candidates(std::span<const float> logits,
                                           std::span<const std::int32_t> history, const TokenMask* allowed) const {
  const std::vector<double> l = penalised_logits(logits, history, o_);  // (V)
  const auto V = static_cast<std::int64_t>(l.size());
  TFM_CHECK(!allowed || static_cast<std::int64_t>(allowed->words.size()) * 64 >= V, kOp, "token mask shorter than the vocabulary");
  // Most likely first, ties by smaller id: this order decides top-k ties and the output order.
  auto before = [&](std::int32_t a, std::int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  std::vector<std::int32_t> ids;
  ids.reserve(static_cast<std::size_t>(V));
  for (std::int32_t v = 0; v < V; ++v)
    if (!allowed || allowed->test(v)) ids.push_back(v);
  TFM_CHECK(!ids.empty(), kOp, "the token mask allows no token");
  if (o_.temperature <= 0) {  // greedy: the argmax survives every filter anyway
    std::int32_t best = ids[0];
    for (const std::int32_t v : ids)
      if (before(v, best)) best = v;
    return {{best, 1.0}};
  }
  auto n = static_cast<std::int64_t>(ids.size());  // survivors: ids[0, n)
  if (o_.top_k > 0 && o_.top_k < n) {
    n = o_.top_k;
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), before);
  } else {
    std::sort(ids.begin(), ids.end(), before);
  }
  ids.resize(static_cast<std::size_t>(n));
  const double lmax = l[ids[0]];
  std::vector<double> w(static_cast<std::size_t>(n));  // exp(l - lmax) of the survivors, (n)
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) total += w[i] = std::exp(l[ids[i]] - lmax);
  if (o_.top_p < 1) {
    double cum = 0;
    std::int64_t keep = n;
    for (std::int64_t i = 0; i < n; ++i) {
      cum += w[i] / total;
      if (cum >= o_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (o_.min_p > 0) {
    std::int64_t keep = 1;  // w[0] == 1 always passes; the list is sorted, so cut at the first miss
    while (keep < n && w[keep] >= o_.min_p) ++keep;
    n = keep;
  }
  // Temperature over the survivors, renormalised: p_i = exp((l_i - l_max) / T) / sum.
  std::vector<Candidate> out(static_cast<std::size_t>(n));
  double z = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    out[i].id = ids[i];
    z += out[i].prob = std::exp((l[ids[i]] - lmax) / o_.temperature);
  }
  for (auto& c : out) c.prob /= z;
  return out;
}

double Sampler::uniform(std::uint64_t stream, std::uint64_t draw) const { return uniform53(o_.seed, stream, draw); }

std::int32_t Sampler::sample(std::span<const float> logits, std::span<const std::int32_t> history,
                             std::uint64_t stream, std::uint64_t draw, const TokenMask* allowed) const {
  const std::vector<Candidate> c = candidates(logits, history, allowed);
  if (c.size() == 1) return c[0].id;
  const double u = uniform53(o_.seed, stream, draw);
  double cum = 0;
  for (const auto& x : c)
    if (u < (cum += x.prob)) return x.id;
  return c.back().id;  // u within rounding of 1 after the last cumulative sum
}

}  // namespace tfm
