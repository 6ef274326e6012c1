// Parity with PyTorch 1.13 for bf16 mixed precision (fixtures: tools/reference/ref_bf16.py):
//   - our fp32 -> bf16 rounding equals torch's Tensor.bfloat16() bit for bit (ties included;
//     denormals excepted: we flush them to zero as VCVTNE2PS2BF16 does, torch keeps them);
//   - the bf16 GEMM equals the exact product of the bf16-rounded operands within fp32
//     accumulation error, and rounded to bf16 it matches torch's CPU bf16 matmul within one
//     bf16 ulp (torch rounds its fp32 sums to bf16; the summation orders differ);
//   - a Linear in bf16 mode against torch.autocast("cpu", bfloat16): forward within one bf16
//     ulp of torch's bf16 output, gradients within bf16 operand rounding of torch's.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/gemm_bf16.h"
#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(ParityBf16, RoundingMatchesTorch) {
  const SafetensorsFile f = test::load_fixture("bf16_matmul");
  const std::vector<float> x = test::fixture_tensor(f, "x").to_floats(), want = test::fixture_tensor(f, "x_bf16").to_floats();
  std::size_t compared = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::fabs(x[i]) < 1.1754944e-38f) continue;  // fp32 denormal: we flush, torch keeps
    ++compared;
    ASSERT_EQ(kernels::round_bf16(x[i]), want[i]) << "x = " << x[i] << " at " << i;
  }
  EXPECT_GT(compared, 8000u);
}

TEST(ParityBf16, MatmulMatchesTorchBf16Matmul) {
  const SafetensorsFile f = test::load_fixture("bf16_matmul");
  const std::vector<float> a = test::fixture_tensor(f, "a").to_floats(), b = test::fixture_tensor(f, "b").to_floats();
  const std::vector<float> torch_y = test::fixture_tensor(f, "y_torch_bf16").to_floats();
  const std::vector<float> exact = test::fixture_tensor(f, "y_exact").to_floats();
  const std::int64_t M = 37, K = 130, N = 45;
  std::vector<float> y(static_cast<std::size_t>(M * N));
  kernels::gemm_bf16(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, y.data(), N);
  std::size_t same = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    double abs_sum = 0;
    const std::size_t r = i / N, c = i % N;
    for (std::int64_t k = 0; k < K; ++k)
      abs_sum += std::fabs(kernels::round_bf16(a[r * K + static_cast<std::size_t>(k)]) *
                           kernels::round_bf16(b[static_cast<std::size_t>(k) * N + c]));
    ASSERT_LE(std::fabs(y[i] - exact[i]), 1.02 * K * std::ldexp(1.0, -24) * abs_sum) << i;
    const float ours = kernels::round_bf16(y[i]);
    ASSERT_LE(std::fabs(ours - torch_y[i]), std::ldexp(std::fabs(torch_y[i]), -7) + 1e-6 * abs_sum) << i;
    same += ours == torch_y[i];
  }
  EXPECT_GT(same, y.size() * 9 / 10) << "fewer than 90% bit-equal after rounding to bf16";
}

TEST(ParityBf16, LinearMatchesTorchAutocast) {
  const SafetensorsFile f = test::load_fixture("bf16_matmul");
  Tensor x = test::fixture_tensor(f, "xl").requires_grad_(), w = test::fixture_tensor(f, "wl").requires_grad_();
  Tensor y;
  {
    const PrecisionScope bf16(Precision::bf16);
    y = linear(x, w, Tensor());
    backward(y, test::fixture_tensor(f, "gl"));
  }
  // torch's autocast output is bf16 (one rounding of ~2^-9 relative); gradients: torch
  // computes them in bf16 too (rounded results), ours in fp32 from bf16 operands.
  test::expect_close(y, test::fixture_tensor(f, "yl"), 1.0 / 128, 1e-2, "y");
  test::expect_close(x.grad(), test::fixture_tensor(f, "grad.xl"), 1.0 / 64, 5e-2, "grad xl");
  test::expect_close(w.grad(), test::fixture_tensor(f, "grad.wl"), 1.0 / 64, 5e-2, "grad wl");
}
