// Building blocks of every Transformer: Linear, Norm, FeedForward, Attention. Each holds
// handles to parameters owned by the model's name -> Tensor map, and is a plain function
// object (no virtual hierarchy): the model assembles them according to its ModelConfig.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "tfm/attention_map.h"
#include "tfm/model_config.h"
#include "tfm/ops/attention.h"
#include "tfm/ops/position.h"
#include "tfm/peft.h"
#include "tfm/tensor.h"

namespace tfm::nn {

// Sums a tensor in place over the ranks of a tensor-parallel model (every rank gets the same
// bits); null without tensor parallelism.
using RankSum = std::shared_ptr<const std::function<void(Tensor&)>>;

// Megatron-LM's two conjugate operators. The input of a block of column-parallel layers is
// whole on every rank, but each rank's gradient for it covers only its own heads or hidden
// units: fan_out is the identity forward and sums the gradient over the ranks backward.
// sum_partials sums a row-parallel layer's partial products forward and passes the gradient
// through backward. Both are the identity on x when sum is null.
Tensor fan_out(const Tensor& x, const RankSum& sum);
Tensor sum_partials(const Tensor& y, const RankSum& sum);

// A forward pass over rows [first, first + count) of a batch of `total` rows (a micro-batch
// split across data-parallel ranks): the masks are those rows' masks in the whole batch.
// total == 0: the batch is whole.
struct DropoutRows {
  std::int64_t first = 0, count = 0, total = 0;
};

// A tensor-parallel shard (Model::shard_tensor_parallel): rank `rank` of `ranks` holds heads
// and FFN hidden units [rank * n, (rank + 1) * n) of ranks * n.
struct DropoutShard {
  int rank = 0, ranks = 1;
};

// Dropout masks for one forward pass: each call takes the next slice of a counter-based
// stream, so a (seed, step) pair reproduces every mask of that step.
class DropoutStream {
 public:
  DropoutStream(bool training, std::uint64_t seed, DropoutRows rows = {}, DropoutShard shard = {})
      : training_(training), seed_(seed), rows_(rows), shard_(shard) {}
  bool training() const { return training_; }
  // x's dim 0 (or its outermost dims, flattened) runs over the batch, rows outermost.
  Tensor apply(const Tensor& x, double p);
  // As apply, for a tensor whose last dim is this shard's block of the layer's columns (an
  // FFN's hidden units): the masks are those columns' masks in the whole layer's tensor.
  Tensor apply_shard_columns(const Tensor& x, double p);
  const DropoutShard& shard() const { return shard_; }
  // Where the stream is, and a jump there (a pipeline stage continues the previous stage's).
  std::pair<std::uint64_t, std::uint64_t> position() const { return {offset_, calls_}; }
  void seek(std::pair<std::uint64_t, std::uint64_t> at) { std::tie(offset_, calls_) = at; }
  // A fresh seed for a kernel that draws its own mask (attention weights).
  std::uint64_t next_seed();
  // The index to add to a batch index b in [0, n) of a kernel's own mask, when n counts this
  // window's rows times a per-row factor (RETRO's neighbours: rows x chunks x k).
  std::uint64_t batch_offset(std::int64_t n) const;

 private:
  bool training_;
  std::uint64_t seed_;
  DropoutRows rows_;
  DropoutShard shard_;
  std::uint64_t offset_ = 0;
  std::uint64_t calls_ = 0;
};

// Stochastic depth (drop path): in training, each sequence (row of dim 0) keeps `branch` with
// probability 1 - rate, scaled by 1 / (1 - rate) so that inference (identity) sees the same
// expectation; a dropped sequence's branch is all zeros. The (B, 1, ..., 1) mask is one
// dropout draw from `rng`, so it is reproducible and replayable. Identity outside training.
Tensor drop_path(const Tensor& branch, double rate, DropoutStream& rng);

struct Linear {
  Tensor weight;        // (out, in); (in, out) when in_out (GPT-2's Conv1D layout) and f32.
                        // A compact weight (bf16/f16/q8_0/...) is always (out, in).
  Tensor bias;          // (out) or undefined
  bool in_out = false;
  // LoRA (Hu et al. 2021), when lora_a is defined: y += lora_scale * B (A dropout(x)), with
  // A (r, in) and B (out, r) whatever the weight's layout (PEFT's convention).
  Tensor lora_a, lora_b;
  double lora_scale = 0.0;
  double lora_dropout = 0.0;
  // Tensor parallelism (Model::shard_tensor_parallel): a row-parallel layer (attention output,
  // FFN down) holds this rank's input columns, and its partial product is summed over the
  // ranks by this function before the bias is added (in training, the gradient passes back
  // unchanged: every rank holds all of it). Null elsewhere.
  RankSum partial_sum;
  std::string name;     // the family's parameter prefix ("model.layers.0.mlp.down_proj")
  // x (..., in) -> (..., out). rng: the LoRA branch's dropout stream (none at inference).
  Tensor operator()(const Tensor& x, DropoutStream* rng = nullptr) const;
};

struct Norm {
  NormKind kind = NormKind::layer_norm;
  Tensor weight;        // (C); ScaleNorm: (1), the learned scale g
  Tensor bias;          // (C) LayerNorm only, may be undefined
  double eps = 1e-5;
  Tensor operator()(const Tensor& x) const;  // over the last dim
};

struct FeedForward {
  Linear gate, up, down;  // gate only for gated activations
  FfnActivation activation = FfnActivation::relu;
  bool glu_gelu_tanh = false;  // GEGLU with the tanh GELU (T5 v1.1's gated-gelu)
  double dropout = 0.0;        // on the hidden activations (before down)
  RankSum input_grad_sum;      // tensor parallelism: fan_out of the input (see fan_out)
  Tensor operator()(const Tensor& x, DropoutStream& rng) const;  // (..., C) -> (..., C)
};

// Bottleneck adapter (peft.h): h + up(f(down(h))); identity while down.weight is undefined.
struct Bottleneck {
  Linear down, up;  // down (m, C) + (m), up (C, m) + (C)
  BottleneckActivation activation = BottleneckActivation::relu;
  bool defined() const { return down.weight.defined(); }
  Tensor operator()(const Tensor& h) const;  // (..., C) -> (..., C)
};

// What masks and positions one attention call uses.
struct AttentionSetup {
  bool causal = false;
  Tensor valid_lens;            // (B) or (B, Tq): key padding
  std::int64_t window = 0;      // sliding window width
  Tensor bias;                  // additive, broadcastable to (B, H, Tq, Tk) (T5 relative bias)
  Tensor alibi_slopes;          // (H)
  bool rope = false;
  RopePairing rope_pairing = RopePairing::halves;
  double rope_base = 10000.0;
  Tensor q_positions, k_positions;  // (Tq), (Tk) i64 for RoPE
  bool scale_scores = true;     // divide by sqrt(head_dim)
  double dropout = 0.0;         // on the attention weights
  SparseAttentionConfig sparse; // Longformer / BigBird pattern (replaces window when enabled)
  bool fused = true;            // the fused (FlashAttention-2) kernel; false: the plain path
  // Inspection: non-null makes attend() take the plain path and append its weights here,
  // labelled with these names and the module's layer.
  std::vector<AttentionMap>* capture = nullptr;
  const char* capture_stack = "";
  const char* capture_kind = "";
  // Prefix tuning (peft.h): (1, Hkv, P, Dh) keys/values put before the keys of every row,
  // visible to every query, never padding; no RoPE (learned in the rotated frame). Bias and
  // ALiBi see them as the P positions before the first token (queries align to the end).
  Tensor prefix_k, prefix_v;
};

// The kernel pattern of one layer's self-attention over Tk keys: the configured window,
// global positions below Tk (listed ones and 0..global_first-1) and random blocks whose seed
// mixes in the layer, so each layer (and, in the kernel, each head) draws its own blocks.
SparseAttentionPattern sparse_pattern(const SparseAttentionConfig& c, std::int64_t layer, std::int64_t Tk);

struct Attention {
  Linear q_proj, k_proj, v_proj, o_proj;
  Linear qkv_proj;              // fused (GPT-2's c_attn): used when its weight is defined
  std::int64_t n_heads = 1, n_kv_heads = 1, head_dim = 1;
  std::int64_t layer = 0;       // index in its stack (labels captured attention maps)
  // Tensor parallelism: fan_out of the inputs (see fan_out); these n_heads are heads
  // [head_offset, head_offset + n_heads) of the model's heads_total (0: n_heads).
  RankSum input_grad_sum;
  std::int64_t head_offset = 0, heads_total = 0;
  // x_q (B, Tq, C) attends to x_kv (B, Tk, C) -> (B, Tq, C). Self-attention: x_kv = x_q.
  Tensor operator()(const Tensor& x_q, const Tensor& x_kv, const AttentionSetup& s, DropoutStream& rng) const;
  // The projections, split into heads: q (B, H, T, Dh), k and v (B, Hkv, T, Dh), RoPE applied
  // — exposed for KV caches. project_self serves self-attention (fused or not); project_q
  // and project_kv serve cross-attention.
  struct Heads {
    Tensor q, k, v;
  };
  // rng: for the projections' LoRA dropout in training (null elsewhere).
  Heads project_self(const Tensor& x, const AttentionSetup& s, DropoutStream* rng = nullptr) const;
  Tensor project_q(const Tensor& x, const AttentionSetup& s, DropoutStream* rng = nullptr) const;
  std::pair<Tensor, Tensor> project_kv(const Tensor& x, const AttentionSetup& s, DropoutStream* rng = nullptr) const;
  // Attend with projected heads and apply the output projection.
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSetup& s, DropoutStream& rng) const;

 private:
  // The projections of inputs already fanned out.
  Tensor q_heads(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const;
  std::pair<Tensor, Tensor> kv_heads(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const;
};

}  // namespace tfm::nn
