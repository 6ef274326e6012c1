// parallel_for: static partition of [0, n) over the engine's threads (OpenMP underneath).
//
// Work is cut into contiguous chunks of at least `grain` items; each item is processed by
// exactly one thread running the same code, so per-item results do not depend on the
// thread count. Reductions that combine items must not sum per-thread partials (their
// grouping would change with the count): reduce_blocks() fixes the grouping instead.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tfm/runtime.h"

namespace tfm::kernels {

template <class Fn>
void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  grain = std::max<std::int64_t>(grain, 1);
  const std::int64_t threads = std::min<std::int64_t>(num_threads(), (n + grain - 1) / grain);
  if (threads <= 1 || omp_in_parallel()) {
    fn(std::int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(static_cast<int>(threads))
  {
    const std::int64_t t = omp_get_thread_num();
    const std::int64_t nt = omp_get_num_threads();
    const std::int64_t chunk = (n + nt - 1) / nt;
    const std::int64_t begin = std::min(n, t * chunk);
    const std::int64_t end = std::min(n, begin + chunk);
    if (begin < end) fn(begin, end);
  }
}

// Deterministic parallel reduction: [0, n) is cut into fixed blocks of `block` items
// (independent of the thread count); block_fn(begin, end) -> double gives each block's
// partial, and the partials are added in block order on one thread.
template <class BlockFn>
double reduce_blocks(std::int64_t n, std::int64_t block, BlockFn&& block_fn) {
  if (n <= 0) return 0.0;
  const std::int64_t nblocks = (n + block - 1) / block;
  std::vector<double> partial(static_cast<std::size_t>(nblocks));
  parallel_for(nblocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b)
      partial[static_cast<std::size_t>(b)] = block_fn(b * block, std::min(n, (b + 1) * block));
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

}  // namespace tfm::kernels
