// The oneDNN bf16 path: our f32 -> bf16 rounding (the same bits the other paths use), then
// oneDNN's matmul primitive with bf16 src/weights and an f32 dst. Kept as a measured
// alternative (TFM_BF16=onednn; docs/benchmarks.md compares it with the native kernel):
// oneDNN picks its own blocking and threads with OpenMP over the engine's thread count, so
// its sums are not in the pair order of gemm_bf16.h and may change with the thread count.
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/gemm_bf16.h"
#include "kernels/gemm_blas.h"
#include "tfm/error.h"

#if defined(TFM_BLAS_ONEDNN)
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "tfm/runtime.h"
#endif

namespace tfm::kernels::gemm_bf16_onednn {

#if defined(TFM_BLAS_ONEDNN)
namespace {

std::uint16_t to_bf16(float x) {
  const float r = round_bf16(x);
  std::uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<std::uint16_t>(u >> 16);
}

struct Cache {
  std::mutex mu;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  // (M, N, K) -> primitive for row-major bf16 (M,K) x (K,N) -> f32 (M,N).
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, dnnl::matmul> prims;
};
Cache& cache() {
  static Cache c = [] {
    blas::follow_isa_override();  // before the engine: oneDNN reads its ISA cap once
    return Cache{};
  }();
  return c;
}

dnnl::matmul::primitive_desc make_pd(std::int64_t M, std::int64_t N, std::int64_t K, const dnnl::engine& engine) {
  using dnnl::memory;
  const memory::desc src({M, K}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc wei({K, N}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc dst({M, N}, memory::data_type::f32, memory::format_tag::ab);
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), engine);
}

}  // namespace

// oneDNN builds a bf16 matmul only where the CPU has the instructions for one (AVX512_BF16,
// AVX512_CORE, or AMX, depending on the version; an AVX2-only CPU has none and the descriptor
// throws): ask it once with a small product.
bool available() {
  static const bool ok = [] {
    try {
      make_pd(8, 8, 8, cache().engine);
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return ok;
}

void run(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
         std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  using dnnl::memory;
  // Operands converted to contiguous row-major bf16 (the conversion is part of the cost
  // this path pays, as the native one pays for packing).
  thread_local std::vector<std::uint16_t> a16, b16;
  thread_local std::vector<float> c32;
  a16.resize(static_cast<std::size_t>(M * K));
  b16.resize(static_cast<std::size_t>(K * N));
  c32.resize(static_cast<std::size_t>(M * N));
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t k = 0; k < K; ++k) a16[static_cast<std::size_t>(i * K + k)] = to_bf16(ta ? A[k * lda + i] : A[i * lda + k]);
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t j = 0; j < N; ++j) b16[static_cast<std::size_t>(k * N + j)] = to_bf16(tb ? B[j * ldb + k] : B[k * ldb + j]);
  Cache& c = cache();
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    auto key = std::make_tuple(M, N, K);
    auto it = c.prims.find(key);
    if (it == c.prims.end()) {
      try {
        it = c.prims.emplace(key, dnnl::matmul(make_pd(M, N, K, c.engine))).first;
      } catch (const dnnl::error& e) {
        fail("bf16", "oneDNN cannot build a bf16 matmul of ", M, "x", K, " by ", K, "x", N, " on this CPU (", e.what(),
             "); use TFM_BF16=emulated");
      }
    }
    prim = it->second;
  }
  const memory::desc src({M, K}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc wei({K, N}, memory::data_type::bf16, memory::format_tag::ab);
  const memory::desc dst({M, N}, memory::data_type::f32, memory::format_tag::ab);
  memory ms(src, c.engine, a16.data()), mw(wei, c.engine, b16.data()), md(dst, c.engine, c32.data());
  dnnl::stream s(c.engine);
  const int previous = omp_get_max_threads();
  omp_set_num_threads(num_threads());
  prim.execute(s, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_DST, md}});
  s.wait();
  omp_set_num_threads(previous);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float& out = C[i * ldc + j];
      const float v = alpha * c32[static_cast<std::size_t>(i * N + j)];
      out = beta == 0.0f ? v : v + beta * out;
    }
}

#else

bool available() { return false; }

void run(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const float*,
         std::int64_t, float, float*, std::int64_t) {
  fail("bf16", "the oneDNN bf16 path needs a build with TFM_BLAS=onednn");
}

#endif

}  // namespace tfm::kernels::gemm_bf16_onednn
