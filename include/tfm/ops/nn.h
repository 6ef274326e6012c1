// Neural-network ops: softmax family, normalisations, embedding, dropout, cross-entropy,
// concat / split. All are differentiable; all compute in fp32 (other float dtypes: cast
// first). Row ops work over the last dim; non-contiguous inputs are copied to row-major.
//
//   Tensor h = layer_norm(x, ln_w, ln_b);                      // x (B, T, C), w/b (C)
//   Tensor p = softmax(scores);                                // over the last dim
//   Tensor e = embedding(ids, wte);                            // ids (B, T) -> (B, T, C)
//   Tensor loss = cross_entropy(reshape(logits, {-1, V}), reshape(targets, {-1}));
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

// exp(x - max) / sum(exp(x - max)) along dim (default: the last).
Tensor softmax(const Tensor& x, std::int64_t dim = -1);
// x - max - log(sum(exp(x - max))) along dim.
Tensor log_softmax(const Tensor& x, std::int64_t dim = -1);

// LayerNorm over the last dim C: (x - mean) / sqrt(var + eps) * weight + bias, var biased
// (as PyTorch). x (..., C); weight, bias: (C) or undefined (Tensor()) for none.
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  float eps = 1e-5f);
// RMSNorm (Llama / T5): x * rsqrt(mean(x^2) + eps) * weight. x (..., C); weight (C) or undefined.
Tensor rms_norm(const Tensor& x, const Tensor& weight = Tensor(), float eps = 1e-6f);

// Row lookup: ids (any shape, i32 or i64) into table (V, C) -> (..., C). An id outside
// [0, V) is an error naming the id, its position and V. padding_idx (negative counts from
// V, as PyTorch): that row receives no gradient. The backward is a deterministic
// scatter-add (see kernels/embedding.h).
Tensor embedding(const Tensor& ids, const Tensor& table, std::optional<std::int64_t> padding_idx = std::nullopt);

// Inverted dropout: each element is zeroed with probability p, survivors scaled by 1/(1-p).
// The mask is a pure function of (seed, offset + flat index) (Philox), identical for any
// thread count; give each call site / step its own seed or offset range. Returns x itself
// when !training or p == 0. The backward applies the same mask.
// row_stride > 0: x's rows (of its last dim) are parts of the rows of a wider tensor, whose
// row r starts at counter offset + r * row_stride (a tensor-parallel shard of an FFN's hidden
// units draws the whole layer's mask for its own columns).
Tensor dropout(const Tensor& x, float p, bool training, std::uint64_t seed, std::uint64_t offset = 0,
               std::uint64_t row_stride = 0);

enum class LossReduction { none, mean, sum };

// Fused log-softmax + negative log-likelihood with PyTorch's semantics. logits (..., V)
// (the class dim is the LAST one; PyTorch's is dim 1 for >2-d input: pass (N, V) to match),
// targets (...) i32/i64. Targets equal to ignore_index contribute 0 and are left out of the
// mean's denominator (mean over no valid target is NaN, as PyTorch). label_smoothing eps
// mixes in the uniform distribution: loss = (1-eps)*nll + eps/V * sum_v(-log p_v).
// Returns a scalar (mean, sum) or (...) for none.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index = -100,
                     float label_smoothing = 0.0f, LossReduction reduction = LossReduction::mean);

// Connectionist temporal classification (Graves et al. 2006) with PyTorch's F.ctc_loss
// semantics, batch first: log_probs (B, T, V) log-probabilities (log_softmax of the logits);
// input_lengths (B) the frames each row uses (<= T); targets (B, L) padded label rows (i32/i64,
// never the blank); target_lengths (B). mean: each row's loss divided by its target length
// (at least 1), then the mean over rows; none: (B) per-row losses. zero_infinity: a row no
// alignment fits (too few frames for its labels) counts 0, with a zero gradient, instead of inf.
Tensor ctc_loss(const Tensor& log_probs, const Tensor& input_lengths, const Tensor& targets, const Tensor& target_lengths,
                std::int64_t blank = 0, LossReduction reduction = LossReduction::mean, bool zero_infinity = false);

// Join tensors (same dtype, same shape except along dim) into a new tensor.
Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim);
// Views of consecutive pieces of x along dim with the given sizes (which must add up to
// x.size(dim)). Each piece is differentiable.
std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim);

}  // namespace tfm
