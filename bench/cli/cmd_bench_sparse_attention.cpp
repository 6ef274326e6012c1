// tfm bench attention --sparse — sparse (window + global tokens + BigBird random blocks) vs
// dense self-attention, forward+backward time and peak memory at T = 1k .. 16k.
//
// q, k, v: (B=1, H=4, T, D=64), bidirectional (an encoder), the sparse pattern of the
// options (default: window 64, the first token global, 2 random blocks of 64 per query
// block). Memory is the engine allocator's high-water mark above the live inputs, tensor
// bytes only (as in `tfm bench attention`), and includes the three input gradients (3 x T x
// 1 MiB/1k). Dense rows above --dense-max-t and plain rows above --plain-max-t are skipped
// (the reason is printed); dense runs at T >= 8192 are timed once (one run takes seconds).
#include <cstdio>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tfm/autograd.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

constexpr std::int64_t kB = 1, kH = 4, kD = 64;

struct Figure {
  double seconds = -1;  // < 0: not measured
  double peak_bytes = -1;
};

Figure run_case(const BenchOptions& o, std::int64_t T, const AttentionOptions& opt, int min_reps) {
  Tensor q = Tensor::randn({kB, kH, T, kD}, 1), k = Tensor::randn({kB, kH, T, kD}, 2),
         v = Tensor::randn({kB, kH, T, kD}, 3);
  const Tensor g = Tensor::randn({kB, kH, T, kD}, 4);  // d loss / d out
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  BenchOptions bo = o;
  bo.min_reps = min_reps;
  if (min_reps == 1) bo.min_time = 0;
  Figure f;
  const std::size_t base = memory_stats().current_bytes;
  reset_peak_memory();
  f.seconds = best_seconds(bo, [&] {
    for (Tensor* t : {&q, &k, &v}) t->zero_grad();  // the previous run's gradients are freed first
    backward(scaled_dot_product_attention(q, k, v, opt), g);
  });
  f.peak_bytes = static_cast<double>(memory_stats().peak_bytes - base);
  return f;
}

void print_cell(const Figure& f, bool ms) {
  if (f.seconds < 0) std::printf(" %10s", "skip");
  else std::printf(" %10.1f", ms ? f.seconds * 1e3 : f.peak_bytes / (1024.0 * 1024.0));
}

}  // namespace

void run_bench_sparse_attention(const BenchOptions& o, const SparseBenchOptions& s, int threads) {
  std::vector<std::int64_t> Ts = {1024, 2048, 4096, 8192, 16384};
  AttentionOptions sparse;
  sparse.window = s.window;
  for (std::int64_t g = 0; g < s.global_first; ++g) sparse.sparse.global_tokens.push_back(g);
  sparse.sparse.random_blocks = s.random_blocks;
  sparse.sparse.block_size = s.block_size;
  sparse.sparse.seed = 1;
  set_num_threads(threads);
  std::printf("\n== sparse vs dense attention, forward+backward: B=%lld H=%lld D=%lld, bidirectional, fp32, %d threads\n",
              static_cast<long long>(kB), static_cast<long long>(kH), static_cast<long long>(kD), threads);
  std::printf("sparse = window %lld + first %lld token(s) global + %lld random block(s) of %lld per query block\n",
              static_cast<long long>(s.window), static_cast<long long>(s.global_first),
              static_cast<long long>(s.random_blocks), static_cast<long long>(s.block_size));
  std::printf("dense fused skipped above T=%lld (--dense-max-t), plain paths above T=%lld (--plain-max-t; dense plain\n"
              "holds two (B,H,T,T) f32 matrices: %.1f GiB at T=16384); dense at T >= 8192 timed once\n",
              static_cast<long long>(s.dense_max_t), static_cast<long long>(o.plain_max_t),
              2.0 * kB * kH * 16384.0 * 16384.0 * 4 / (1024.0 * 1024.0 * 1024.0));
  std::printf("F = fused (FlashAttention-2 style) kernels, P = plain path\n");
  std::printf("\n%6s %-43s  %-43s\n", "", "forward+backward, ms", "peak MiB above inputs");
  const char* heads[] = {"dense F", "sparse F", "dense P", "sparse P"};
  std::printf("%6s", "T");
  for (int pass = 0; pass < 2; ++pass)
    for (const char* h : heads) std::printf(" %10.10s", h);
  std::printf(" %8s\n", "speedup");
  for (auto T : Ts) {
    std::vector<Figure> r(4);
    AttentionOptions dense;
    const int dense_reps = T >= 8192 ? 1 : o.min_reps;
    if (T <= s.dense_max_t) {
      dense.use_flash = true;
      r[0] = run_case(o, T, dense, dense_reps);
    }
    sparse.use_flash = true;
    r[1] = run_case(o, T, sparse, o.min_reps);
    if (T <= o.plain_max_t) {
      dense.use_flash = false;
      r[2] = run_case(o, T, dense, dense_reps);
    }
    if (T <= s.sparse_plain_max_t) {
      sparse.use_flash = false;
      r[3] = run_case(o, T, sparse, o.min_reps);
    }
    std::printf("%6lld", static_cast<long long>(T));
    for (const Figure& f : r) print_cell(f, true);
    for (const Figure& f : r) print_cell(f, false);
    if (r[0].seconds > 0) std::printf(" %7.1fx", r[0].seconds / r[1].seconds);  // dense fused / sparse fused
    else std::printf(" %8s", "-");
    std::printf("\n");
    std::fflush(stdout);
  }
  std::printf("(speedup = dense fused time / sparse fused time; q, k, v: %.1f MiB each at T=16384)\n",
              static_cast<double>(kB * kH * 16384 * kD * 4) / (1024.0 * 1024.0));
}

}  // namespace tfm::cli
