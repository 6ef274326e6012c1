// Speculative decoding (Leviathan et al. 2023; Chen et al. 2023): a cheap drafter proposes k
// tokens, the model scores all of them in ONE cached step (k + 1 positions), and the longest
// acceptable prefix is kept, plus one token of the model's own. Drafters: a smaller model with
// the same vocabulary (its own one-slot KV cache, rolled back with the model's), or prompt
// lookup (the tokens that followed the latest earlier occurrence of the text's last n-gram).
//
// Acceptance, for each draft token d drawn from the drafter's distribution q (one-hot for
// prompt lookup or a greedy draft) while the model's distribution there is p (the sampler's
// filtered, tempered distribution, penalties over the history so far):
//   sampled: keep d with probability min(1, p(d) / q(d)); at the first refusal draw from
//            max(0, p - q) renormalised. The kept-or-redrawn token is then distributed as p,
//            so the text is distributed as plain sampling's.
//   greedy:  keep d while it is the argmax of p; the first other token is p's argmax.
// The draft length adapts: one more after a round that kept every draft, else the number kept
// plus one.
#include <algorithm>
#include <chrono>
#include <optional>

#include "decode_steps.h"
#include "speculative_steps.h"
#include "tfm/error.h"
#include "tfm/session.h"

namespace tfm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The probability of `id` in a candidate list (0 when absent).
double prob_of(const std::vector<Candidate>& c, std::int32_t id) {
  for (const Candidate& x : c)
    if (x.id == id) return x.prob;
  return 0.0;
}

// Draws from max(0, p - q), renormalised (p's best when that is all zero: p == q), u in [0, 1).
std::int32_t draw_residual(const std::vector<Candidate>& p, const std::vector<Candidate>& q, double u) {
  std::vector<Candidate> r;
  double z = 0;
  for (const Candidate& x : p) {
    const double w = std::max(0.0, x.prob - prob_of(q, x.id));
    if (w > 0) r.push_back({x.id, w}), z += w;
  }
  if (r.empty()) return p.front().id;
  double cum = 0;
  for (const Candidate& x : r)
    if (u * z < (cum += x.prob)) return x.id;
  return r.back().id;
}

}  // namespace

namespace detail {

DraftVerdict judge_draft(const Sampler& sampler, bool greedy, const std::vector<Candidate>& p, std::int32_t d,
                         const std::vector<Candidate>* q, std::uint64_t stream, std::uint64_t& draw) {
  if (greedy) return {p.front().id == d, p.front().id};
  const std::vector<Candidate> one_hot{{d, 1.0}};
  const std::vector<Candidate>& qq = q ? *q : one_hot;
  if (sampler.uniform(stream, draw++) * prob_of(qq, d) < prob_of(p, d)) return {true, d};
  return {false, draw_residual(p, qq, sampler.uniform(stream, draw++))};
}

std::vector<std::int32_t> lookup_draft(const std::vector<std::int32_t>& h, std::int64_t longest, std::int64_t k) {
  const auto H = static_cast<std::int64_t>(h.size());
  for (std::int64_t n = std::min(longest, H - 1); n >= 1; --n) {
    std::int64_t best = -1, best_len = 0;
    for (std::int64_t j = H - n - 1; j >= 0 && best_len < k; --j) {
      if (!std::equal(h.begin() + j, h.begin() + j + n, h.end() - n)) continue;
      const std::int64_t len = std::min(k, H - (j + n));
      if (len > best_len) best = j + n, best_len = len;
    }
    if (best >= 0) return std::vector<std::int32_t>(h.begin() + best, h.begin() + best + best_len);
  }
  return {};
}

std::vector<std::int32_t> model_draft(Model& draft, KVCache& cache, std::int64_t slot, const Sampler& sampler, bool greedy,
                                      std::vector<std::int32_t> h, std::int64_t k, std::uint64_t stream, std::uint64_t& draw,
                                      std::vector<std::vector<Candidate>>& q) {
  std::vector<std::int32_t> out;
  q.clear();
  for (std::int64_t i = 0; i < k; ++i) {
    const std::int64_t have = cache.length(slot);
    const std::vector<std::int32_t> feed(h.begin() + have, h.end());
    const auto row = draft.decode_cached(ids_tensor(feed), {slot}, cache).to_floats();
    std::vector<Candidate> c = sampler.candidates(row, h);
    std::int32_t d = c.front().id;
    if (!greedy) {
      const double u = sampler.uniform(stream, draw++);
      double cum = 0;
      d = c.back().id;
      for (const Candidate& x : c)
        if (u < (cum += x.prob)) {
          d = x.id;
          break;
        }
    }
    out.push_back(d);
    q.push_back(std::move(c));
    h.push_back(d);
  }
  return out;
}

}  // namespace detail

GenerateResult Generator::generate_speculative(std::string_view prompt_text, const GenerateOptions& o, const SpeculativeOptions& s,
                                               const std::function<void(std::string_view)>& on_text, SpeculativeStats* stats) {
  TFM_CHECK(o.max_new_tokens >= 0, "generate", "max_new_tokens must be >= 0, got ", o.max_new_tokens);
  for (const auto& x : o.stop) TFM_CHECK(!x.empty(), "generate", "stop strings must not be empty");
  TFM_CHECK(!o.grammar, "speculative", "a grammar and speculative decoding do not go together");
  TFM_CHECK(s.max_draft >= 1 && s.max_draft <= 64, "speculative", "max_draft must be 1..64, got ", s.max_draft);
  TFM_CHECK(s.ngram >= 1, "speculative", "ngram must be >= 1");
  const std::int64_t V = model_.config().vocab_size;
  std::optional<KVCache> dcache;
  if (s.draft) {
    const ModelConfig& dc = s.draft->config();
    TFM_CHECK(dc.architecture == Architecture::decoder_only && dc.head == HeadKind::lm, "speculative", "the draft must be a decoder-only language model");
    TFM_CHECK(dc.vocab_size == V, "speculative", "the draft's vocabulary (", dc.vocab_size, ") differs from the model's (", V, ")");
    TFM_CHECK(dc.max_positions >= cache_.capacity(), "speculative", "the draft reads ", dc.max_positions, " positions; the context is ",
              cache_.capacity());
    s.draft->set_training(false);
    dcache.emplace(dc, 1, cache_.capacity());
  }
  const Sampler sampler(o.sampling);
  const bool greedy = o.sampling.temperature <= 0;
  const std::int32_t eos = o.stop_at_eos ? tok_.eos_id() : -1;
  const std::vector<std::int32_t> prompt = encode_prompt(prompt_text);

  GenerateResult out;
  out.prompt_tokens = prompt;
  std::vector<std::int32_t> hist = prompt;
  std::size_t emitted = 0;
  // Takes a token into the text; false when generation ends there (stop_reason set).
  auto emit = [&](std::int32_t t) {
    if (detail::is_end_token(t, eos, o)) {
      out.stop_reason = "eos";
      return false;
    }
    out.tokens.push_back(t);
    hist.push_back(t);
    bool stopped = false;
    const std::string piece = detail::advance_text(tok_, o.stop, out, emitted, &stopped);
    if (on_text && !piece.empty()) on_text(piece);
    if (stopped) out.stop_reason = "stop";
    else if (static_cast<std::int64_t>(out.tokens.size()) >= o.max_new_tokens) out.stop_reason = "length";
    return out.stop_reason.empty();
  };

  auto t0 = Clock::now();
  cache_.reset(0);
  const auto first = model_.decode_cached(detail::ids_tensor(prompt), {0}, cache_).to_floats();
  timings_.prefill_tokens += static_cast<std::int64_t>(prompt.size());
  timings_.prefill_seconds += since(t0);
  if (o.max_new_tokens == 0) {
    out.stop_reason = "length";
    return out;
  }
  t0 = Clock::now();
  if (!emit(sampler.sample(first, hist, 0, 0))) {
    timings_.decode_seconds += since(t0);
    return out;
  }
  std::int64_t k = std::min<std::int64_t>(4, s.max_draft);
  std::uint64_t accept_draw = 0, draft_draw = 0, bonus_draw = 0;
  const detail::SpeculativeStreams streams = detail::speculative_streams(0);
  for (;;) {
    // The model holds every token but the last one (x = hist.back()), which this round feeds.
    const std::int64_t L = cache_.length(0);
    if (L + 1 > cache_.capacity()) {
      out.stop_reason = "context";
      break;
    }
    const std::int64_t left = o.max_new_tokens - static_cast<std::int64_t>(out.tokens.size());
    const std::int64_t kk = std::max<std::int64_t>(0, std::min({k, cache_.capacity() - L - 1, left - 1}));
    // 1. The draft.
    std::vector<std::int32_t> draft;
    std::vector<std::vector<Candidate>> q;  // the draft model's distributions (empty: one-hot)
    if (s.draft && kk > 0) {
      draft = detail::model_draft(*s.draft, *dcache, 0, sampler, greedy, hist, kk, streams.draft, draft_draw, q);
    } else if (kk > 0) {
      draft = detail::lookup_draft(hist, s.ngram, kk);
    }
    // 2. The model scores x and the draft in one step.
    std::vector<std::int32_t> feed{hist.back()};
    feed.insert(feed.end(), draft.begin(), draft.end());
    const auto rows = model_.decode_cached(detail::ids_tensor(feed), {0}, cache_, true).to_floats();  // (1, 1 + n, V)
    // 3. Keep the acceptable prefix, then one token of the model's.
    std::vector<std::int32_t> h = hist;
    std::size_t kept = 0;
    std::int32_t next = -1;
    for (; kept < draft.size(); ++kept) {
      const std::span<const float> row(rows.data() + kept * static_cast<std::size_t>(V), static_cast<std::size_t>(V));
      const detail::DraftVerdict v = detail::judge_draft(sampler, greedy, sampler.candidates(row, h), draft[kept],
                                                         q.empty() ? nullptr : &q[kept], streams.accept, accept_draw);
      if (!v.keep) {
        next = v.token;
        break;
      }
      h.push_back(draft[kept]);
    }
    if (next < 0) {  // every draft token kept: the model's own next one
      const std::span<const float> row(rows.data() + draft.size() * static_cast<std::size_t>(V), static_cast<std::size_t>(V));
      next = sampler.sample(row, h, streams.bonus, bonus_draw++);
    }
    // 4. Both caches forget what was not kept.
    cache_.set_length(0, L + 1 + static_cast<std::int64_t>(kept));
    if (dcache) dcache->set_length(0, std::min(dcache->length(0), L + 1 + static_cast<std::int64_t>(kept)));
    if (stats) {
      ++stats->rounds;
      stats->drafted += static_cast<std::int64_t>(draft.size());
      stats->accepted += static_cast<std::int64_t>(kept);
    }
    bool go = true;
    for (std::size_t i = 0; go && i < kept; ++i) go = emit(draft[i]);
    if (go) go = emit(next);
    if (!go) break;
    if (!draft.empty())
      k = kept == draft.size() ? std::min(k + 1, s.max_draft) : std::max<std::int64_t>(1, static_cast<std::int64_t>(kept) + 1);
  }
  timings_.decode_tokens += static_cast<std::int64_t>(out.tokens.size());
  timings_.decode_seconds += since(t0);
  return out;
}

}  // namespace tfm
