// The pieces of speculative decoding that Generator::generate_speculative (one prompt,
// speculative.cpp) and ContinuousBatch (the server's slots, continuous_batch.cpp) share: the
// drafters and the residual draw of the acceptance rule (the rule itself: speculative.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/generate.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"

namespace tfm::detail {

// The sampler streams of a sequence's speculative rounds, apart from every plain stream (a
// request's choice number: the top bit is never set there), from the other choices' rounds and
// from each other, so no two uses share a random number.
struct SpeculativeStreams {
  std::uint64_t accept, draft, bonus;
};
inline SpeculativeStreams speculative_streams(std::uint64_t base) {
  const std::uint64_t b = (std::uint64_t{1} << 63) | (base << 8);
  return {b | 11u, b | 12u, b | 13u};
}

// The acceptance rule at one drafted position, given the model's distribution p there (the
// sampler's candidates), the draft token d and the drafter's distribution q (null: one-hot on
// d): greedy keeps d while it is p's best, else takes p's best; sampling keeps d with
// probability min(1, p(d) / q(d)), else draws from max(0, p - q) renormalised. Its uniforms
// are draws `draw`, `draw` + 1 of `stream` (draw advanced by those used).
struct DraftVerdict {
  bool keep;
  std::int32_t token;  // d when kept, else the model's replacement
};
DraftVerdict judge_draft(const Sampler& sampler, bool greedy, const std::vector<Candidate>& p, std::int32_t d,
                         const std::vector<Candidate>* q, std::uint64_t stream, std::uint64_t& draw);
// Prompt lookup: the tokens after an earlier occurrence of the last n tokens of h (n from
// `longest` down to 1), at most k: the latest occurrence with k tokens after it, else the one
// with the most.
std::vector<std::int32_t> lookup_draft(const std::vector<std::int32_t>& h, std::int64_t longest, std::int64_t k);
// k tokens from a draft model after h: slot `slot` of `cache` first catches up with h, then each
// token is the draft's greedy choice or a draw from its candidates (stream `stream`, draws from
// `draw` on, advanced); q gets the draft's distributions (for the acceptance rule).
std::vector<std::int32_t> model_draft(Model& draft, KVCache& cache, std::int64_t slot, const Sampler& sampler, bool greedy,
                                      std::vector<std::int32_t> h, std::int64_t k, std::uint64_t stream, std::uint64_t& draw,
                                      std::vector<std::vector<Candidate>>& q);

}  // namespace tfm::detail
