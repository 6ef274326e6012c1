// The pieces of one decoding step that Generator (session.cpp) and ContinuousBatch
// (continuous_batch.cpp) share, so both run the same inference path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/grammar.h"
#include "tfm/kv_cache.h"
#include "tfm/model.h"
#include "tfm/session.h"
#include "tfm/tokenizer.h"

namespace tfm::detail {

// Next-token logits (R, V) of cache slots `slots` after appending tokens[r] to each, in chunks
// of at most the row-invariant GEMM's row count (batch invariance: a row's numbers never
// depend on which rows are decoded beside it).
Tensor decode_rows(Model& model, KVCache& cache, const std::vector<std::int64_t>& slots,
                   const std::vector<std::int32_t>& tokens);

// The prompt's ids, refused when empty, when it encodes to nothing or when it does not fit a
// context of `capacity` positions with room for one generated token.
std::vector<std::int32_t> encode_prompt_checked(const Tokenizer& tok, std::string_view prompt, std::int64_t capacity);

// A token id list as a (1, T) integer tensor.
Tensor ids_tensor(const std::vector<std::int32_t>& ids);

// True when `tok` ends generation under `o` (the tokenizer's <eos> or one of o.eos_ids).
bool is_end_token(std::int32_t tok, std::int32_t tokenizer_eos, const GenerateOptions& o);

// After out.tokens gained a token: out.text becomes the text so far, cut before the first
// stop string of `stops` that appeared (then *stopped is set). Returns the piece of it that is
// safe to stream now (whole UTF-8 characters, nothing that may begin a stop string) beyond the
// `emitted` bytes already streamed, and advances `emitted`.
std::string advance_text(const Tokenizer& tok, const std::vector<std::string>& stops, GenerateResult& out,
                         std::size_t& emitted, bool* stopped);

// Constrained decoding of one sequence (GenerateOptions::grammar).
class Constraint {
 public:
  Constraint(const Grammar& g, std::shared_ptr<const TokenTrie> vocab, std::int32_t tokenizer_eos, const GenerateOptions& o);
  // The tokens allowed next (the end tokens once the text is complete); nullptr with *stop
  // false while a trigger has not appeared (any token), with *stop true when no token may come
  // and the sequence ends with stop_reason().
  const TokenMask* allowed(std::int64_t tokens_left, bool* stop);
  const char* stop_reason() const { return !dead_ && m_.accepting() ? "stop" : "grammar"; }
  void accept(std::int32_t tok);

 private:
  GrammarMatcher m_;
  std::vector<std::int32_t> ends_;
  TokenMask mask_;
  std::shared_ptr<const TokenTrie> vocab_;
  std::string trigger_, text_;  // before the trigger: the text so far
  bool active_ = true;
  bool dead_ = false;  // the token that held the trigger went on where the grammar cannot
};

// The model's vocabulary (V logits) as a trie for grammars, built on first use into `cache`.
std::shared_ptr<const TokenTrie> grammar_vocabulary(const Tokenizer& tok, std::int64_t V, std::shared_ptr<const TokenTrie>& cache);

}  // namespace tfm::detail
