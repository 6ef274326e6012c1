// Decoding: token samplers (greedy, temperature, top-k, top-p, min-p, repetition penalty)
// and beam search, written against DecodeStepper — anything that turns "append these tokens
// to these rows" into next-token logits. InferenceSession (session.h) is the KV-cache
// stepper; tests also drive them with a full-recompute stepper.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tfm/grammar.h"
#include "tfm/tensor.h"

namespace tfm {

// ---- sampling ----------------------------------------------------------------------------
// llama.cpp's order: repetition penalty, then top-k, top-p, min-p over the penalised logits,
// then temperature; then one draw. temperature <= 0 is greedy (argmax after the penalty).
// The filters see temperature-1 probabilities (temperature changes how likely the survivors
// are, never which survive). Ties go to the smaller id (also at top-k's k-th place); top-p
// keeps the shortest sorted prefix with cumulative p >= top_p; min-p keeps
// exp(l - l_max) >= min_p. Draws: a 53-bit uniform from Philox(seed; stream, draw).
struct SamplingOptions {
  double temperature = 0.8;     // <= 0: greedy
  std::int64_t top_k = 40;      // keep the k most likely tokens; 0: off
  double top_p = 0.95;          // keep the smallest set whose probability reaches p; 1: off
  double min_p = 0.05;          // drop tokens with p < min_p * p_max; 0: off
  double repeat_penalty = 1.0;  // CTRL's: logit/r if > 0 else logit*r, for recent tokens; 1: off
  std::int64_t repeat_last_n = 64;  // window of recent tokens the penalty looks at; 0: none, -1: all
  // OpenAI's penalties over the same window, after CTRL's: logit -= count * frequency_penalty
  // + (count > 0) * presence_penalty. 0: off.
  double frequency_penalty = 0, presence_penalty = 0;
  std::uint64_t seed = 0;
};

// One candidate surviving the filters, with its renormalised probability.
struct Candidate {
  std::int32_t id;
  double prob;
};

class Sampler {
 public:
  explicit Sampler(SamplingOptions o);
  const SamplingOptions& options() const { return o_; }
  // The filtered, renormalised distribution for one row of logits (V), most likely first
  // (ties by smaller id). `history` holds the tokens seen so far (prompt + generated).
  // `allowed` (constrained decoding): only its tokens are candidates, as if the others had
  // probability 0 before the filters; it must allow at least one.
  std::vector<Candidate> candidates(std::span<const float> logits, std::span<const std::int32_t> history,
                                    const TokenMask* allowed = nullptr) const;
  // Next token for a sequence. Draw number `draw` of stream `stream` decides, so a sequence
  // gives the same tokens whatever else is sampled around it (batch invariance).
  std::int32_t sample(std::span<const float> logits, std::span<const std::int32_t> history,
                      std::uint64_t stream, std::uint64_t draw, const TokenMask* allowed = nullptr) const;
  // The uniform in [0, 1) (53 bits) that draw `draw` of stream `stream` uses.
  double uniform(std::uint64_t stream, std::uint64_t draw) const;

 private:
  SamplingOptions o_;
};

// ---- the model side of decoding ----------------------------------------------------------
// A set of rows (sequences under decoding), each with a state (its KV cache or its tokens).
class DecodeStepper {
 public:
  virtual ~DecodeStepper() = default;
  virtual std::int64_t vocab_size() const = 0;
  // Row r's state becomes a copy of row parents[r]'s (all rows read the old states: beam
  // reordering), then row r appends tokens[r]. Returns the next-token logits (rows, V) f32.
  // rows = parents.size() = tokens.size(); it may differ from the previous call's.
  virtual Tensor step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) = 0;
};

// ---- beam search -------------------------------------------------------------------------
enum class LengthPenalty {
  hf,    // score = sum log p / len^alpha        (Hugging Face's length_penalty)
  gnmt,  // score = sum log p / ((5+len)/6)^alpha (Wu et al. 2016, GNMT)
};

struct BeamOptions {
  std::int64_t beam_size = 4;
  std::int64_t n_best = 1;            // hypotheses returned (<= beam_size)
  double length_penalty = 1.0;        // alpha; 0 scores by the plain sum of log-probabilities
  LengthPenalty penalty_form = LengthPenalty::hf;
  bool early_stopping = true;         // stop once beam_size hypotheses are finished
  std::int64_t max_new_tokens = 64;
  std::int32_t eos_id = -1;           // < 0: no EOS, every hypothesis runs to max_new_tokens
  std::vector<std::int32_t> more_eos_ids;  // more ids that end a hypothesis (generation_config.json)
  bool ends_on(std::int32_t token) const {
    if (token == eos_id) return true;
    for (const std::int32_t id : more_eos_ids)
      if (token == id) return true;
    return false;
  }
};

struct Hypothesis {
  std::vector<std::int32_t> tokens;   // generated tokens, EOS included when it ended on one
  double log_prob = 0;                // sum of the tokens' log-probabilities
  double score = 0;                   // log_prob with the length penalty applied
};

// Beam search from a stepper holding ONE row whose next-token logits are `first_logits` (V).
// The stepper is driven with up to beam_size rows. Returns the n_best hypotheses, best first,
// distinct (fewer only when nearly every proposal ended in EOS). Hugging Face's algorithm:
// the 2*beam_size best (beam, token) pairs per step; len in the penalty counts the EOS;
// early_stopping = false stops when the worst kept hypothesis scores at least the best live
// beam's log_prob / lp(current length) (HF's heuristic). src/infer/beam_search.cpp has more.
std::vector<Hypothesis> beam_search(DecodeStepper& stepper, std::span<const float> first_logits, const BeamOptions& o);

}  // namespace tfm
