// Continuous batching: requests join and leave a running batch of decoder-only sequences at
// any step (what `tfm serve --parallel N` runs; docs/server.md).
//
//   ContinuousBatch cb(lm.model, lm.tokenizer, {.ctx_size = 512, .max_batch = 4});
//   std::int64_t id = cb.add({.prompt = cb.encode_prompt("ROMEO:"), .options = o});
//   while (!cb.idle())
//     for (const BatchEvent& e : cb.step()) std::cout << e.text;   // e.finished: e.result
//
// Each step runs at most ONE prefill chunk (of the oldest request still reading its prompt),
// then samples every sequence whose next-token logits are ready and decodes those still going
// in one batched step. A prompt is read in fixed chunks from position 0, whatever else runs, and
// decode steps use Generator's row-independent path (detail::decode_rows) and its sampler with
// the request's own (seed, stream, draw) — so a request's tokens are bit-identical whatever
// else is in the batch, and a prompt that fits one chunk gives exactly `Generator::generate`'s
// tokens (stream 0). A full context ends a sequence with stop reason "context" (no shift).
//
// Speculative decoding (enable_speculative; speculative.cpp states the rule): a slot whose
// request allows it drafts a few tokens (prompt lookup, or a draft model with a KV cache slot of
// its own) and has the model score its last token and the draft; every drafting slot's round
// is scored in one batched step, shorter feeds padded (rows never mix and attention is causal,
// so a round's numbers are those of a step of its own). The acceptable prefix and one token of
// the model's are kept. Greedy tokens stay those of plain
// decoding, sampled ones are distributed as plain sampling's, and a grammar's mask applies at
// every scored position (so its text still parses).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "tfm/generate.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/prompt_cache.h"
#include "tfm/session.h"
#include "tfm/tokenizer.h"

namespace tfm {

namespace detail {
class Constraint;
}

struct BatchRequest {
  std::vector<std::int32_t> prompt;   // from encode_prompt (non-empty, shorter than the context)
  GenerateOptions options;            // context_shift is ignored (off)
  std::uint64_t stream = 0;           // the sampler's stream: choices of one prompt differ by it
  std::int64_t top_logprobs = -1;     // < 0: no log-probabilities; k >= 0: the chosen token's and the k best
  bool speculative = true;            // draft and verify, where enable_speculative was called
};

struct TokenLogprob {
  std::int32_t id = 0;
  double logprob = 0;                 // log-softmax of the model's raw logits (before penalties, temperature)
};

struct BatchEvent {
  std::int64_t id = 0;                // the request, as add() returned it
  std::string text;                   // text newly safe to show (may be empty)
  bool has_token = false;             // a token was generated this step
  std::int32_t token = 0;
  TokenLogprob chosen;                // when top_logprobs >= 0
  std::vector<TokenLogprob> top;      // the top_logprobs most likely, best first
  bool finished = false;
  GenerateResult result;              // when finished: tokens, text, stop_reason
};

class ContinuousBatch {
 public:
  // opt.max_batch slots of opt.ctx_size positions; prompts are prefilled prefill_chunk tokens
  // per step.
  ContinuousBatch(Model& model, const Tokenizer& tok, SessionOptions opt, std::int64_t prefill_chunk = 64);
  std::int64_t slots() const { return cache_.slots(); }
  std::int64_t context_size() const { return cache_.capacity(); }
  std::int64_t prefill_chunk() const { return chunk_; }
  std::int64_t active() const;        // slots in use
  bool has_free_slot() const { return active() < slots(); }
  bool idle() const { return active() == 0; }
  const KVCache& cache() const { return cache_; }
  const Timings& timings() const { return timings_; }
  // Generator::encode_prompt's checks (non-empty, fits the context).
  std::vector<std::int32_t> encode_prompt(std::string_view prompt) const;

  // Keeps up to `bytes` of prompt blocks (one prefill chunk each) for later prompts that
  // begin with the same tokens (tfm/prompt_cache.h); 0 turns it off. Results stay
  // bit-identical: a reused block is what the same chunk computed before.
  void enable_prompt_cache(std::int64_t bytes);
  const PromptCache* prompt_cache() const { return prompt_cache_.get(); }
  // The prompt cache in a file and back (tfm serve's /slots): `model_id` and the cache's shape
  // (layers, heads, type, chunk) name the layout a file must match. Save returns the blocks
  // written; load the blocks added; erase the blocks dropped. Throws without a prompt cache.
  std::int64_t save_prompt_cache(const std::string& path, const std::string& model_id) const;
  std::int64_t load_prompt_cache(const std::string& path, const std::string& model_id);
  std::int64_t erase_prompt_cache();

  // Speculative decoding for requests that allow it: s.draft (same vocabulary, decoder-only
  // language model; null: prompt lookup), drafts of 1 .. s.max_draft tokens adapting to what
  // is kept. Call before the first add().
  void enable_speculative(const SpeculativeOptions& s);
  bool speculative() const { return speculative_; }
  const SpeculativeStats& speculative_stats() const { return spec_stats_; }

  // Takes a free slot (throws when none is free or the request is malformed); returns its id.
  std::int64_t add(BatchRequest r);
  // Frees the request's slot now (no event follows). Unknown or finished ids are ignored.
  void cancel(std::int64_t id);
  // One scheduler step (see the top of this file). Finished requests have left their slots.
  std::vector<BatchEvent> step();

 private:
  struct Slot {
    bool used = false;
    std::int64_t id = 0;
    BatchRequest req;
    std::int64_t prefilled = 0;       // prompt tokens in the cache
    bool logits_ready = false;        // next-token logits waiting in logits_ (slot row)
    std::int64_t generated = 0;       // the sampler's draw number
    std::vector<std::int32_t> history;
    GenerateResult out;
    std::size_t emitted = 0;
    std::shared_ptr<detail::Constraint> constraint;  // options.grammar's state
    std::uint64_t chain = 0;          // prompt cache key of the blocks prefilled so far
    // Speculative slots: `pending` is taken (in history, sent) but not yet in the cache; each
    // round feeds it with the draft.
    bool has_pending = false;
    std::int32_t pending = 0;
    std::int64_t draft_len = 4;
    std::uint64_t accept_draw = 0, draft_draw = 0, bonus_draw = 0;
  };
  // Takes `tok` (sampled from `row`) into slot s's text: e's token, text and log-probabilities;
  // false when the sequence ended there (eos, a stop string, the context), e then finished.
  bool take(std::int64_t s, std::int32_t tok, std::span<const float> row, BatchEvent& e);
  // Before slot s's next token: a spent budget ends the text ("length"), and so does a grammar
  // that allows nothing more (its stop reason); else *mask is the grammar's (null without one).
  // False when the text ended (its event added to `events`).
  bool next_token_allowed(std::int64_t s, std::vector<BatchEvent>& events, const TokenMask** mask);
  // A speculative round in three parts: plan (the mask before drafting, the draft, the feed),
  // the model's scores of every planned feed (one batched step, feeds padded), then settle (the
  // acceptance rule position by position, the cache cut back to what was kept).
  struct Round {
    std::int64_t slot = 0, start = 0;     // the slot and its cache length before the feed
    std::vector<std::int32_t> draft, feed;  // feed: the pending token, then the draft
    std::vector<std::vector<Candidate>> q;  // the draft model's distributions (empty: one-hot)
    const TokenMask* mask = nullptr;        // the first scored position's grammar mask
    std::vector<float> rows;                // (1 + draft, V) scores
    double seconds = 0;                     // its share of the time spent
  };
  bool plan_round(std::int64_t s, std::vector<BatchEvent>& events, Round& r);
  void score_rounds(std::vector<Round>& rounds);
  void settle_round(Round& r, std::vector<BatchEvent>& events);
  void sample_slot(std::int64_t s, std::vector<BatchEvent>& events, std::vector<std::int64_t>& live,
                   std::vector<std::int32_t>& next);
  void finish(std::int64_t s, const std::string& reason, BatchEvent& e);

  Model& model_;
  const Tokenizer& tok_;
  KVCache cache_;
  std::int64_t chunk_;
  std::vector<Slot> slots_;
  std::deque<std::int64_t> prefill_order_;  // slots still reading their prompt, oldest first
  std::vector<float> logits_;               // (slots, V)
  std::int64_t next_id_ = 1;
  Timings timings_;
  std::shared_ptr<const TokenTrie> grammar_vocab_;  // built at the first grammar
  std::unique_ptr<PromptCache> prompt_cache_;
  bool speculative_ = false;
  SpeculativeOptions spec_;
  std::unique_ptr<KVCache> draft_cache_;    // the draft model's, one slot per slot
  SpeculativeStats spec_stats_;
  void reuse_cached_blocks(std::int64_t s);
  std::string prompt_cache_layout(const std::string& model_id) const;
  void remember_block(std::int64_t s, std::int64_t start, std::int64_t end);
};

}  // namespace tfm
