// Throughput of the elementwise kernels: GELU (erf and tanh forms, forward and backward),
// SiLU and add on 4M floats, at 1 and 2 threads and per ISA build.
// bytes_per_second counts bytes read + written (forward 8 B/elem, backward and add 12 B/elem).
//
//   ./build/bin/bench_activations --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "bench_isa.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace {

using tfm::kernels::Activation;
constexpr std::int64_t kN = std::int64_t{1} << 22;  // 4M floats = 16 MiB per array (beyond L2/L3 share)

struct Arrays {
  std::vector<float> x, y, z;
  Arrays() : x(tfm::Tensor::uniform({kN}, 1, -4, 4).to_floats()), y(tfm::Tensor::uniform({kN}, 2, -1, 1).to_floats()), z(kN) {}
};
Arrays& arrays() {
  static Arrays a;
  return a;
}


void BM_ActivationForward(benchmark::State& state, Activation f) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Arrays& a = arrays();
  for (auto _ : state) {
    tfm::kernels::activation_forward(f, a.x.data(), a.z.data(), kN);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_ActivationBackward(benchmark::State& state, Activation f) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Arrays& a = arrays();
  for (auto _ : state) {
    tfm::kernels::activation_backward(f, a.x.data(), a.y.data(), a.z.data(), kN);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kN * 12);
}

void BM_Add(benchmark::State& state) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Arrays& a = arrays();
  for (auto _ : state) {
    tfm::kernels::add(a.x.data(), a.y.data(), a.z.data(), kN);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kN * 12);
}

void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "isa"});
  for (int isa : {2, 1, 0})
    for (int threads : {1, 2}) b->Args({threads, isa});
  b->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

BENCHMARK_CAPTURE(BM_ActivationForward, gelu, Activation::gelu)->Apply(Args);
BENCHMARK_CAPTURE(BM_ActivationForward, gelu_tanh, Activation::gelu_tanh)->Apply(Args);
BENCHMARK_CAPTURE(BM_ActivationForward, silu, Activation::silu)->Apply(Args);
BENCHMARK_CAPTURE(BM_ActivationBackward, gelu, Activation::gelu)->Apply(Args);
BENCHMARK_CAPTURE(BM_ActivationBackward, gelu_tanh, Activation::gelu_tanh)->Apply(Args);
BENCHMARK(BM_Add)->Apply(Args);

BENCHMARK_MAIN();
