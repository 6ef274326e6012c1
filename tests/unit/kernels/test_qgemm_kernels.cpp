// The compact-weight kernels (kernels/qgemm*.cpp) and reference quantizers: quantize ->
// dequantize error bounds per block type, every fast kernel against its naive twin at odd
// sizes on every instruction set the CPU has, row invariance (a row's output is the same
// whatever M), and the f32-dequantized reference within each type's activation-quantization
// bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/gemm_rows.h"
#include "kernels/qgemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/qgemm_act.h"
#include "kernels/qgemm_bf16.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {

std::vector<float> normal(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<unsigned char> quantize(DType t, const std::vector<float>& w, std::int64_t rows, std::int64_t K) {
  std::vector<unsigned char> q(dtype_row_bytes(t, K) * static_cast<std::size_t>(rows));
  kernels::quantize_rows(t, w.data(), q.data(), rows, K);
  return q;
}

// Relative RMS error of a quantize -> dequantize round trip on Gaussian weights, below a bound
// set from the format's step (measured: q8_0 0.0053, q4_0 0.085, q4_k 0.070, q6_k 0.017, with
// the numpy transcription of ggml's quantizers).
TEST(QgemmKernels, QuantizeDequantizeErrorBounds) {
  const std::int64_t rows = 8, K = 1024;
  const std::vector<float> w = normal(static_cast<std::size_t>(rows * K), 11);
  const std::pair<DType, double> bounds[] = {{DType::q8_0, 0.008}, {DType::q4_0, 0.11}, {DType::q4_k, 0.09},
                                             {DType::q6_k, 0.025}, {DType::bf16, 0.005}, {DType::f16, 0.001}};
  for (const auto& [t, bound] : bounds) {
    std::vector<float> back(w.size());
    kernels::dequantize_rows(t, quantize(t, w, rows, K).data(), back.data(), rows, K);
    double err = 0, ref = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      err += (back[i] - w[i]) * (back[i] - w[i]);
      ref += w[i] * w[i];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, bound) << dtype_name(t);
    EXPECT_GT(rel, bound / 50) << dtype_name(t) << ": suspiciously exact";
  }
  // Symmetric formats: no weight moves by more than one step of its block (q4_0 clamps +8 to +7).
  for (DType t : {DType::q8_0, DType::q4_0}) {
    const double levels = t == DType::q8_0 ? 127.0 : 8.0;
    std::vector<float> back(w.size());
    kernels::dequantize_rows(t, quantize(t, w, rows, K).data(), back.data(), rows, K);
    for (std::size_t b = 0; b < w.size() / 32; ++b) {
      float amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[b * 32 + j]));
      for (int j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(back[b * 32 + j] - w[b * 32 + j]), amax / levels * 1.01) << dtype_name(t) << " block " << b;
    }
  }
}

TEST(QgemmKernels, ZeroRowsQuantizeToZeros) {
  const std::vector<float> w(512, 0.0f);
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
    std::vector<float> back(w.size(), 1.0f);
    kernels::dequantize_rows(t, quantize(t, w, 2, 256).data(), back.data(), 2, 256);
    for (float v : back) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

constexpr DType kKernelTypes[] = {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k, DType::bf16, DType::f16};

// Every instruction set this CPU can run (the generic one always); only the forced one when
// the suite runs under TFM_ISA (its second, generic run would repeat the native run's work).
std::vector<Isa> available_isas() {
  if (std::getenv("TFM_ISA") != nullptr) return {active_isa()};
  std::vector<Isa> out{Isa::generic};
  if (cpu_best_isa() == Isa::avx2 || cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx2);
  if (cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

// The vectorized activation quantizers this CPU can run, by name.
std::vector<std::pair<const char*, kernels::qgemm_detail::PrepareActsFn>> vector_quantizers() {
  std::vector<std::pair<const char*, kernels::qgemm_detail::PrepareActsFn>> out;
  if (cpu_info().avx2) out.emplace_back("avx2", kernels::qgemm_detail::prepare_acts_avx2);
  if (cpu_info().avx512_vnni) out.emplace_back("avx512_vnni", kernels::qgemm_detail::prepare_acts_avx512_vnni);
  return out;
}

struct IsaScope {
  Isa saved = active_isa();
  explicit IsaScope(Isa isa) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved); }
};

// bf16 weights on AVX-512 run VDPBF16PS where the CPU has AVX512_BF16 and the f32 emulation
// otherwise; a CPU that has it also runs the emulation (native = false) so both are tested.
struct Bf16NativeScope {
  explicit Bf16NativeScope(bool native) { kernels::qgemm_detail::set_bf16_native_enabled(native); }
  ~Bf16NativeScope() { kernels::qgemm_detail::set_bf16_native_enabled(true); }
};
std::vector<bool> bf16_variants(DType t) {
  if (t == DType::bf16 && active_isa() == Isa::avx512 && cpu_info().avx512_bf16) return {true, false};
  return {true};
}

struct Case {
  std::int64_t K, N;
  std::vector<unsigned char> w;
  std::vector<float> x;
};

Case make_case(DType t, std::int64_t M, std::int64_t N, std::int64_t K, unsigned seed) {
  Case c{K, N, {}, normal(static_cast<std::size_t>(M * K), seed + 1)};
  c.w = quantize(t, normal(static_cast<std::size_t>(N * K), seed, 0.1f), N, K);
  c.x[0] = 3.0f;  // an outlier in the first activation block
  return c;
}

// Fast kernel == scalar twin up to float reordering of the per-block terms: the bound is a
// few ulps of the sum of |terms|, estimated from the f32 product of |x| and |dequantized w|.
TEST(QgemmKernels, EveryIsaMatchesTheScalarTwinAtOddSizes) {
  const std::vector<Isa> isas = available_isas();
  struct IntegerKernelsOnly {  // M = 33 on the integer kernels of every ISA, not the f32 GEMM
    std::int64_t saved = kernels::qgemm_dequant_min_rows();
    IntegerKernelsOnly() { kernels::set_qgemm_dequant_min_rows(std::int64_t{1} << 40); }
    ~IntegerKernelsOnly() { kernels::set_qgemm_dequant_min_rows(saved); }
  } integer_only;
  for (DType t : kKernelTypes) {
    const std::int64_t block = dtype_is_block(t) ? dtype_block_elems(t) : 16;
    // odd block counts (1, 3, 5; 9: q4_0's quads in an odd number, the last one partial) and,
    // for bf16 / f16, K with a partial vector (bf16: chunks of 32 for VDPBF16PS, then 64 for
    // its two accumulators)
    std::vector<std::int64_t> ks{block, 3 * block, 5 * block, 9 * block};
    if (!dtype_is_block(t)) ks = {1, 7, 33, 257};
    if (t == DType::bf16) ks = {1, 7, 31, 32, 33, 63, 95, 257};
    for (std::int64_t K : ks)
      // M = 5, 7, 16, 33: more rows than one register tile (the AVX-512 tiles' buffered path),
      // with a partial last tile; 33 also takes the prefill path (M >= 32).
      for (std::int64_t M : {1, 2, 5, 7, 16, 33})
        for (std::int64_t N : {1, 7, 31, 32, 33, 257}) {
          if (M * N * K > 250000) continue;  // keep the ASan run short
          const Case c = make_case(t, M, N, K, static_cast<unsigned>(M * 131 + N * 7 + K));
          std::vector<float> fast(static_cast<std::size_t>(M * N)), twin(fast.size()), mag(fast.size());
          kernels::qgemm_twin(t, M, N, K, c.x.data(), K, c.w.data(), twin.data(), N);
          std::vector<float> deq(static_cast<std::size_t>(N * K)), ax(c.x.size());
          kernels::dequantize_rows(t, c.w.data(), deq.data(), N, K);
          for (float& v : deq) v = std::fabs(v);
          for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(c.x[i]);
          kernels::gemm_rows(true, M, N, K, 1.0f, ax.data(), K, deq.data(), K, 0.0f, mag.data(), N);
          for (Isa isa : isas) {
            IsaScope scope(isa);
            for (bool native : bf16_variants(t)) {
              Bf16NativeScope bf16_native(native);
              kernels::qgemm(t, M, N, K, c.x.data(), K, c.w.data(), fast.data(), N);
              for (std::size_t i = 0; i < fast.size(); ++i)
                ASSERT_NEAR(fast[i], twin[i], 2e-6f * mag[i] + 1e-30f) << dtype_name(t) << " " << isa_name(isa)
                    << (native ? "" : " emulated") << " M=" << M << " N=" << N << " K=" << K << " at " << i;
            }
          }
        }
  }
}

// A row's output is bit-identical whether it is computed alone or among up to 40 rows (tile
// groups, the AVX-512 tiles' buffered path from 5 rows, their prefill use from 32), on every
// ISA, for odd block counts (a q8_0 / q4_0 pair half empty, k-quant minimums padded) and an odd
// N (a weight tile of one row).
TEST(QgemmKernels, RowsAreIndependentOfTheBatch) {
  const std::int64_t N = 33;
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (DType t : kKernelTypes)
      for (bool native : bf16_variants(t)) {
        Bf16NativeScope bf16_native(native);
        const std::int64_t block = dtype_is_block(t) ? dtype_block_elems(t) : 16;
        std::vector<std::int64_t> ks{3 * block, 5 * block, 9 * block};
        if (t == DType::bf16) ks.push_back(37);  // a partial VDPBF16PS chunk after one whole pair of them
        for (std::int64_t K : ks)
          for (std::int64_t M : {5, 16, 40}) {
            const Case c = make_case(t, M, N, K, 77);
            std::vector<float> all(static_cast<std::size_t>(M * N)), one(static_cast<std::size_t>(N));
            kernels::qgemm(t, M, N, K, c.x.data(), K, c.w.data(), all.data(), N);
            // prefill elsewhere dequantizes tiles into the f32 GEMM: no invariance promised there
            const bool tiles_at_prefill = isa == Isa::avx512 && ((cpu_info().avx512_vnni && dtype_is_block(t)) ||
                                                                 (t == DType::bf16 && kernels::qgemm_detail::bf16_native_active()));
            if (M == 40 && !tiles_at_prefill) continue;
            for (std::int64_t m = 0; m < M; ++m) {
              kernels::qgemm(t, 1, N, K, c.x.data() + m * K, K, c.w.data(), one.data(), N);
              for (std::int64_t n = 0; n < N; ++n)
                ASSERT_EQ(one[static_cast<std::size_t>(n)], all[static_cast<std::size_t>(m * N + n)])
                    << dtype_name(t) << " " << isa_name(isa) << (native ? "" : " emulated") << " K=" << K << " M=" << M
                    << " row " << m << " col " << n;
            }
          }
      }
  }
}

// Many rows (a batch of pictures) run the AVX-512 VNNI tiles in blocks of rows whose
// activations stay in L2 (qgemm_blocks_avx512.cpp: 128 rows at K = 2048): 300 rows span three
// blocks, and each row is still what it is alone, for every block type (and for the native
// bf16 tiles, which sweep weight blocks instead).
TEST(QgemmKernels, RowsAreIndependentOfTheBatchAcrossActivationBlocks) {
  if (!cpu_info().avx512_vnni) GTEST_SKIP() << "the blocked tiles need AVX-512 VNNI";
  IsaScope scope(Isa::avx512);
  Bf16NativeScope bf16_native(true);
  const std::int64_t M = 300, N = 9, K = 2048;
  for (DType t : kKernelTypes) {
    if (!dtype_is_block(t) && !(t == DType::bf16 && kernels::qgemm_detail::bf16_native_active())) continue;
    const Case c = make_case(t, M, N, K, 78);
    std::vector<float> all(static_cast<std::size_t>(M * N)), one(static_cast<std::size_t>(N));
    kernels::qgemm(t, M, N, K, c.x.data(), K, c.w.data(), all.data(), N);
    for (std::int64_t m = 0; m < M; ++m) {
      kernels::qgemm(t, 1, N, K, c.x.data() + m * K, K, c.w.data(), one.data(), N);
      for (std::int64_t n = 0; n < N; ++n)
        ASSERT_EQ(one[static_cast<std::size_t>(n)], all[static_cast<std::size_t>(m * N + n)])
            << dtype_name(t) << " row " << m << " col " << n;
    }
  }
}

// The AVX-512 activation quantizer (qgemm_blocks_avx512.cpp) gives the scalar quantize_acts'
// blocks bit for bit: int8 values, scales and group sums, with exact rounding ties (x = k + 0.5
// steps), an all-zero block, a row stride larger than K and K with an odd count of 16-groups.
TEST(QgemmKernels, VectorActivationQuantizationEqualsTheScalarOne) {
  if (vector_quantizers().empty()) GTEST_SKIP() << "no AVX2";
  for (const auto& [isa, prepare] : vector_quantizers())
    for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k}) {
      const std::int64_t block = t == DType::q8_0 || t == DType::q4_0 ? 32 : 256;
      // M = 70 rows of 256: split over the threads (tasks of >= 8K elements)
      for (std::int64_t K : {block, 3 * block, 5 * block}) {
        const std::int64_t M = K == 3 * block ? 70 : 3, ldx = K + 5;
        std::vector<float> x = normal(static_cast<std::size_t>(M * ldx), 21);
        for (std::int64_t j = 0; j < block; ++j) x[static_cast<std::size_t>(ldx + j)] = 0.0f;  // row 1, block 0: zeros
        for (std::int64_t j = 0; j < block; ++j)  // row 2, block 0: max 127 steps, ties at k + 0.5
          x[static_cast<std::size_t>(2 * ldx + j)] = j == 0 ? 127.0f : static_cast<float>(j % 17) - 8.5f;
        kernels::qgemm_detail::QuantizedActs want, got;
        kernels::qgemm_detail::quantize_acts(t, M, K, x.data(), ldx, want);
        prepare(t, M, K, x.data(), ldx, got);
        EXPECT_EQ(got.q, want.q) << isa << " " << dtype_name(t) << " K=" << K;
        EXPECT_EQ(got.d, want.d) << isa << " " << dtype_name(t) << " K=" << K;
        EXPECT_EQ(got.sum32, want.sum32) << isa << " " << dtype_name(t) << " K=" << K;
        EXPECT_EQ(got.bsum16, want.bsum16) << isa << " " << dtype_name(t) << " K=" << K;
      }
    }
}

// Against the f32-dequantized reference: the only approximation left is the activations'
// int8 rounding (half a step of max|x| / 127 per element), bounded by
// Σ_k |w_k| * max|x_block| / 254 per output; bf16 weights round the activations to bf16
// (relative error <= 2^-9 per element: Σ_k |w_k x_k| / 512); f16 uses f32 activations (ulps only).
TEST(QgemmKernels, WithinActivationQuantizationErrorOfTheNaiveReference) {
  const std::int64_t M = 3, N = 17, K = 768;
  for (DType t : kKernelTypes) {
    const Case c = make_case(t, M, N, dtype_is_block(t) && dtype_block_elems(t) == 256 ? 1024 : K, 5);
    const std::int64_t k = c.K;
    std::vector<float> fast(static_cast<std::size_t>(M * N)), naive(fast.size()), deq(static_cast<std::size_t>(N * k));
    kernels::qgemm(t, M, N, k, c.x.data(), k, c.w.data(), fast.data(), N);
    kernels::qgemm_naive(t, M, N, k, c.x.data(), k, c.w.data(), naive.data(), N);
    kernels::dequantize_rows(t, c.w.data(), deq.data(), N, k);
    const std::int64_t block = t == DType::q8_0 || t == DType::q4_0 ? 32 : dtype_is_block(t) ? 256 : 1;
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t n = 0; n < N; ++n) {
        double bound = 0;
        for (std::int64_t b = 0; b < k / block; ++b) {
          float amax = 0;
          for (std::int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(c.x[m * k + b * block + j]));
          for (std::int64_t j = 0; j < block; ++j)
            bound += std::fabs(deq[n * k + b * block + j]) *
                     (block > 1 ? amax / 254.0 * 1.001 : (t == DType::bf16 ? 1.0 / 512 : 1e-6) * std::fabs(c.x[m * k + b * block + j]));
        }
        ASSERT_NEAR(fast[m * N + n], naive[m * N + n], bound + 1e-5) << dtype_name(t) << " m=" << m << " n=" << n;
      }
  }
}

// Prefill (M >= 32): the automatic path (integer tiles on AVX-512 VNNI, dequantized tiles + f32
// GEMM elsewhere) and the forced dequantized path both within the activation-quantization error
// of the naive reference.
TEST(QgemmKernels, PrefillPathMatchesTheNaiveReference) {
  const std::int64_t M = 40, N = 37, K = 256;
  const std::int64_t saved = kernels::qgemm_dequant_min_rows();
  for (std::int64_t min_rows : {std::int64_t{-1}, std::int64_t{17}}) {
    kernels::set_qgemm_dequant_min_rows(min_rows);
    for (DType t : kKernelTypes) {
      const Case c = make_case(t, M, N, K, 9);
      std::vector<float> got(static_cast<std::size_t>(M * N)), want(got.size());
      kernels::qgemm(t, M, N, K, c.x.data(), K, c.w.data(), got.data(), N);
      kernels::qgemm_naive(t, M, N, K, c.x.data(), K, c.w.data(), want.data(), N);
      std::vector<float> deq(static_cast<std::size_t>(N * K));
      kernels::dequantize_rows(t, c.w.data(), deq.data(), N, K);
      const std::int64_t block = t == DType::q8_0 || t == DType::q4_0 ? 32 : 256;
      for (std::int64_t m = 0; m < M; ++m)
        for (std::int64_t n = 0; n < N; ++n) {
          // int8 activations: half a step of max|x| / 127 per element (as the test above)
          double bound = 1e-4;
          for (std::int64_t j = 0; t == DType::bf16 && j < K; ++j)  // bf16-rounded activations
            bound += std::fabs(deq[n * K + j] * c.x[m * K + j]) / 512;
          for (std::int64_t b = 0; dtype_is_block(t) && b < K / block; ++b) {
            float amax = 0;
            for (std::int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(c.x[m * K + b * block + j]));
            for (std::int64_t j = 0; j < block; ++j) bound += std::fabs(deq[n * K + b * block + j]) * amax / 254.0 * 1.001;
          }
          ASSERT_NEAR(got[m * N + n], want[m * N + n], bound) << dtype_name(t) << " min_rows " << min_rows << " m=" << m << " n=" << n;
        }
    }
  }
  kernels::set_qgemm_dequant_min_rows(saved);
}

// bf16 weights multiply bf16(x) (round to nearest even, as the training GEMM rounds): every
// path (VDPBF16PS, the emulation, each ISA's) equals the f32 product of the dequantized weights
// with the rounded activations up to f32 summation order, and is not the product with the
// unrounded ones (x chosen so most elements are not bf16 values).
TEST(QgemmKernels, Bf16WeightsMultiplyTheActivationsRoundedToBf16) {
  const std::int64_t M = 3, N = 9, K = 77;
  const Case c = make_case(DType::bf16, M, N, K, 31);
  std::vector<float> xr = c.x;
  kernels::round_bf16_inplace(xr.data(), static_cast<std::int64_t>(xr.size()));
  std::vector<float> rounded(static_cast<std::size_t>(M * N)), plain(rounded.size()), got(rounded.size()), mag(rounded.size());
  kernels::qgemm_naive(DType::bf16, M, N, K, xr.data(), K, c.w.data(), rounded.data(), N);
  kernels::qgemm_naive(DType::bf16, M, N, K, c.x.data(), K, c.w.data(), plain.data(), N);
  std::vector<float> deq(static_cast<std::size_t>(N * K)), ax(c.x.size());
  kernels::dequantize_rows(DType::bf16, c.w.data(), deq.data(), N, K);
  for (float& v : deq) v = std::fabs(v);
  for (std::size_t i = 0; i < ax.size(); ++i) ax[i] = std::fabs(c.x[i]);
  kernels::gemm_rows(true, M, N, K, 1.0f, ax.data(), K, deq.data(), K, 0.0f, mag.data(), N);
  for (Isa isa : available_isas()) {
    IsaScope scope(isa);
    for (bool native : bf16_variants(DType::bf16)) {
      Bf16NativeScope bf16_native(native);
      kernels::qgemm(DType::bf16, M, N, K, c.x.data(), K, c.w.data(), got.data(), N);
      int away_from_plain = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], rounded[i], 1e-6f * mag[i]) << isa_name(isa) << (native ? "" : " emulated") << " at " << i;
        away_from_plain += std::fabs(got[i] - plain[i]) > 4e-6f * mag[i];
      }
      EXPECT_GT(away_from_plain, static_cast<int>(got.size()) / 2) << isa_name(isa) << ": activations not rounded?";
    }
  }
}

}  // namespace
}  // namespace tfm
