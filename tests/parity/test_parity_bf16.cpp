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
#include <iostream>

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

// Against torch's bf16 matmul contract (bf16 operands, fp32 sums, one rounding to bf16),
// computed by the CPU-independent reference ref_bf16.py writes; against torch's native bf16
// matmul where it keeps that contract (AVX-512 CPUs: oneDNN). Where it does not (AVX2-only
// CPUs: a fallback that rounds its running sums to bf16), ours must be at least as close to the
// exact product as torch's own result is.
TEST(ParityBf16, MatmulMatchesTorchBf16Matmul) {
  const SafetensorsFile f = test::load_fixture("bf16_matmul");
  const std::vector<float> a = test::fixture_tensor(f, "a").to_floats(), b = test::fixture_tensor(f, "b").to_floats();
  const std::vector<float> torch_native = test::fixture_tensor(f, "y_torch_bf16").to_floats();
  const std::vector<float> torch_y = test::fixture_tensor(f, "y_torch_fp32acc").to_floats();
  const bool native_keeps_contract = test::fixture_tensor(f, "torch_bf16_accumulates_in_fp32").to_floats()[0] != 0.0f;
  const std::vector<float> exact = test::fixture_tensor(f, "y_exact").to_floats();
  const std::int64_t M = 37, K = 130, N = 45;
  std::vector<float> y(static_cast<std::size_t>(M * N));
  kernels::gemm_bf16(false, false, M, N, K, 1.0f, a.data(), K, b.data(), N, 0.0f, y.data(), N);
  std::size_t same = 0, same_native = 0;
  double ours_err = 0, torch_err = 0;
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
    if (native_keeps_contract) {
      ASSERT_LE(std::fabs(ours - torch_native[i]), std::ldexp(std::fabs(torch_native[i]), -7) + 1e-6 * abs_sum) << i;
    }
    same_native += ours == torch_native[i];
    ours_err = std::max(ours_err, std::fabs(static_cast<double>(ours) - exact[i]));
    torch_err = std::max(torch_err, std::fabs(static_cast<double>(torch_native[i]) - exact[i]));
  }
  EXPECT_GT(same, y.size() * 9 / 10) << "fewer than 90% bit-equal after rounding to bf16";
  if (native_keeps_contract) {
    EXPECT_GT(same_native, y.size() * 9 / 10) << "fewer than 90% bit-equal to torch's native bf16 matmul";
  } else {
    EXPECT_LE(ours_err, torch_err) << "torch's bf16 fallback is closer to the exact product than ours";
  }
  std::cout << "torch's native bf16 matmul on this CPU " << (native_keeps_contract ? "keeps" : "does not keep")
            << " fp32 accumulation; max |error| ours " << ours_err << ", torch's " << torch_err << "\n";
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
