// ContinuousBatch: requests joining and leaving a running decode batch (continuous_batch.h).
#include "tfm/continuous_batch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "decode_steps.h"
#include "speculative_steps.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const ModelConfig& checked_lm(const Model& model) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, "continuous batch",
            "needs a decoder-only language model; this one is ", to_string(c.architecture));
  return c;
}

std::int64_t context_of(const ModelConfig& c, std::int64_t asked) {
  TFM_CHECK(asked >= 0, "continuous batch", "ctx_size must be >= 0, got ", asked);
  if (asked == 0) return c.max_positions;
  TFM_CHECK(c.position != PositionKind::learned || asked <= c.max_positions, "continuous batch", "ctx_size ", asked,
            " exceeds the model's learned position table of ", c.max_positions, " positions");
  return asked;
}

// Log-softmax of one row in double (the row's own numbers only: batch invariant).
void log_probs(std::span<const float> row, std::int32_t chosen, std::int64_t k, TokenLogprob& out_chosen,
               std::vector<TokenLogprob>& top) {
  double mx = -INFINITY;
  for (const float v : row) mx = std::max(mx, static_cast<double>(v));
  double z = 0;
  for (const float v : row) z += std::exp(static_cast<double>(v) - mx);
  const double lse = mx + std::log(z);
  out_chosen = {chosen, static_cast<double>(row[static_cast<std::size_t>(chosen)]) - lse};
  top.clear();
  if (k <= 0) return;
  std::vector<std::int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto kk = static_cast<std::ptrdiff_t>(std::min<std::size_t>(static_cast<std::size_t>(k), ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), [&](std::int32_t a, std::int32_t b) {
    const float la = row[static_cast<std::size_t>(a)], lb = row[static_cast<std::size_t>(b)];
    return la != lb ? la > lb : a < b;  // ties: the smaller id, as the sampler
  });
  for (std::ptrdiff_t i = 0; i < kk; ++i)
    top.push_back({ids[static_cast<std::size_t>(i)], static_cast<double>(row[static_cast<std::size_t>(ids[static_cast<std::size_t>(i)])]) - lse});
}

}  // namespace

ContinuousBatch::ContinuousBatch(Model& model, const Tokenizer& tok, SessionOptions opt, std::int64_t prefill_chunk)
    : model_(model), tok_(tok),
      cache_(checked_lm(model), std::max<std::int64_t>(opt.max_batch, 1), context_of(model.config(), opt.ctx_size)),
      chunk_(prefill_chunk), slots_(static_cast<std::size_t>(cache_.slots())),
      logits_(static_cast<std::size_t>(cache_.slots() * model.config().vocab_size)) {
  TFM_CHECK(prefill_chunk >= 1, "continuous batch", "prefill chunk must be >= 1, got ", prefill_chunk);
  model_.set_training(false);
}

std::int64_t ContinuousBatch::active() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.used; });
}

std::vector<std::int32_t> ContinuousBatch::encode_prompt(std::string_view prompt) const {
  return detail::encode_prompt_checked(tok_, prompt, cache_.capacity());
}

std::int64_t ContinuousBatch::add(BatchRequest r) {
  TFM_CHECK(!r.prompt.empty() && static_cast<std::int64_t>(r.prompt.size()) < cache_.capacity(), "continuous batch",
            "the prompt is ", r.prompt.size(), " tokens; it must be 1 .. ", cache_.capacity() - 1);
  TFM_CHECK(r.options.max_new_tokens >= 0, "continuous batch", "max_new_tokens must be >= 0");
  for (const auto& s : r.options.stop) TFM_CHECK(!s.empty(), "continuous batch", "stop strings must not be empty");
  const std::int64_t V = model_.config().vocab_size;
  for (const std::int32_t t : r.prompt)
    TFM_CHECK(t >= 0 && t < V, "continuous batch", "token id ", t, " is outside the vocabulary of ", V);
  for (std::size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].used) continue;
    Slot& slot = slots_[s];
    slot = Slot{};
    slot.used = true;
    slot.id = next_id_++;
    slot.history = r.prompt;
    slot.out.prompt_tokens = r.prompt;
    if (r.options.grammar)
      slot.constraint = std::make_shared<detail::Constraint>(*r.options.grammar, detail::grammar_vocabulary(tok_, V, grammar_vocab_),
                                                             tok_.eos_id(), r.options);
    slot.draft_len = std::min<std::int64_t>(4, spec_.max_draft);
    slot.req = std::move(r);
    cache_.reset(static_cast<std::int64_t>(s));
    if (draft_cache_) draft_cache_->reset(static_cast<std::int64_t>(s));
    prefill_order_.push_back(static_cast<std::int64_t>(s));
    return slot.id;
  }
  fail("continuous batch", "all ", slots_.size(), " slots are busy");
}

void ContinuousBatch::cancel(std::int64_t id) {
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].used && slots_[s].id == id) {
      slots_[s].used = false;
      std::erase(prefill_order_, static_cast<std::int64_t>(s));
    }
}

void ContinuousBatch::finish(std::int64_t s, const std::string& reason, BatchEvent& e) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  slot.out.stop_reason = reason;
  // What streaming held back (a possible stop-string start that never completed).
  if (slot.out.text.size() > slot.emitted) e.text += slot.out.text.substr(slot.emitted);
  e.finished = true;
  e.result = std::move(slot.out);
  slot.used = false;
}

bool ContinuousBatch::next_token_allowed(std::int64_t s, std::vector<BatchEvent>& events, const TokenMask** mask) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  const GenerateOptions& o = slot.req.options;
  *mask = nullptr;
  std::string ended;
  if (slot.generated >= o.max_new_tokens) {
    ended = "length";
  } else if (slot.constraint) {
    // Tokens left, this one included: the budget, and the context (every token of the history
    // is in the cache by now; a full one ends the sequence).
    const std::int64_t left = std::min(o.max_new_tokens - slot.generated,
                                       cache_.capacity() - static_cast<std::int64_t>(slot.history.size()) + 1);
    bool stop = false;
    *mask = slot.constraint->allowed(left, &stop);
    if (stop) ended = slot.constraint->stop_reason();
  }
  if (ended.empty()) return true;
  BatchEvent e;
  e.id = slot.id;
  finish(s, ended, e);
  events.push_back(std::move(e));
  return false;
}

void ContinuousBatch::sample_slot(std::int64_t s, std::vector<BatchEvent>& events, std::vector<std::int64_t>& live,
                                  std::vector<std::int32_t>& next) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  const GenerateOptions& o = slot.req.options;
  const TokenMask* mask = nullptr;
  if (!next_token_allowed(s, events, &mask)) return;
  const std::int64_t V = model_.config().vocab_size;
  const std::span<const float> row(logits_.data() + s * V, static_cast<std::size_t>(V));
  BatchEvent e;
  const Sampler sampler(o.sampling);
  const std::int32_t tok = sampler.sample(row, slot.history, slot.req.stream, static_cast<std::uint64_t>(slot.generated), mask);
  slot.logits_ready = false;
  if (take(s, tok, row, e)) {
    if (speculative_ && slot.req.speculative) {  // fed by the next speculative round, with a draft
      slot.has_pending = true;
      slot.pending = tok;
    } else {
      live.push_back(s);
      next.push_back(tok);
    }
  }
  events.push_back(std::move(e));
}

bool ContinuousBatch::take(std::int64_t s, std::int32_t tok, std::span<const float> row, BatchEvent& e) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  const GenerateOptions& o = slot.req.options;
  e.id = slot.id;
  ++slot.generated;
  if (detail::is_end_token(tok, tok_.eos_id(), o)) {
    finish(s, "eos", e);
    return false;
  }
  if (slot.constraint) slot.constraint->accept(tok);
  e.has_token = true;
  e.token = tok;
  if (slot.req.top_logprobs >= 0) log_probs(row, tok, slot.req.top_logprobs, e.chosen, e.top);
  slot.out.tokens.push_back(tok);
  slot.history.push_back(tok);
  bool stopped = false;
  e.text = detail::advance_text(tok_, o.stop, slot.out, slot.emitted, &stopped);
  if (stopped) {
    finish(s, "stop", e);
    return false;
  }
  // The new token is not in the cache yet: with a full cache it can never be read.
  if (static_cast<std::int64_t>(slot.history.size()) - 1 >= cache_.capacity()) {
    finish(s, "context", e);
    return false;
  }
  return true;
}

void ContinuousBatch::enable_speculative(const SpeculativeOptions& s) {
  TFM_CHECK(active() == 0, "speculative", "enable it before the first request");
  TFM_CHECK(s.max_draft >= 1 && s.max_draft <= 64, "speculative", "max_draft must be 1..64, got ", s.max_draft);
  TFM_CHECK(s.ngram >= 1, "speculative", "ngram must be >= 1");
  if (s.draft) {
    const ModelConfig& dc = s.draft->config();
    TFM_CHECK(dc.architecture == Architecture::decoder_only && dc.head == HeadKind::lm, "speculative",
              "the draft must be a decoder-only language model");
    TFM_CHECK(dc.vocab_size == model_.config().vocab_size, "speculative", "the draft's vocabulary (", dc.vocab_size,
              ") differs from the model's (", model_.config().vocab_size, ")");
    TFM_CHECK(dc.position != PositionKind::learned || dc.max_positions >= cache_.capacity(), "speculative", "the draft reads ",
              dc.max_positions, " positions; the context is ", cache_.capacity());
    s.draft->set_training(false);
    draft_cache_ = std::make_unique<KVCache>(dc, cache_.slots(), cache_.capacity());
  }
  spec_ = s;
  speculative_ = true;
}

// One round of slot s (speculative.cpp's loop body, for one slot of the batch), planned: the
// first position's grammar mask, then the draft (prompt lookup or the draft model) and the feed.
// False when the slot's text ended before it (its event added).
bool ContinuousBatch::plan_round(std::int64_t s, std::vector<BatchEvent>& events, Round& r) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  const GenerateOptions& o = slot.req.options;
  r.slot = s;
  if (!next_token_allowed(s, events, &r.mask)) return false;
  const auto t0 = Clock::now();
  const Sampler sampler(o.sampling);
  const bool greedy = o.sampling.temperature <= 0;
  const detail::SpeculativeStreams streams = detail::speculative_streams(slot.req.stream);
  r.start = cache_.length(s);  // the history but the pending token
  const std::int64_t kk = std::max<std::int64_t>(
      0, std::min({slot.draft_len, cache_.capacity() - r.start - 1, o.max_new_tokens - slot.generated - 1}));
  if (kk > 0 && spec_.draft)
    r.draft = detail::model_draft(*spec_.draft, *draft_cache_, s, sampler, greedy, slot.history, kk, streams.draft,
                                  slot.draft_draw, r.q);
  else if (kk > 0)
    r.draft = detail::lookup_draft(slot.history, spec_.ngram, kk);
  r.feed = {slot.pending};
  r.feed.insert(r.feed.end(), r.draft.begin(), r.draft.end());
  r.seconds = since(t0);
  return true;
}

// The model's scores of every round's feed at every position, in one step: shorter feeds are
// padded to the longest with their last token (decode_cached keeps rows apart and attention is
// causal, so a row's real positions score exactly as in a step of their own; the padding's
// cache entries are cut off when the round settles). A round whose padded feed would overrun
// its slot's context takes a step of its own.
void ContinuousBatch::score_rounds(std::vector<Round>& rounds) {
  if (rounds.empty()) return;
  const std::int64_t V = model_.config().vocab_size;
  std::size_t T = 0;
  for (const Round& r : rounds) T = std::max(T, r.feed.size());
  std::vector<std::size_t> together, alone;
  for (std::size_t i = 0; i < rounds.size(); ++i)
    (rounds[i].start + static_cast<std::int64_t>(T) <= cache_.capacity() ? together : alone).push_back(i);
  const auto step = [&](const std::vector<std::size_t>& group, std::size_t width) {
    std::vector<std::int64_t> ids, slots;
    for (std::size_t j : group) {
      const auto& f = rounds[j].feed;
      ids.insert(ids.end(), f.begin(), f.end());
      ids.insert(ids.end(), width - f.size(), f.back());
      slots.push_back(rounds[j].slot);
    }
    const auto t0 = Clock::now();
    const auto rows = model_.decode_cached(Tensor::from_ints(ids, {static_cast<std::int64_t>(group.size()),
                                                                   static_cast<std::int64_t>(width)}),
                                           slots, cache_, true).to_floats();  // (R, width, V)
    ++spec_stats_.steps;
    const double share = since(t0) / static_cast<double>(group.size());
    const std::size_t per = width * static_cast<std::size_t>(V);
    for (std::size_t k = 0; k < group.size(); ++k) {
      Round& r = rounds[group[k]];
      const auto first = rows.begin() + static_cast<std::ptrdiff_t>(k * per);
      r.rows.assign(first, first + static_cast<std::ptrdiff_t>(r.feed.size() * static_cast<std::size_t>(V)));
      r.seconds += share;
    }
  };
  if (!together.empty()) step(together, T);
  for (std::size_t j : alone) step({j}, rounds[j].feed.size());
}

// The scored positions in turn: its grammar mask, the acceptance rule, the token taken as plain
// decoding takes it; the cache keeps the pending token and the drafts kept.
void ContinuousBatch::settle_round(Round& r, std::vector<BatchEvent>& events) {
  const std::int64_t s = r.slot;
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  const GenerateOptions& o = slot.req.options;
  const std::int64_t V = model_.config().vocab_size;
  const auto t0 = Clock::now();
  const Sampler sampler(o.sampling);
  const bool greedy = o.sampling.temperature <= 0;
  const detail::SpeculativeStreams streams = detail::speculative_streams(slot.req.stream);
  const TokenMask* mask = r.mask;
  slot.has_pending = false;
  std::size_t kept = 0;
  std::int64_t taken = 0;
  for (std::size_t i = 0; i <= r.draft.size(); ++i) {
    cache_.set_length(s, r.start + 1 + static_cast<std::int64_t>(i));  // pending and the i drafts kept so far
    if (i > 0 && !next_token_allowed(s, events, &mask)) break;
    const std::span<const float> row(r.rows.data() + i * static_cast<std::size_t>(V), static_cast<std::size_t>(V));
    BatchEvent e;
    std::int32_t tok;
    bool keep = false;
    if (i < r.draft.size()) {
      const detail::DraftVerdict v = detail::judge_draft(sampler, greedy, sampler.candidates(row, slot.history, mask),
                                                         r.draft[i], r.q.empty() ? nullptr : &r.q[i], streams.accept,
                                                         slot.accept_draw);
      keep = v.keep;
      tok = v.token;
    } else {  // every draft token kept: the model's own next one
      tok = sampler.sample(row, slot.history, streams.bonus, slot.bonus_draw++, mask);
    }
    kept += keep;
    ++taken;
    const bool live = take(s, tok, row, e);
    events.push_back(std::move(e));
    if (!live) break;
    if (!keep) {  // a correction or the bonus token: fed by the next round
      slot.has_pending = true;
      slot.pending = tok;
      break;
    }
  }
  if (draft_cache_) draft_cache_->set_length(s, std::min(draft_cache_->length(s), cache_.length(s)));
  if (!r.draft.empty())
    slot.draft_len = kept == r.draft.size() ? std::min(slot.draft_len + 1, spec_.max_draft)
                                            : std::max<std::int64_t>(1, static_cast<std::int64_t>(kept) + 1);
  ++spec_stats_.rounds;
  spec_stats_.drafted += static_cast<std::int64_t>(r.draft.size());
  spec_stats_.accepted += static_cast<std::int64_t>(kept);
  timings_.decode_tokens += taken;
  timings_.decode_seconds += r.seconds + since(t0);
}

void ContinuousBatch::enable_prompt_cache(std::int64_t bytes) {
  TFM_CHECK(bytes >= 0, "continuous batch", "prompt cache budget must be >= 0");
  prompt_cache_ = bytes > 0 ? std::make_unique<PromptCache>(bytes) : nullptr;
}

std::string ContinuousBatch::prompt_cache_layout(const std::string& model_id) const {
  const ModelConfig& c = model_.config();
  return detail::concat("model ", model_id, ", vocab ", c.vocab_size, ", layers ", cache_.layers(), ", kv bytes per position ",
                        cache_.bytes_per_position(), ", cache ", dtype_name(cache_.type()), ", chunk ", chunk_);
}

std::int64_t ContinuousBatch::save_prompt_cache(const std::string& path, const std::string& model_id) const {
  TFM_CHECK(prompt_cache_, "prompt cache", "there is none (--cache-ram 0)");
  write_file_atomic(path, prompt_cache_->serialize(prompt_cache_layout(model_id)));
  return prompt_cache_->blocks();
}

std::int64_t ContinuousBatch::load_prompt_cache(const std::string& path, const std::string& model_id) {
  TFM_CHECK(prompt_cache_, "prompt cache", "there is none (--cache-ram 0)");
  return prompt_cache_->deserialize(read_file(path), prompt_cache_layout(model_id), static_cast<std::uint64_t>(chunk_),
                                    static_cast<std::uint64_t>(chunk_ * cache_.bytes_per_position()), path);
}

std::int64_t ContinuousBatch::erase_prompt_cache() {
  TFM_CHECK(prompt_cache_, "prompt cache", "there is none (--cache-ram 0)");
  const std::int64_t n = prompt_cache_->blocks();
  prompt_cache_->clear();
  return n;
}

// A slot starting its prompt takes the prompt's leading chunks from the cache, as long as they
// are there, but never the chunk holding the last token: its logits must be computed.
void ContinuousBatch::reuse_cached_blocks(std::int64_t s) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  if (!prompt_cache_ || slot.prefilled != 0 || cache_.prefix_positions() != 0) return;
  const auto n = static_cast<std::int64_t>(slot.req.prompt.size());
  const std::span<const std::int32_t> prompt(slot.req.prompt);
  std::int64_t at = 0;
  while (at + chunk_ < n) {
    const auto block = prompt.subspan(static_cast<std::size_t>(at), static_cast<std::size_t>(chunk_));
    const std::uint64_t key = PromptCache::chain(slot.chain, block);
    const auto* rows = prompt_cache_->find(key, slot.chain, block);
    if (!rows) break;
    cache_.copy_in(s, at, chunk_, *rows);
    slot.chain = key;
    at += chunk_;
  }
  cache_.set_length(s, at);
  cache_.retro_tokens(s).assign(prompt.begin(), prompt.begin() + at);  // RETRO retrieves from the tokens
  slot.prefilled = at;
  slot.out.cached_tokens = at;
}

// A whole chunk just prefilled goes to the cache, keyed by everything before it.
void ContinuousBatch::remember_block(std::int64_t s, std::int64_t start, std::int64_t end) {
  Slot& slot = slots_[static_cast<std::size_t>(s)];
  if (!prompt_cache_ || cache_.prefix_positions() != 0 || end - start != chunk_) return;
  const auto block = std::span<const std::int32_t>(slot.req.prompt).subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(chunk_));
  const std::uint64_t key = PromptCache::chain(slot.chain, block);
  prompt_cache_->put(key, slot.chain, block, cache_.copy_out(s, start, chunk_));
  slot.chain = key;
}

std::vector<BatchEvent> ContinuousBatch::step() {
  std::vector<BatchEvent> events;
  const std::int64_t V = model_.config().vocab_size;
  // 1. One prefill chunk, of the oldest request still reading its prompt. Chunk boundaries
  //    depend only on the prompt, so its numbers are the same whatever else is running.
  if (!prefill_order_.empty()) {
    const std::int64_t s = prefill_order_.front();
    Slot& slot = slots_[static_cast<std::size_t>(s)];
    reuse_cached_blocks(s);
    const auto n = static_cast<std::int64_t>(slot.req.prompt.size());
    const std::int64_t end = std::min(n, slot.prefilled + chunk_);
    const std::vector<std::int32_t> part(slot.req.prompt.begin() + slot.prefilled, slot.req.prompt.begin() + end);
    const auto t0 = Clock::now();
    const auto row = model_.decode_cached(detail::ids_tensor(part), {s}, cache_).to_floats();
    timings_.prefill_tokens += end - slot.prefilled;
    timings_.prefill_seconds += since(t0);
    remember_block(s, slot.prefilled, end);
    slot.prefilled = end;
    if (end == n) {
      std::copy(row.begin(), row.end(), logits_.begin() + s * V);
      slot.logits_ready = true;
      prefill_order_.pop_front();
    }
  }
  // 2. Sample every slot whose logits are ready; 3. decode the survivors together.
  std::vector<std::int64_t> live;
  std::vector<std::int32_t> next;
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(slots_.size()); ++s)
    if (slots_[static_cast<std::size_t>(s)].used && slots_[static_cast<std::size_t>(s)].logits_ready)
      sample_slot(s, events, live, next);
  if (!live.empty()) {
    const auto t0 = Clock::now();
    const auto rows = detail::decode_rows(model_, cache_, live, next).to_floats();
    for (std::size_t i = 0; i < live.size(); ++i) {
      std::copy(rows.begin() + static_cast<std::ptrdiff_t>(i) * V, rows.begin() + static_cast<std::ptrdiff_t>(i + 1) * V,
                logits_.begin() + live[i] * V);
      slots_[static_cast<std::size_t>(live[i])].logits_ready = true;
    }
    timings_.decode_tokens += static_cast<std::int64_t>(live.size());
    timings_.decode_seconds += since(t0);
  }
  // 4. The speculative slots' rounds: drafted one by one, scored together (1 + draft positions
  //    each, one step per feed length), settled one by one.
  std::vector<Round> rounds;
  for (std::int64_t s = 0; s < static_cast<std::int64_t>(slots_.size()); ++s) {
    if (!slots_[static_cast<std::size_t>(s)].used || !slots_[static_cast<std::size_t>(s)].has_pending) continue;
    Round r;
    if (plan_round(s, events, r)) rounds.push_back(std::move(r));
  }
  score_rounds(rounds);
  for (Round& r : rounds) settle_round(r, events);
  return events;
}

}  // namespace tfm
