// Forward throughput of the row kernels: softmax, LayerNorm, RMSNorm over a (rows, cols)
// fp32 array. bytes/s counts one read of x and one write of y (the memory traffic floor).
// Arguments: threads, ISA (0 generic, 1 avx2, 2 avx512; skipped where the CPU lacks it).
//   build/bin/bench_norms --benchmark_filter=LayerNorm
#include <benchmark/benchmark.h>

#include <vector>

#include "kernels/norm.h"
#include "kernels/softmax.h"
#include "bench_isa.h"
#include "tfm/tfm.h"

namespace {

constexpr std::int64_t kRows = 4096, kCols = 1024;


void finish(benchmark::State& state) {
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 2 * static_cast<std::int64_t>(sizeof(float)));
  tfm::set_active_isa(tfm::cpu_best_isa());
}

struct Data {
  tfm::Tensor x = tfm::Tensor::randn({kRows, kCols}, 1), y = tfm::Tensor::empty({kRows, kCols});
  tfm::Tensor w = tfm::Tensor::randn({kCols}, 2), b = tfm::Tensor::randn({kCols}, 3);
  std::vector<float> mean = std::vector<float>(kRows), rstd = std::vector<float>(kRows);
};

// The floor to compare against: a plain copy of x into y (same bytes moved).
void BM_Copy(benchmark::State& state) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Data d;
  for (auto _ : state) {
    d.y.copy_(d.x);
    benchmark::ClobberMemory();
  }
  finish(state);
}

void BM_Softmax(benchmark::State& state) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Data d;
  for (auto _ : state) {
    tfm::kernels::softmax_forward(d.x.data<float>(), d.y.data<float>(), kRows, kCols);
    benchmark::ClobberMemory();
  }
  finish(state);
}

void BM_LayerNorm(benchmark::State& state) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Data d;
  for (auto _ : state) {
    tfm::kernels::layer_norm_forward(d.x.data<float>(), d.w.data<float>(), d.b.data<float>(), d.y.data<float>(),
                                     d.mean.data(), d.rstd.data(), kRows, kCols, 1e-5f);
    benchmark::ClobberMemory();
  }
  finish(state);
}

void BM_RmsNorm(benchmark::State& state) {
  if (!tfm::bench::setup_threads_and_isa(state)) return;
  Data d;
  for (auto _ : state) {
    tfm::kernels::rms_norm_forward(d.x.data<float>(), d.w.data<float>(), d.y.data<float>(), d.rstd.data(), kRows,
                                   kCols, 1e-6f);
    benchmark::ClobberMemory();
  }
  finish(state);
}

// threads x ISA
void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads", "isa"});
  for (int isa : {0, 1, 2})
    for (int t : {1, 2}) b->Args({t, isa});
  b->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(BM_Copy)->Apply(Args);
BENCHMARK(BM_Softmax)->Apply(Args);
BENCHMARK(BM_LayerNorm)->Apply(Args);
BENCHMARK(BM_RmsNorm)->Apply(Args);

}  // namespace

BENCHMARK_MAIN();
