// All-reduce cost on this machine, for docs/distributed.md's alpha-beta model:
//   mpirun --oversubscribe -np 2 --mca btl self,vader build/bin/bench_allreduce
// For each buffer size, the median time of a blocking float sum (dist::allreduce_sum, the
// call the gradient buckets make, non-blocking) over the ranks, each run started together
// after a barrier; then t = alpha + bytes * beta through the smallest and the largest. Rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "dist/comm.h"

int main() {
  using tfm::dist::rank;
  const std::vector<std::size_t> sizes = {256, 4096, 65536, 262144, 1u << 20, 4u << 20, 16u << 20};  // floats
  std::vector<double> xs, ys;
  if (rank() == 0) std::printf("ranks %d\n%12s %12s %12s\n", tfm::dist::size(), "bytes", "median us", "GB/s (algo)");
  for (std::size_t n : sizes) {
    std::vector<float> buf(n, 1.0f);
    const int iters = n <= 65536 ? 200 : n <= (1u << 20) ? 40 : 10;
    std::vector<double> t;
    for (int i = 0; i < iters + 3; ++i) {
      tfm::dist::barrier();
      const auto t0 = std::chrono::steady_clock::now();
      tfm::dist::allreduce_sum(buf.data(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (i >= 3) t.push_back(s);  // the first runs set up the shared-memory segments
    }
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2], bytes = static_cast<double>(n * sizeof(float));
    xs.push_back(bytes);
    ys.push_back(med);
    if (rank() == 0) std::printf("%12.0f %12.1f %12.2f\n", bytes, med * 1e6, bytes / med / 1e9);
  }
  // Two points: the smallest buffer gives the latency, the largest the time per byte.
  const double beta = (ys.back() - ys.front()) / (xs.back() - xs.front()), alpha = ys.front() - beta * xs.front();
  if (rank() == 0) std::printf("alpha %.1f us, beta %.3f ns/byte (%.2f GB/s)\n", alpha * 1e6, beta * 1e9, 1.0 / beta / 1e9);
  tfm::dist::finalize();
  return 0;
}
