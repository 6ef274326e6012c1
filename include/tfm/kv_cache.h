// KV cache: the keys and values of every decoder layer for the tokens a sequence has seen, so
// a decode step projects only the new token and attends over the cache — O(T) per token
// instead of recomputing O(T²).
//
// Layout (one f32 buffer, allocated once, never grown):
//   self  [slots, layers, 2, kv_heads, max_T, head_dim]   2 = (keys, values)
//   cross [sources, layers, 2, kv_heads, max_S, head_dim] encoder-decoder only
// A slot holds one sequence (a prompt, a beam, a batch row), its layers contiguous so that
// copying a slot (beam search reordering) is one memcpy per layer of the used prefix. kv_heads
// is the model's KV head count, so GQA/MQA models store only what they need. The cross-attention
// keys/values of a source sentence are computed once (Model::encode_to_cache) and shared by
// every slot bound to that source (all beams of one sentence).
//
// Cache types (llama.cpp's -ctk/-ctv): the self-attention keys/values may be stored as f32
// (default), f16 or q8_0 (blocks of 32 along head_dim; head_dim must be a multiple of 32).
// store() rounds each new key/value row to the type once, load() widens the used prefix to
// f32 for the attention kernel; both work row by row, so a sequence's results stay
// independent of the others in the batch. Cross-attention keys/values stay f32.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "tfm/model_config.h"
#include "tfm/tensor.h"

namespace tfm {

class KVCache {
 public:
  // slots sequences of at most max_T positions; encoder-decoder: sources of at most max_S tokens.
  KVCache(const ModelConfig& cfg, std::int64_t slots, std::int64_t max_T, std::int64_t sources = 0,
          std::int64_t max_S = 0, DType type = DType::f32);
  // Bytes such a cache holds, without allocating it (the memory planner).
  static std::int64_t bytes_needed(const ModelConfig& cfg, std::int64_t slots, std::int64_t max_T,
                                   std::int64_t sources = 0, std::int64_t max_S = 0, DType type = DType::f32);
  std::int64_t bytes() const;
  DType type() const { return type_; }  // of the self-attention keys/values

  std::int64_t slots() const { return slots_; }
  std::int64_t capacity() const { return max_T_; }      // positions per slot (--ctx-size)
  std::int64_t layers() const { return layers_; }
  std::int64_t length(std::int64_t slot) const;         // positions filled
  void set_length(std::int64_t slot, std::int64_t n);   // after appending n - length(slot) positions
  void reset(std::int64_t slot);                        // empty; the source binding stays
  // Beam reordering: slot r becomes a copy of old slot parents[r] for r < parents.size()
  // (every copy reads the old contents, so parents may repeat and permute).
  void reorder(const std::vector<std::int64_t>& parents);

  // Prefix tuning (peft.h): every slot gets P more positions in front, [0, P), that hold the
  // model's prefix keys/values (Model::decode_cached writes them when a slot starts empty);
  // length() and capacity() count tokens only. Reallocates (zeroed); every slot must be empty.
  std::int64_t prefix_positions() const { return prefix_; }
  void set_prefix_positions(std::int64_t P);

  // (1, kv_heads, P + max_T, head_dim) views of a slot's keys / values for one layer: the
  // prefix, then token t at position P + t; positions >= P + length(slot) are scratch.
  // f32 caches only.
  Tensor keys(std::int64_t slot, std::int64_t layer) const;
  Tensor values(std::int64_t slot, std::int64_t layer) const;
  // Any cache type: x (1, kv_heads, T, head_dim) f32 written at positions pos..pos+T-1 of
  // the slot's keys (kv 0) or values (kv 1); load gives positions 0..n-1 as f32 (a view
  // for f32 caches, a widened copy otherwise). Positions count the prefix's first: token t
  // is at prefix_positions() + t.
  void store(std::int64_t slot, std::int64_t layer, int kv, std::int64_t pos, const Tensor& x);
  Tensor load(std::int64_t slot, std::int64_t layer, int kv, std::int64_t n) const;

  // The stored rows of token positions [pos, pos + n) of a slot, every layer's keys and values,
  // in the cache's type (bytes_per_position() bytes a position): what the prompt cache keeps.
  // copy_in writes such rows back (into any slot of a cache of the same model and type).
  std::int64_t bytes_per_position() const { return layers_ * 2 * kv_heads_ * row_bytes_; }
  std::vector<unsigned char> copy_out(std::int64_t slot, std::int64_t pos, std::int64_t n) const;
  void copy_in(std::int64_t slot, std::int64_t pos, std::int64_t n, const std::vector<unsigned char>& rows);

  // Encoder-decoder: which source a slot reads, and the source's cross keys/values.
  std::int64_t sources() const { return sources_; }
  std::int64_t source_capacity() const { return max_S_; }
  void bind_source(std::int64_t slot, std::int64_t source);
  std::int64_t source_of(std::int64_t slot) const;
  std::int64_t source_length(std::int64_t source) const;
  void set_source_length(std::int64_t source, std::int64_t n);
  Tensor cross_keys(std::int64_t source, std::int64_t layer) const;    // (1, kv_heads, max_S, head_dim)
  Tensor cross_values(std::int64_t source, std::int64_t layer) const;

  // RETRO (Model::decode_cached): the tokens a slot has seen, and the neighbours' keys/values
  // of its completed chunks (for each chunked cross-attention layer: keys, values), each kept
  // with the tokens it was retrieved for, so a chunk rewritten after a roll-back is retrieved
  // again. Tokens past length() (a roll-back by set_length) are dropped at the slot's next
  // decode_cached; a cache filled by copy_in needs its tokens set here. reset() clears both;
  // reorder() copies them.
  struct RetroChunk {
    std::vector<std::int64_t> tokens;
    std::vector<Tensor> kv;
  };
  std::vector<std::int64_t>& retro_tokens(std::int64_t slot);
  std::map<std::int64_t, RetroChunk>& retro_chunks(std::int64_t slot);

 private:
  Tensor view(const Tensor& buf, std::int64_t outer, std::int64_t layer, std::int64_t kv, std::int64_t T) const;
  void check_slot(std::int64_t slot, const char* what) const;
  std::int64_t slots_, max_T_, sources_, max_S_, layers_, kv_heads_, head_dim_;
  DType type_ = DType::f32;
  std::int64_t row_bytes_ = 0;  // one position of one head in type_
  std::int64_t prefix_ = 0;     // prefix positions before each slot's tokens
  // self_: f32 (slots, layers, 2, H, P + max_T, D), else u8 (..., P + max_T, row_bytes)
  Tensor self_, cross_;
  std::vector<std::int64_t> length_, source_of_, source_length_;
  std::vector<std::vector<std::int64_t>> retro_tokens_;
  std::vector<std::map<std::int64_t, RetroChunk>> retro_chunks_;
};

}  // namespace tfm
