// tfm bench qgemm — the compact-weight matrix product (kernels/qgemm.h) per weight type.
//
// Decode (M = 1, 8): the product reads every weight once, so its ceiling is the read bandwidth;
// "GB/s" is weight bytes / best time and "%bw" that over the measured read bandwidth at the same
// thread count (the issue's target: >= 80% at batch 1). Each timed run walks over enough
// copies of the matrix (>= 256 MiB in all) that the weights come from memory, not the caches.
// "cache GB/s" runs one copy over and over on 1 thread: the kernel's own rate, which the memory
// rate can only reach if it is higher. The types repacked at load (q4_0x16, ...) follow the
// plain ones where this CPU runs their kernels.
// Prefill (M = 32, 128): GFLOP/s of the integer kernels against the dequantize-tiles + f32 GEMM
// path that qgemm takes from qgemm_dequant_min_rows() rows on.
#include <cstdio>
#include <string>
#include <vector>

#include "bench_probe.h"
#include "bench_util.h"
#include "kernels/qgemm.h"
#include "kernels/quant_repack.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

struct Weights {
  std::vector<std::vector<unsigned char>> copies;
  std::size_t bytes = 0;
};

Weights make_weights(DType t, std::int64_t N, std::int64_t K) {
  const Tensor w = Tensor::randn({N, K}, 3);
  Weights out;
  out.bytes = dtype_row_bytes(t, K) * static_cast<std::size_t>(N);
  std::vector<unsigned char> one(out.bytes);
  kernels::quantize_rows(t, w.data<float>(), one.data(), N, K);
  const std::size_t copies = std::max<std::size_t>(2, ((std::size_t{256} << 20) + out.bytes - 1) / out.bytes);
  out.copies.assign(copies, one);
  return out;
}

}  // namespace

void run_bench_qgemm(const BenchOptions& o, int threads) {
  std::vector<int> tcs = {1};
  if (threads > 1) tcs.push_back(threads);
  std::vector<double> bw;
  for (int t : tcs) bw.push_back(read_bandwidth_gbs(std::int64_t{256} << 20, t, o.min_reps));
  std::printf("\n== qgemm: y = x·Wᵀ with W (N, K) stored compact; decode GB/s = weight bytes / best time\n");
  std::printf("bw = read bandwidth of a 256 MiB sum:");
  for (std::size_t i = 0; i < tcs.size(); ++i) std::printf(" %.1f GB/s @%dt", bw[i], tcs[i]);
  std::printf("\nisa %s%s\n\n", isa_name(active_isa()), cpu_info().avx512_vnni ? " + VNNI" : "");
  std::printf("%-6s %-11s %3s", "type", "N x K", "M");
  for (int t : tcs) std::printf(" %9s %6s", ("GB/s@" + std::to_string(t) + "t").c_str(), ("%bw@" + std::to_string(t)).c_str());
  std::printf(" %9s %11s\n", "rows/s@1t", "cache GB/s");
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{3072, 768}, {5632, 2048}};
  std::vector<DType> types = {DType::f32, DType::bf16, DType::f16, DType::q8_0, DType::q6_k, DType::q4_k, DType::q4_0};
  for (DType t : {DType::q8_0, DType::q6_k, DType::q4_k, DType::q4_0})  // as repacked at load, where a kernel runs
    if (kernels::x16_kernel_available(t)) types.push_back(kernels::x16_type(t));
  for (const auto& [N, K] : shapes)
    for (DType t : types) {
      const Weights w = make_weights(t, N, K);
      for (std::int64_t M : {1, 8}) {
        const Tensor x = Tensor::randn({M, K}, 4);
        std::vector<float> y(static_cast<std::size_t>(M * N));
        std::printf("%-6s %5lldx%-5lld %3lld", dtype_name(t), static_cast<long long>(N), static_cast<long long>(K),
                    static_cast<long long>(M));
        double first = 0;
        for (std::size_t i = 0; i < tcs.size(); ++i) {
          set_num_threads(tcs[i]);
          const double s = best_seconds(o, [&] {
                             for (const auto& c : w.copies)
                               kernels::qgemm(t, M, N, K, x.data<float>(), K, c.data(), y.data(), N);
                           }) / static_cast<double>(w.copies.size());
          const double gbs = static_cast<double>(w.bytes) / s * 1e-9;
          if (i == 0) first = s;
          std::printf(" %9.1f %5.0f%%", gbs, 100.0 * gbs / bw[i]);
        }
        set_num_threads(1);  // the same matrix again and again: the kernel's rate with the weights in cache
        const double cached = best_seconds(o, [&] {
          for (std::size_t r = 0; r < 8; ++r) kernels::qgemm(t, M, N, K, x.data<float>(), K, w.copies[0].data(), y.data(), N);
        }) / 8.0;
        // activation rows through one matrix per second
        std::printf(" %9.0f %11.1f\n", static_cast<double>(M) / first, static_cast<double>(w.bytes) / cached * 1e-9);
        std::fflush(stdout);
      }
    }

  // Prefill: the integer kernels against dequantized tiles into the f32 GEMM.
  std::printf("\nprefill GFLOP/s @%dt: integer kernels (int) vs dequantized tiles + f32 GEMM (deq)\n", tcs.back());
  std::printf("%-6s %-11s %4s %9s %9s\n", "type", "N x K", "M", "int", "deq");
  set_num_threads(tcs.back());
  const std::int64_t saved = kernels::qgemm_dequant_min_rows();
  std::vector<DType> prefill_types = {DType::q8_0, DType::q4_k, DType::q4_0, DType::bf16};
  for (DType t : {DType::q8_0, DType::q6_k, DType::q4_k, DType::q4_0})  // their integer kernels run at every M
    if (kernels::x16_kernel_available(t)) prefill_types.push_back(kernels::x16_type(t));
  for (DType t : prefill_types) {
    const std::int64_t N = 3072, K = 768;
    const Weights w = make_weights(t, N, K);
    for (std::int64_t M : {32, 128}) {
      const Tensor x = Tensor::randn({M, K}, 4);
      std::vector<float> y(static_cast<std::size_t>(M * N));
      double gf[2] = {0, 0};
      for (int path = 0; path < (kernels::dtype_is_x16(t) ? 1 : 2); ++path) {  // x16: integer kernels at every M
        kernels::set_qgemm_dequant_min_rows(path == 0 ? (std::int64_t{1} << 40) : 17);
        const double s = best_seconds(o, [&] {
          kernels::qgemm(t, M, N, K, x.data<float>(), K, w.copies[0].data(), y.data(), N);
        });
        gf[path] = 2.0 * static_cast<double>(M * N * K) / s * 1e-9;
      }
      char deq[16] = "-";
      if (gf[1] > 0) std::snprintf(deq, sizeof deq, "%.1f", gf[1]);
      std::printf("%-6s %5lldx%-5lld %4lld %9.1f %9s\n", dtype_name(t), static_cast<long long>(N),
                  static_cast<long long>(K), static_cast<long long>(M), gf[0], deq);
      std::fflush(stdout);
    }
  }
  kernels::set_qgemm_dequant_min_rows(saved);
}

}  // namespace tfm::cli
