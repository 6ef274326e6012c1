// Embedding gather / scatter-add (see embedding.h). Row copies and adds are plain loops:
// they are memory-bound and GCC vectorises them for the baseline ISA.
#include "kernels/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"

namespace tfm::kernels {

void embedding_forward(const std::int64_t* ids, const float* table, float* out, std::int64_t n, std::int64_t C) {
  const std::size_t row_bytes = static_cast<std::size_t>(C) * sizeof(float);
  parallel_for(n, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(C, 1)), [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) std::memcpy(out + i * C, table + ids[i] * C, row_bytes);
  });
}

void embedding_backward(const std::int64_t* ids, const float* g, float* dtable, std::int64_t n, std::int64_t V,
                        std::int64_t C, std::int64_t padding_idx) {
  // Counting sort of the token positions by id (stable: positions stay increasing per id).
  std::vector<std::int64_t> start(static_cast<std::size_t>(V) + 1, 0);  // (V+1) offsets into order
  for (std::int64_t i = 0; i < n; ++i) ++start[static_cast<std::size_t>(ids[i]) + 1];
  for (std::int64_t v = 0; v < V; ++v) start[static_cast<std::size_t>(v) + 1] += start[static_cast<std::size_t>(v)];
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));  // (n) token positions grouped by id
  {
    std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
    for (std::int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(fill[static_cast<std::size_t>(ids[i])]++)] = i;
  }
  parallel_for(V, std::max<std::int64_t>(1, 4096 / std::max<std::int64_t>(C, 1)), [&](std::int64_t v0, std::int64_t v1) {
    for (std::int64_t v = v0; v < v1; ++v) {
      float* d = dtable + v * C;
      std::memset(d, 0, static_cast<std::size_t>(C) * sizeof(float));
      if (v == padding_idx) continue;
      for (std::int64_t k = start[static_cast<std::size_t>(v)]; k < start[static_cast<std::size_t>(v) + 1]; ++k) {
        const float* gr = g + order[static_cast<std::size_t>(k)] * C;
        for (std::int64_t c = 0; c < C; ++c) d[c] += gr[c];
      }
    }
  });
}

void embedding_backward_naive(const std::int64_t* ids, const float* g, float* dtable, std::int64_t n,
                              std::int64_t V, std::int64_t C, std::int64_t padding_idx) {
  for (std::int64_t k = 0; k < V * C; ++k) dtable[k] = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    if (ids[i] == padding_idx) continue;
    for (std::int64_t c = 0; c < C; ++c) dtable[ids[i] * C + c] += g[i * C + c];
  }
}

}  // namespace tfm::kernels
