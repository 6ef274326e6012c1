// Generator and Translator: prompts in, text out, over a KV cache (session.h).
#include "tfm/session.h"

#include <algorithm>
#include <optional>
#include <chrono>
#include <cmath>

#include "decode_steps.h"
#include "kernels/gemm_rows.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::int64_t context_for(const ModelConfig& c, std::int64_t asked) {
  TFM_CHECK(asked >= 0, "session", "ctx_size must be >= 0 (0: the model's ", c.max_positions, "), got ", asked);
  if (asked == 0) return c.max_positions;
  TFM_CHECK(c.position != PositionKind::learned || asked <= c.max_positions, "session", "ctx_size ", asked,
            " exceeds the model's learned position table of ", c.max_positions, " positions");
  return asked;
}

void check_options(const GenerateOptions& o) {
  TFM_CHECK(o.max_new_tokens >= 0, "generate", "max_new_tokens must be >= 0, got ", o.max_new_tokens);
  for (const auto& s : o.stop) TFM_CHECK(!s.empty(), "generate", "stop strings must not be empty");
}

// Length of the longest end of `text` that begins some stop string: streaming holds it back
// until it is known whether the stop string completes (then it is cut, never shown).
std::size_t partial_stop_suffix(const std::string& text, const std::vector<std::string>& stops) {
  std::size_t held = 0;
  for (const auto& s : stops)
    for (std::size_t n = std::min(s.size() - 1, text.size()); n > held; --n)
      if (text.compare(text.size() - n, n, s, 0, n) == 0) {
        held = n;
        break;
      }
  return held;
}

}  // namespace

namespace detail {

Tensor ids_tensor(const std::vector<std::int32_t>& ids) {
  std::vector<std::int64_t> v(ids.begin(), ids.end());
  return Tensor::from_ints(v, {1, static_cast<std::int64_t>(v.size())});
}

Tensor decode_rows(Model& model, KVCache& cache, const std::vector<std::int64_t>& slots,
                   const std::vector<std::int32_t>& tokens) {
  std::vector<Tensor> parts;
  const auto R = static_cast<std::int64_t>(slots.size());
  for (std::int64_t r0 = 0; r0 < R; r0 += kernels::kRowInvariantMaxRows) {
    const std::int64_t r1 = std::min(R, r0 + kernels::kRowInvariantMaxRows);
    const std::vector<std::int64_t> s(slots.begin() + r0, slots.begin() + r1);
    const std::vector<std::int64_t> t(tokens.begin() + r0, tokens.begin() + r1);
    parts.push_back(model.decode_cached(Tensor::from_ints(t, {r1 - r0, 1}), s, cache));
  }
  return parts.size() == 1 ? parts[0] : tfm::concat(parts, 0);
}

std::vector<std::int32_t> encode_prompt_checked(const Tokenizer& tok, std::string_view prompt, std::int64_t capacity) {
  TFM_CHECK(!prompt.empty(), "generate", "the prompt is empty");
  std::vector<std::int32_t> ids = tok.encode(prompt);
  TFM_CHECK(!ids.empty(), "generate", "the prompt encodes to no tokens");
  TFM_CHECK(static_cast<std::int64_t>(ids.size()) < capacity, "generate", "the prompt is ", ids.size(),
            " tokens; the context holds ", capacity, " (raise --ctx-size or shorten the prompt)");
  return ids;
}

bool is_end_token(std::int32_t tok, std::int32_t tokenizer_eos, const GenerateOptions& o) {
  if (!o.stop_at_eos) return false;
  return tok == tokenizer_eos || std::find(o.eos_ids.begin(), o.eos_ids.end(), tok) != o.eos_ids.end();
}

std::string advance_text(const Tokenizer& tok, const std::vector<std::string>& stops, GenerateResult& out,
                         std::size_t& emitted, bool* stopped) {
  // Text so far; stop strings cut it, streaming emits whole characters only.
  std::string text = tok.decode(out.tokens, true);
  *stopped = false;
  for (const auto& s : stops) {
    const auto at = text.find(s);
    if (at != std::string::npos) {
      text.resize(at);
      *stopped = true;
    }
  }
  std::size_t ready = *stopped ? text.size() : complete_utf8_prefix(text);
  if (!*stopped) ready = std::min(ready, text.size() - partial_stop_suffix(text, stops));
  std::string piece = ready > emitted ? text.substr(emitted, ready - emitted) : std::string();
  emitted = std::max(emitted, ready);
  out.text = std::move(text);
  return piece;
}

}  // namespace detail

using detail::decode_rows;
using detail::ids_tensor;

void Timings::add(const Timings& o) {
  prefill_tokens += o.prefill_tokens;
  decode_tokens += o.decode_tokens;
  prefill_seconds += o.prefill_seconds;
  decode_seconds += o.decode_seconds;
}

std::size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte; keep it only when its
  // sequence is complete.
  std::size_t i = s.size(), back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return back == 0 ? 0 : s.size();  // only continuation bytes: not ours to judge
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  const std::size_t need = lead < 0x80 ? 1 : (lead >> 5) == 6 ? 2 : (lead >> 4) == 14 ? 3 : (lead >> 3) == 30 ? 4 : 1;
  return back + 1 >= need ? s.size() : i - 1;
}

// ---- CacheStepper --------------------------------------------------------------------------

std::int64_t CacheStepper::vocab_size() const { return model_.config().vocab_size; }

Tensor CacheStepper::step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) {
  TFM_CHECK(parents.size() == tokens.size() && !parents.empty(), "beam", "step needs one parent per token");
  cache_.reorder(parents);
  std::vector<std::int64_t> slots(parents.size());
  for (std::size_t r = 0; r < slots.size(); ++r) slots[r] = static_cast<std::int64_t>(r);
  return decode_rows(model_, cache_, slots, tokens);
}

// ---- Generator ----------------------------------------------------------------------------

namespace {
// Checked before the cache is built, so a wrong model gets this error rather than the cache's.
const ModelConfig& lm_config(const Model& model) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, "generate",
            "needs a decoder-only language model; this one is ", to_string(c.architecture),
            c.architecture == Architecture::encoder_decoder ? " (use tfm translate)" : "");
  return c;
}
}  // namespace

Generator::Generator(Model& model, const Tokenizer& tok, SessionOptions opt)
    : model_(model), tok_(tok),
      cache_(lm_config(model), std::max<std::int64_t>(opt.max_batch, 1), context_for(model.config(), opt.ctx_size), 0, 0,
             opt.cache_type) {
  model_.set_training(false);
}

std::vector<std::int32_t> Generator::encode_prompt(std::string_view prompt) const {
  return detail::encode_prompt_checked(tok_, prompt, cache_.capacity());
}

std::string Generator::decode(const std::vector<std::int32_t>& tokens) const { return tok_.decode(tokens, true); }

GenerateResult Generator::generate(std::string_view prompt, const GenerateOptions& o,
                                   const std::function<void(std::string_view)>& on_text) {
  return run({encode_prompt(prompt)}, o, on_text)[0];
}

std::vector<GenerateResult> Generator::generate_batch(const std::vector<std::string>& prompts, const GenerateOptions& o) {
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& p : prompts) ids.push_back(encode_prompt(p));
  std::vector<GenerateResult> out;
  for (std::size_t first = 0; first < ids.size(); first += static_cast<std::size_t>(cache_.slots())) {
    const std::size_t last = std::min(ids.size(), first + static_cast<std::size_t>(cache_.slots()));
    const std::vector<std::vector<std::int32_t>> chunk(ids.begin() + static_cast<std::ptrdiff_t>(first),
                                                       ids.begin() + static_cast<std::ptrdiff_t>(last));
    for (auto& r : run(chunk, o, {})) out.push_back(std::move(r));
  }
  return out;
}

std::vector<GenerateResult> Generator::run(const std::vector<std::vector<std::int32_t>>& prompts,
                                           const GenerateOptions& o,
                                           const std::function<void(std::string_view)>& on_text) {
  check_options(o);
  const Sampler sampler(o.sampling);
  const auto R = static_cast<std::int64_t>(prompts.size());
  TFM_CHECK(R >= 1 && R <= cache_.slots(), "generate", R, " prompts for ", cache_.slots(), " cache slots");
  const std::int32_t eos = o.stop_at_eos ? tok_.eos_id() : -1;
  std::vector<GenerateResult> res(static_cast<std::size_t>(R));
  std::vector<std::vector<std::int32_t>> history(prompts);
  std::vector<std::size_t> emitted(static_cast<std::size_t>(R), 0);  // bytes of text already streamed
  const std::int64_t V = model_.config().vocab_size;
  std::vector<float> logits(static_cast<std::size_t>(R * V));
  std::vector<std::optional<detail::Constraint>> constraints(static_cast<std::size_t>(R));
  if (o.grammar) {
    const auto vocab = detail::grammar_vocabulary(tok_, V, grammar_vocab_);
    for (auto& c : constraints) c.emplace(*o.grammar, vocab, tok_.eos_id(), o);
  }

  // Prefill each prompt alone (its own slot), so its numbers never depend on the others.
  auto t0 = Clock::now();
  for (std::int64_t r = 0; r < R; ++r) {
    cache_.reset(r);
    res[static_cast<std::size_t>(r)].prompt_tokens = prompts[static_cast<std::size_t>(r)];
    const auto row = model_.decode_cached(ids_tensor(prompts[static_cast<std::size_t>(r)]), {r}, cache_).to_floats();
    std::copy(row.begin(), row.end(), logits.begin() + r * V);
    timings_.prefill_tokens += static_cast<std::int64_t>(prompts[static_cast<std::size_t>(r)].size());
  }
  timings_.prefill_seconds += since(t0);

  std::vector<std::int64_t> live;
  for (std::int64_t r = 0; r < R; ++r) live.push_back(r);
  double shift_seconds = 0;  // context re-reads inside the loop count as prefill, not decode
  t0 = Clock::now();
  for (std::int64_t step = 0; !live.empty(); ++step) {
    std::vector<std::int64_t> next_live, shifted;
    std::vector<std::int32_t> next_tokens;
    for (const std::int64_t r : live) {
      auto& out = res[static_cast<std::size_t>(r)];
      auto& hist = history[static_cast<std::size_t>(r)];
      if (step >= o.max_new_tokens) {
        out.stop_reason = "length";
        continue;
      }
      const std::span<const float> row(logits.data() + r * V, static_cast<std::size_t>(V));
      const TokenMask* mask = nullptr;
      auto& constraint = constraints[static_cast<std::size_t>(r)];
      if (constraint) {
        // Tokens left, this one included (a context shift makes room, so only the budget counts).
        std::int64_t left = o.max_new_tokens - step;
        if (!o.context_shift) left = std::min(left, cache_.capacity() - cache_.length(r) + 1);
        bool stop = false;
        mask = constraint->allowed(left, &stop);
        if (stop) {
          out.stop_reason = constraint->stop_reason();
          continue;
        }
      }
      const std::int32_t tok = sampler.sample(row, hist, 0, static_cast<std::uint64_t>(step), mask);
      if (tok == eos || detail::is_end_token(tok, eos, o)) {
        out.stop_reason = "eos";
        continue;
      }
      if (constraint) constraint->accept(tok);
      out.tokens.push_back(tok);
      hist.push_back(tok);
      bool stopped = false;
      const std::string piece = detail::advance_text(tok_, o.stop, out, emitted[static_cast<std::size_t>(r)], &stopped);
      if (on_text && !piece.empty()) on_text(piece);
      if (stopped) {
        out.stop_reason = "stop";
        continue;
      }
      if (cache_.length(r) >= cache_.capacity()) {
        if (!o.context_shift || cache_.capacity() < 2) {
          out.stop_reason = "context";
          continue;
        }
        // Keep the last half (this token included) and re-read it from position 0, alone,
        // so the row's numbers still do not depend on its neighbours.
        const auto keep = static_cast<std::ptrdiff_t>(cache_.capacity() / 2);
        const std::vector<std::int32_t> tail(hist.end() - keep, hist.end());
        cache_.reset(r);
        const auto t1 = Clock::now();
        const auto shifted_row = model_.decode_cached(ids_tensor(tail), {r}, cache_).to_floats();
        std::copy(shifted_row.begin(), shifted_row.end(), logits.begin() + r * V);
        timings_.prefill_tokens += static_cast<std::int64_t>(keep);
        timings_.prefill_seconds += since(t1);
        shift_seconds += since(t1);
        ++out.context_shifts;
        shifted.push_back(r);
        continue;  // this row's next logits are ready; it rejoins the batch next step
      }
      next_live.push_back(r);
      next_tokens.push_back(tok);
    }
    if (!next_live.empty()) {
      const auto rows = decode_rows(model_, cache_, next_live, next_tokens).to_floats();
      for (std::size_t i = 0; i < next_live.size(); ++i)
        std::copy(rows.begin() + static_cast<std::ptrdiff_t>(i) * V, rows.begin() + static_cast<std::ptrdiff_t>(i + 1) * V,
                  logits.begin() + next_live[i] * V);
      timings_.decode_tokens += static_cast<std::int64_t>(next_live.size());
    }
    live = next_live;
    live.insert(live.end(), shifted.begin(), shifted.end());
    std::sort(live.begin(), live.end());
  }
  timings_.decode_seconds += since(t0) - shift_seconds;
  for (std::int64_t r = 0; r < R; ++r) {  // flush what streaming held back (a cut character)
    auto& out = res[static_cast<std::size_t>(r)];
    if (on_text && out.text.size() > emitted[static_cast<std::size_t>(r)])
      on_text(std::string_view(out.text).substr(emitted[static_cast<std::size_t>(r)]));
  }
  return res;
}

std::vector<Hypothesis> Generator::beam(std::string_view prompt, const BeamOptions& o) {
  const auto ids = encode_prompt(prompt);
  TFM_CHECK(o.beam_size <= cache_.slots(), "beam", "beam size ", o.beam_size, " needs that many cache slots; the session has ",
            cache_.slots());
  BeamOptions b = o;
  b.max_new_tokens = std::min<std::int64_t>(o.max_new_tokens, cache_.capacity() - static_cast<std::int64_t>(ids.size()));
  if (b.eos_id < 0) b.eos_id = tok_.eos_id();
  auto t0 = Clock::now();
  cache_.reset(0);
  const auto first = model_.decode_cached(ids_tensor(ids), {0}, cache_).to_floats();
  timings_.prefill_tokens += static_cast<std::int64_t>(ids.size());
  timings_.prefill_seconds += since(t0);
  t0 = Clock::now();
  CacheStepper stepper(model_, cache_);
  auto hyps = beam_search(stepper, first, b);
  timings_.decode_seconds += since(t0);
  for (const auto& h : hyps) timings_.decode_tokens += static_cast<std::int64_t>(h.tokens.size());
  return hyps;
}

// ---- Translator ---------------------------------------------------------------------------

Translator::Translator(Model& model, const Tokenizer& tok, SessionOptions opt)
    : model_(model), tok_(tok),
      cache_(model.config(), std::max<std::int64_t>(opt.max_batch, 1), context_for(model.config(), opt.ctx_size),
             std::max<std::int64_t>(opt.max_batch, 1),
             opt.max_source > 0 ? opt.max_source : model.config().max_positions, opt.cache_type) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.architecture == Architecture::encoder_decoder && c.head == HeadKind::lm, "translate",
            "needs an encoder-decoder model; this one is ", to_string(c.architecture),
            c.architecture == Architecture::decoder_only ? " (use tfm generate)" : "");
  start_id_ = opt.decoder_start_id >= 0 ? static_cast<std::int32_t>(opt.decoder_start_id)
              : tok.bos_id() >= 0      ? tok.bos_id()
                                       : static_cast<std::int32_t>(c.decoder_start_token_id);
  model_.set_training(false);
}

std::vector<std::int32_t> Translator::encode_source(std::string_view text) const {
  TFM_CHECK(!text.empty(), "translate", "the source sentence is empty");
  std::vector<std::int32_t> ids = tok_.encode(text);
  if (tok_.eos_id() >= 0) ids.push_back(tok_.eos_id());
  TFM_CHECK(static_cast<std::int64_t>(ids.size()) <= cache_.source_capacity(), "translate", "the source is ", ids.size(),
            " tokens; the model takes at most ", cache_.source_capacity());
  return ids;
}

std::vector<TranslateResult> Translator::translate(const std::vector<std::string>& sources, const BeamOptions& o) {
  std::vector<std::vector<std::int32_t>> ids;
  for (const auto& s : sources) ids.push_back(encode_source(s));
  return translate_ids(ids, o);
}

std::vector<TranslateResult> Translator::translate_ids(const std::vector<std::vector<std::int32_t>>& sources,
                                                       const BeamOptions& o) {
  return run(sources.size(), o, [&](std::size_t i, std::int64_t slot) {
    model_.encode_to_cache(ids_tensor(sources[i]), cache_, slot);
    return static_cast<std::int64_t>(sources[i].size());
  });
}

std::vector<TranslateResult> Translator::translate_fused(const std::vector<std::vector<std::vector<std::int32_t>>>& examples,
                                                         const BeamOptions& o) {
  for (const auto& parts : examples) {
    TFM_CHECK(!parts.empty(), "translate", "an example with no parts to encode");
    std::int64_t total = 0;
    for (const auto& p : parts) total += static_cast<std::int64_t>(p.size());
    TFM_CHECK(total <= cache_.source_capacity(), "translate", "the parts hold ", total,
              " tokens together; the session's sources hold at most ", cache_.source_capacity(), " (SessionOptions::max_source)");
  }
  return run(examples.size(), o, [&](std::size_t i, std::int64_t slot) {
    std::vector<Tensor> parts;
    std::int64_t tokens = 0;
    for (const auto& p : examples[i]) {
      parts.push_back(ids_tensor(p));
      tokens += static_cast<std::int64_t>(p.size());
    }
    model_.encode_parts_to_cache(parts, cache_, slot);
    return tokens;
  });
}

std::vector<TranslateResult> Translator::run(std::size_t count, const BeamOptions& o,
                                             const std::function<std::int64_t(std::size_t, std::int64_t)>& encode) {
  TFM_CHECK(o.beam_size >= 1 && o.beam_size <= cache_.slots(), "translate", "beam size ", o.beam_size,
            " needs that many cache slots; the session has ", cache_.slots());
  BeamOptions b = o;
  b.max_new_tokens = std::min<std::int64_t>(o.max_new_tokens, cache_.capacity() - 1);
  if (b.eos_id < 0) b.eos_id = tok_.eos_id();
  std::vector<TranslateResult> out(count);
  // The text leaves out the end token (a generation_config end id may be an ordinary token).
  auto finish = [&](TranslateResult& t) {
    for (const auto& h : t.hypotheses) {
      const bool ended = !h.tokens.empty() && b.ends_on(h.tokens.back());
      const std::vector<std::int32_t> text(h.tokens.begin(), h.tokens.end() - (ended ? 1 : 0));
      t.texts.push_back(tok_.decode(text, true));
    }
  };
  const std::int64_t S = cache_.slots();
  for (std::size_t first = 0; first < count; first += static_cast<std::size_t>(b.beam_size == 1 ? S : 1)) {
    const std::size_t n = b.beam_size == 1 ? std::min<std::size_t>(static_cast<std::size_t>(S), count - first) : 1;
    // Encode each source alone into its own cache source, then start its decoder with <bos>.
    auto t0 = Clock::now();
    std::vector<float> logits;
    for (std::size_t i = 0; i < n; ++i) {
      const auto si = static_cast<std::int64_t>(i);
      timings_.prefill_tokens += encode(first + i, si);
      cache_.reset(si);
      cache_.bind_source(si, si);
      const auto row = model_.decode_cached(ids_tensor({start_id_}), {si}, cache_).to_floats();
      logits.insert(logits.end(), row.begin(), row.end());
    }
    timings_.prefill_seconds += since(t0);
    t0 = Clock::now();
    if (b.beam_size > 1 || b.n_best > 1) {
      CacheStepper stepper(model_, cache_);
      out[first].hypotheses = beam_search(stepper, logits, b);
      for (const auto& h : out[first].hypotheses) timings_.decode_tokens += static_cast<std::int64_t>(h.tokens.size());
      finish(out[first]);
    } else {
      // Greedy over the n sentences together.
      const std::int64_t V = model_.config().vocab_size;
      std::vector<Hypothesis> hyp(n);
      std::vector<std::int64_t> live;
      for (std::size_t i = 0; i < n; ++i) live.push_back(static_cast<std::int64_t>(i));
      for (std::int64_t step = 0; step < b.max_new_tokens && !live.empty(); ++step) {
        std::vector<std::int64_t> next_live;
        std::vector<std::int32_t> next_tokens;
        for (std::size_t j = 0; j < live.size(); ++j) {
          const float* row = logits.data() + static_cast<std::ptrdiff_t>(j) * V;
          const auto best = static_cast<std::int32_t>(std::max_element(row, row + V) - row);
          // log-probability of the choice, for the score
          double mx = row[best], z = 0;
          for (std::int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
          auto& h = hyp[static_cast<std::size_t>(live[j])];
          h.log_prob += -std::log(z);
          h.tokens.push_back(best);
          if (b.ends_on(best)) continue;
          next_live.push_back(live[j]);
          next_tokens.push_back(best);
        }
        live = next_live;
        if (live.empty()) break;
        logits = decode_rows(model_, cache_, live, next_tokens).to_floats();
        timings_.decode_tokens += static_cast<std::int64_t>(live.size());
      }
      for (std::size_t i = 0; i < n; ++i) {
        hyp[i].score = hyp[i].log_prob;
        out[first + i].hypotheses = {hyp[i]};
        finish(out[first + i]);
      }
    }
    timings_.decode_seconds += since(t0);
  }
  return out;
}

}  // namespace tfm
