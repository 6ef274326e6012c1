// Scaled dot-product attention: GQA/MQA, causal / padding / sliding-window masks, additive
// bias (ALiBi, T5 buckets), ALiBi slopes computed on the fly, and dropout on the weights.
//
//   q (B, Hq, Tq, D), k and v (B, Hkv, Tk, D), Hq % Hkv == 0 (query head h reads kv head
//   h / (Hq/Hkv)).  Returns out (B, Hq, Tq, D) = softmax(q k^T * scale + bias + mask) v.
//
//   AttentionOptions o;  o.causal = true;
//   Tensor y = scaled_dot_product_attention(q, k, v, o);   // fused kernel, O(T) memory
//
// Masks combine. Queries are aligned to the END of the keys (i' = i + Tk - Tq) so the same
// call serves a KV cache: causal lets query i see keys j <= i'; a window of width w keeps
// |i' - j| < w (with causal: the w most recent keys, Mistral-style); valid_lens (B) or (B, Tq) hides keys j >= valid_len. A row that sees no
// key gives zeros (and zero gradients), never NaN.
// Differentiable w.r.t. q, k, v and bias (the bias gradient is summed over broadcast dims).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

// A sparse pattern (Longformer, Beltagy et al. 2020; BigBird, Zaheer et al. 2020) on top of
// the window: key j is visible to query i (i' = i + Tk - Tq) when causal / padding allow it
// AND (|i' - j| < window, or i' or j is a global position, or j's block is one of the random
// key blocks of i''s block). The fused path visits only the key blocks that holds; the plain
// path stores only the allowed weights. A pattern with window 0 is dense (every key is local).
// docs/sparse_attention.md gives the exact definition and the random generator.
struct SparseAttentionPattern {
  std::vector<std::int64_t> global_tokens;  // key-axis positions in [0, Tk); any order, repeats ignored
  std::int64_t random_blocks = 0;           // BigBird: random key blocks per query block, per head
  std::int64_t block_size = 64;             // tokens per random block (query and key blocks alike)
  std::uint64_t seed = 0;                   // blocks are a pure function of (seed, head, query block)
  bool active() const { return !global_tokens.empty() || random_blocks > 0; }
};

struct AttentionOptions {
  std::optional<float> scale;  // default 1/sqrt(D)
  bool causal = false;
  Tensor valid_lens;           // undefined, (B) or (B, Tq): integer (or whole-number f32) lengths
  std::int64_t window = 0;     // sliding window width; 0 = none
  Tensor bias;                 // f32, broadcastable to (B, Hq, Tq, Tk); may require grad
  Tensor alibi_slopes;         // f32 (Hq): adds -slope[h] * |i' - j|; see alibi_slopes()
  float dropout_p = 0.0f;      // on the attention weights, in [0, 1); 0 at inference
  std::uint64_t dropout_seed = 0;  // element (b,h,i,j)'s decision is a pure function of it
  std::uint64_t dropout_batch_offset = 0;  // ... and of b + this (rows of a larger batch)
  // Tensor parallelism: these are heads [head_offset, head_offset + Hq) of heads_total (0: Hq);
  // dropout masks and a sparse pattern's random blocks are drawn for the model's head index.
  std::int64_t head_offset = 0, heads_total = 0;
  bool use_flash = true;       // false: the plain path (materialises the (B,Hq,Tq,Tk) weights,
                               // or with a sparse pattern only the allowed ones)
  SparseAttentionPattern sparse;  // needs Tq <= Tk
};

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

// The plain path, also returning the attention weights (B, Hq, Tq, Tk): softmax rows before
// dropout, zeros where masked. The weights are for inspection (not differentiable).
struct AttentionWithWeights {
  Tensor out, weights;
};
AttentionWithWeights scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                               const AttentionOptions& options = {});

// ALiBi slopes (n_heads) f32 (Press et al. 2022): 2^(-8h/n), h = 1..n, for n a power of two;
// otherwise the paper's interleaving of the two nearest powers of two.
Tensor alibi_slopes(std::int64_t n_heads);

}  // namespace tfm
