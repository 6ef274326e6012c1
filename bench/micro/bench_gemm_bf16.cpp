// bf16 GEMM paths against each other and against the fp32 GEMM, on the training shapes of
// the nanoGPT-size GPT (d = 384, 4d MLP, BT = 16 x 256 rows): the forward product, and the
// two backward products (dX = dY W, dW = dYᵀ X) of each Linear. GFLOP/s counts 2MNK and
// includes each path's f32 -> bf16 conversion/packing (the cost training pays per call).
// Arguments: shape index, path (0 fp32 gemm, 1 native vdpbf16ps, 2 oneDNN bf16 matmul,
// 3 emulated avx512), threads.
//   build/bin/bench_gemm_bf16 --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "tfm/tfm.h"

namespace {

struct Shape {
  bool ta, tb;
  std::int64_t M, N, K;
  const char* what;
};
constexpr std::int64_t kBT = 4096, kC = 384;
const std::vector<Shape> kShapes = {
    {false, true, kBT, 3 * kC, kC, "fwd qkv  X Wt"},
    {false, true, kBT, 4 * kC, kC, "fwd fc1  X Wt"},
    {false, true, kBT, kC, 4 * kC, "fwd fc2  X Wt"},
    {false, false, kBT, kC, 4 * kC, "bwd fc1 dX = dY W"},
    {true, false, 4 * kC, kC, kBT, "bwd fc1 dW = dYt X"},
    {false, false, kBT, 4 * kC, kC, "bwd fc2 dX = dY W"},
    {true, false, kC, 4 * kC, kBT, "bwd fc2 dW = dYt X"},
    {false, true, kBT, 65, kC, "fwd head (V=65)"},
};

void BM_Gemm(benchmark::State& state) {
  const Shape s = kShapes[static_cast<std::size_t>(state.range(0))];
  const int path = static_cast<int>(state.range(1));
  tfm::set_num_threads(static_cast<int>(state.range(2)));
  tfm::set_active_isa(tfm::cpu_best_isa());
  using tfm::kernels::Bf16Path;
  if (path == 1 && !tfm::kernels::bf16_path_available(Bf16Path::native)) return state.SkipWithError("no AVX512_BF16");
  if (path == 2 && !tfm::kernels::bf16_path_available(Bf16Path::onednn)) return state.SkipWithError("no oneDNN");
  if (path == 1) tfm::kernels::set_bf16_path(Bf16Path::native);
  if (path == 2) tfm::kernels::set_bf16_path(Bf16Path::onednn);
  if (path == 3) tfm::kernels::set_bf16_path(Bf16Path::emulated);
  const tfm::Tensor a = tfm::Tensor::uniform({s.ta ? s.K : s.M, s.ta ? s.M : s.K}, 1, -1, 1);
  const tfm::Tensor b = tfm::Tensor::uniform({s.tb ? s.N : s.K, s.tb ? s.K : s.N}, 2, -1, 1);
  tfm::Tensor c = tfm::Tensor::zeros({s.M, s.N});
  const std::int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
  for (auto _ : state) {
    if (path == 0) {
      tfm::kernels::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data<float>(), lda, b.data<float>(), ldb, 0.0f,
                         c.data<float>(), s.N);
    } else {
      tfm::kernels::gemm_bf16(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data<float>(), lda, b.data<float>(), ldb, 0.0f,
                              c.data<float>(), s.N);
    }
    benchmark::ClobberMemory();
  }
  const char* names[] = {"fp32", "native", "onednn", "emulated"};
  state.SetLabel(std::string(s.what) + " " + names[path]);
  state.counters["GFLOPs"] =
      benchmark::Counter(2e-9 * static_cast<double>(s.M) * s.N * s.K, benchmark::Counter::kIsIterationInvariantRate);
}

void Args(benchmark::internal::Benchmark* b) {
  for (std::int64_t shape = 0; shape < static_cast<std::int64_t>(kShapes.size()); ++shape)
    for (std::int64_t path : {0, 1, 2, 3})
      for (std::int64_t threads : {1, 2}) b->Args({shape, path, threads});
}
BENCHMARK(BM_Gemm)->Apply(Args)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
