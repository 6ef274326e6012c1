// The vocabulary split across tensor-parallel ranks (Megatron-LM's VocabParallelEmbedding and
// vocab-parallel cross-entropy): each rank holds rows [first, first + rows) of the token
// embedding, and of a vocabulary head, so neither the table nor the logits are whole anywhere.
// Every function is a collective: all ranks call it with the same ids or targets, in lockstep,
// and `sum` (RankSum, modules.h) adds a tensor over the ranks in place.
#pragma once

#include <cstdint>

#include "nn/modules.h"

namespace tfm::nn {

struct VocabShard {
  std::int64_t first = 0, last = 0;  // this rank's [first, last) of the vocabulary
  std::int64_t vocab = 0;            // the whole vocabulary
  int rank = 0, ranks = 1;
  RankSum sum;
};

// This rank's contiguous part of a vocabulary of `vocab`: the first vocab % ranks ranks take one
// row more.
std::pair<std::int64_t, std::int64_t> vocab_part(std::int64_t vocab, int rank, int ranks);

// Rows of the whole table for ids (B, T): this rank looks up the ids in its rows (zeros for the
// others'), and the sum over the ranks is the whole lookup, exactly (one term is not zero).
// Backward, each rank's rows take the gradient of their own ids. ids out of [0, vocab) fail.
Tensor vocab_parallel_embedding(const Tensor& ids, const Tensor& rows, const VocabShard& v);

// The whole vocabulary's logits (..., vocab) from this rank's columns (..., last - first):
// written into zeros and summed over the ranks (exact). Backward: this rank's columns of the
// gradient.
Tensor gather_vocab_columns(const Tensor& columns, const VocabShard& v);

// The mean over targets != ignore_index of (1 - eps) (lse - x[t]) + eps (lse - mean(x)), as
// cross_entropy, from each rank's columns (..., last - first): the row maxima, the sums of
// exp(x - max), the target's logit and the sum of the logits meet in two sums over the ranks;
// nothing of width vocab is formed. Backward needs no communication (softmax - one-hot of the
// rank's own columns).
Tensor vocab_parallel_cross_entropy(const Tensor& columns, const Tensor& targets, const VocabShard& v,
                                    std::int64_t ignore_index, float label_smoothing);

}  // namespace tfm::nn
