// Embedding lookup (a row gather) and its backward (a scatter-add of rows), fp32.
#pragma once

#include <cstdint>

namespace tfm::kernels {

// out[i, :] = table[ids[i], :].    ids: (n), each in [0, V) (checked by the caller);
// table: (V, C); out: (n, C).
void embedding_forward(const std::int64_t* ids, const float* table, float* out, std::int64_t n, std::int64_t C);

// dtable[v, :] = sum of g[i, :] over the i with ids[i] == v, added in increasing i; rows with
// no token, and row padding_idx (when >= 0), are 0. g: (n, C); dtable: (V, C), overwritten.
// Work is split by vocabulary row, never by token, so each row's sum has one fixed order and
// the result is bit-identical whatever the thread count.
void embedding_backward(const std::int64_t* ids, const float* g, float* dtable, std::int64_t n, std::int64_t V,
                        std::int64_t C, std::int64_t padding_idx);

// Naive twin: one serial pass over the tokens (same per-row order, so bitwise equal).
void embedding_backward_naive(const std::int64_t* ids, const float* g, float* dtable, std::int64_t n,
                              std::int64_t V, std::int64_t C, std::int64_t padding_idx);

}  // namespace tfm::kernels
