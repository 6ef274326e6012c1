// Running a trained model: text in, text out, with a KV cache.
//
//   LoadedModel lm = load_model_dir("runs/shakespeare");
//   Generator gen(lm.model, lm.tokenizer, {.ctx_size = 256});
//   GenerateOptions o;  o.max_new_tokens = 200;  o.sampling.temperature = 0.8;
//   GenerateResult r = gen.generate("ROMEO:", o, [](std::string_view piece) { std::cout << piece; });
//
//   Translator tr(lm.model, lm.tokenizer, {});
//   auto best = tr.translate({"I like tea."}, beam_options)[0][0].text;
//
// Batching: generate_batch / translate feed many sequences together (one cache slot each).
// A sequence's output is bit-identical whatever else is in the batch and whatever its size:
// prompts are prefilled one at a time, decode steps use row-independent kernels, and each
// sequence draws its own random numbers (seed, draw index) — see docs/inference.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/generate.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/tokenizer.h"

namespace tfm {

struct SessionOptions {
  std::int64_t ctx_size = 0;    // positions per sequence (prompt + generated); 0: the model's max_positions
  std::int64_t max_batch = 1;   // sequences decoded together (cache slots)
  std::int64_t max_source = 0;  // encoder-decoder: source tokens per sentence; 0: max_positions
  // Encoder-decoder: the first decoder token; < 0: the tokenizer's <bos>, else the config's
  // decoder_start_token_id (hub directories give it in generation_config.json).
  std::int64_t decoder_start_id = -1;
  DType cache_type = DType::f32;  // self-attention KV cache: f32, f16 or q8_0 (kv_cache.h)
};

struct GenerateOptions {
  std::int64_t max_new_tokens = 128;
  SamplingOptions sampling;           // temperature <= 0: greedy
  std::vector<std::string> stop;      // stop strings: generation ends before the first one
  bool stop_at_eos = true;            // the tokenizer's <eos> (when it has one) ends generation
  std::vector<std::int32_t> eos_ids;  // more ids that end it when stop_at_eos (generation_config.json)
  // When a sequence fills the context: keep its last half and go on (llama.cpp's context
  // shift; the kept tokens are re-read at positions 0..), or stop with reason "context".
  bool context_shift = true;
  // Constrained decoding (docs/structured_output.md): every token keeps the text a prefix of
  // the grammar's language, an end token comes only once it is complete, and a complete text
  // that cannot go on ends generation (reason "stop"). Under max_new_tokens the text is
  // steered to finish in time.
  std::shared_ptr<const Grammar> grammar;
  // With a grammar: the text is free until this text first appears, and the grammar applies
  // from there on, the trigger being the start of its sentence (an "auto" tool choice: the
  // model may answer in words or begin a call). Empty: the grammar applies from the start.
  std::string grammar_trigger;
};

struct GenerateResult {
  std::vector<std::int32_t> prompt_tokens;
  std::vector<std::int32_t> tokens;   // generated (a stop string's tokens included, EOS not)
  std::string text;                   // generated text, cut before a stop string
  // "eos" | "stop" | "length" | "context" (full, no shift) | "grammar" (the grammar needs a
  // byte no token of the vocabulary can give)
  std::string stop_reason;
  std::int64_t context_shifts = 0;    // times the context was shifted
  std::int64_t cached_tokens = 0;     // prompt tokens whose keys/values came from the prompt cache
};

struct Timings {
  std::int64_t prefill_tokens = 0, decode_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  void add(const Timings& o);
};

// Speculative decoding (Generator::generate_speculative): drafts of a few tokens, from a
// smaller model with the same vocabulary or from the text itself (prompt lookup), checked by
// the model in one step. Greedy output is plain greedy decoding's; sampled output is
// distributed as plain sampling (the standard acceptance rule: keep a draft token with
// probability min(1, p/q), else draw from the normalised max(0, p - q)).
struct SpeculativeOptions {
  Model* draft = nullptr;        // a draft model with the same vocabulary (null: prompt lookup)
  std::int64_t max_draft = 8;    // the draft length adapts within 1..max_draft
  std::int64_t ngram = 3;        // prompt lookup: the longest n-gram matched (then shorter ones)
};
struct SpeculativeStats {
  std::int64_t rounds = 0, drafted = 0, accepted = 0;
  std::int64_t steps = 0;  // the model's steps that scored them (several rounds share one in a batch)
};

// Decoder-only language models.
class Generator {
 public:
  Generator(Model& model, const Tokenizer& tok, SessionOptions opt = {});
  const KVCache& cache() const { return cache_; }
  std::int64_t context_size() const { return cache_.capacity(); }
  // Tokens of a prompt, checked: non-empty, fits the context (the error names both sizes).
  std::vector<std::int32_t> encode_prompt(std::string_view prompt) const;
  // One prompt; on_text receives the generated text piece by piece (whole UTF-8 characters).
  GenerateResult generate(std::string_view prompt, const GenerateOptions& o,
                          const std::function<void(std::string_view)>& on_text = {});
  // Many prompts at once (any number: decoded max_batch at a time).
  std::vector<GenerateResult> generate_batch(const std::vector<std::string>& prompts, const GenerateOptions& o);
  // One prompt, speculatively (SpeculativeOptions above); no grammar, and a full context ends
  // the text (reason "context") rather than shifting it.
  GenerateResult generate_speculative(std::string_view prompt, const GenerateOptions& o, const SpeculativeOptions& s,
                                      const std::function<void(std::string_view)>& on_text = {},
                                      SpeculativeStats* stats = nullptr);
  // Beam search continuation of one prompt: n-best texts.
  std::vector<Hypothesis> beam(std::string_view prompt, const BeamOptions& o);
  std::string decode(const std::vector<std::int32_t>& tokens) const;
  const Timings& timings() const { return timings_; }

 private:
  std::vector<GenerateResult> run(const std::vector<std::vector<std::int32_t>>& prompts, const GenerateOptions& o,
                                  const std::function<void(std::string_view)>& on_text);
  Model& model_;
  const Tokenizer& tok_;
  KVCache cache_;
  Timings timings_;
  std::shared_ptr<const TokenTrie> grammar_vocab_;  // built at the first grammar
};

struct TranslateResult {
  std::vector<Hypothesis> hypotheses;  // n-best, best first
  std::vector<std::string> texts;      // their decoded text (special tokens skipped)
};

// Encoder-decoder models (source sentence -> target sentence).
class Translator {
 public:
  Translator(Model& model, const Tokenizer& tok, SessionOptions opt = {});
  const KVCache& cache() const { return cache_; }
  // Source tokens as training made them (text tokens then <eos>), checked against max_source.
  std::vector<std::int32_t> encode_source(std::string_view text) const;
  // beam_size 1: greedy, batched over the sources; otherwise beam search per sentence.
  std::vector<TranslateResult> translate(const std::vector<std::string>& sources, const BeamOptions& o);
  std::vector<TranslateResult> translate_ids(const std::vector<std::vector<std::int32_t>>& sources, const BeamOptions& o);
  // Fusion-in-Decoder: each example's parts (e.g. the question with each retrieved passage) encoded
  // apart and read together by the decoder (Model::encode_parts_to_cache); their tokens together
  // must fit SessionOptions::max_source.
  std::vector<TranslateResult> translate_fused(const std::vector<std::vector<std::vector<std::int32_t>>>& examples,
                                               const BeamOptions& o);
  const Timings& timings() const { return timings_; }

 private:
  // Decodes `count` examples; encode(i, slot) puts example i's encoder output into cache source
  // `slot` and returns its token count.
  std::vector<TranslateResult> run(std::size_t count, const BeamOptions& o,
                                   const std::function<std::int64_t(std::size_t, std::int64_t)>& encode);
  Model& model_;
  const Tokenizer& tok_;
  KVCache cache_;
  std::int32_t start_id_;
  Timings timings_;
};

// The cache-backed DecodeStepper beam search drives: rows are cache slots 0..R-1.
class CacheStepper : public DecodeStepper {
 public:
  CacheStepper(Model& model, KVCache& cache) : model_(model), cache_(cache) {}
  std::int64_t vocab_size() const override;
  Tensor step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) override;

 private:
  Model& model_;
  KVCache& cache_;
};

// What each token adds to a text, as bytes (for grammars): "" for special tokens. Tokens that
// decode differently at the start of a text (SentencePiece's leading space) are taken as they
// decode after another token; byte-fallback tokens (<0x41>) are their byte.
std::vector<std::string> token_bytes(const Tokenizer& tok);

// Longest prefix of `text` that ends on a whole UTF-8 character (streaming byte-level BPE
// output can stop inside one).
std::size_t complete_utf8_prefix(std::string_view text);

}  // namespace tfm
