// Attention: the plain path (materialises the (B, H, T, T) weights) vs the fused
// FlashAttention-2 kernels, forward and forward+backward, B=1, H=4, D=64.
//
//   build/bin/bench_attention --benchmark_filter=.    (one run per T; the plain path stops at 4096)
//
// Counters: peak_MiB = high-water mark of the engine's allocator above what the inputs hold
// (scores, weights, saved activations, gradients, the fused kernels' scratch);
// GFLOP/s counts the useful matmul work (forward 4·B·H·Tq·Tk·D, +8·B·H·Tq·Tk·D for backward;
// causal halves it), so the fused backward's extra recompute is not counted as work.
#include <benchmark/benchmark.h>

#include "tfm/tfm.h"

using namespace tfm;

namespace {

constexpr std::int64_t kB = 1, kH = 4, kD = 64;

void BM_Attention(benchmark::State& state) {
  const std::int64_t T = state.range(0);
  const bool flash = state.range(1) != 0, with_backward = state.range(2) != 0, causal = state.range(3) != 0;
  Tensor q = Tensor::randn({kB, kH, T, kD}, 1), k = Tensor::randn({kB, kH, T, kD}, 2),
         v = Tensor::randn({kB, kH, T, kD}, 3), w = Tensor::randn({kB, kH, T, kD}, 4);
  if (with_backward) {
    q.requires_grad_();
    k.requires_grad_();
    v.requires_grad_();
  }
  AttentionOptions o;
  o.use_flash = flash;
  o.causal = causal;
  std::size_t peak_extra = 0;
  for (auto _ : state) {
    q.zero_grad();
    k.zero_grad();
    v.zero_grad();
    const std::size_t base = memory_stats().current_bytes;
    reset_peak_memory();
    if (with_backward) {
      Tensor out = scaled_dot_product_attention(q, k, v, o);
      backward(out, w);
    } else {
      NoGradGuard ng;
      Tensor out = scaled_dot_product_attention(q, k, v, o);
      benchmark::DoNotOptimize(out.raw_data());
    }
    peak_extra = std::max(peak_extra, memory_stats().peak_bytes - base);
  }
  const double flops = (with_backward ? 12.0 : 4.0) * kB * kH * static_cast<double>(T) * T * kD * (causal ? 0.5 : 1.0);
  state.counters["peak_MiB"] = static_cast<double>(peak_extra) / (1 << 20);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(flash ? "fused" : "plain") + (with_backward ? " fwd+bwd" : " fwd") +
                 (causal ? " causal" : ""));
}

void args(benchmark::internal::Benchmark* b) {
  for (int bwd : {0, 1}) {
    for (std::int64_t T : {256, 512, 1024, 2048, 4096, 8192}) {
      if (T <= 4096) b->Args({T, 0, bwd, 0});  // plain: O(T^2) memory and scalar dot products
      b->Args({T, 1, bwd, 0});
      b->Args({T, 1, bwd, 1});
    }
  }
}

}  // namespace

BENCHMARK(BM_Attention)->Apply(args)->ArgNames({"T", "flash", "bwd", "causal"})->Unit(benchmark::kMillisecond)
    ->MinTime(0.2)->UseRealTime();

BENCHMARK_MAIN();
