// Fast nn kernels (softmax family, cross-entropy, LayerNorm, RMSNorm, embedding, dropout)
// against their naive scalar twins, for every ISA this CPU supports, at row lengths around
// the vector widths (1, 7, 31, 32, 33, 257, 1024).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/norm.h"
#include "kernels/optimizer.h"
#include "kernels/random.h"
#include "kernels/softmax.h"
#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

const std::int64_t kCols[] = {1, 7, 31, 32, 33, 257, 1024};
constexpr std::int64_t kRows = 5;

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::generic};
  if (cpu_best_isa() >= Isa::avx2) out.push_back(Isa::avx2);
  if (cpu_best_isa() >= Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

// Runs body(isa, cols, label) for every supported ISA and every test width; restores the ISA.
void for_each_isa_and_width(const std::function<void(std::int64_t cols, const std::string& label)>& body) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (std::int64_t cols : kCols) body(cols, std::string(isa_name(isa)) + " cols=" + std::to_string(cols));
  }
  set_active_isa(saved);
}

std::vector<float> rand_vec(std::int64_t n, std::uint64_t seed, float lo, float hi) {
  return test::random_tensor({n}, seed, lo, hi).to_floats();
}

Tensor as_tensor(const std::vector<float>& v) { return Tensor::from_floats(v, {static_cast<std::int64_t>(v.size())}); }

void expect_vec_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                      const std::string& what) {
  test::expect_close(as_tensor(got), as_tensor(want), rtol, atol, what);
}

}  // namespace

TEST(NnKernels, SoftmaxAndLogSoftmaxMatchNaive) {
  for_each_isa_and_width([](std::int64_t cols, const std::string& label) {
    const std::int64_t n = kRows * cols;
    const auto x = rand_vec(n, 1 + static_cast<std::uint64_t>(cols), -8.0f, 8.0f);
    const auto g = rand_vec(n, 100 + static_cast<std::uint64_t>(cols), -1.0f, 1.0f);
    std::vector<float> y(n), yn(n), dx(n), dxn(n);
    kernels::softmax_forward(x.data(), y.data(), kRows, cols);
    kernels::softmax_forward_naive(x.data(), yn.data(), kRows, cols);
    expect_vec_close(y, yn, 1e-5, 1e-7, "softmax " + label);
    kernels::softmax_backward(yn.data(), g.data(), dx.data(), kRows, cols);
    kernels::softmax_backward_naive(yn.data(), g.data(), dxn.data(), kRows, cols);
    expect_vec_close(dx, dxn, 1e-4, 1e-6, "softmax backward " + label);

    kernels::log_softmax_forward(x.data(), y.data(), kRows, cols);
    kernels::log_softmax_forward_naive(x.data(), yn.data(), kRows, cols);
    expect_vec_close(y, yn, 1e-5, 1e-5, "log_softmax " + label);
    kernels::log_softmax_backward(yn.data(), g.data(), dx.data(), kRows, cols);
    kernels::log_softmax_backward_naive(yn.data(), g.data(), dxn.data(), kRows, cols);
    expect_vec_close(dx, dxn, 1e-4, 1e-5, "log_softmax backward " + label);
  });
}

TEST(NnKernels, SoftmaxIsStableForHugeLogits) {
  for_each_isa_and_width([](std::int64_t cols, const std::string& label) {
    std::vector<float> x(static_cast<std::size_t>(cols)), y(x.size()), yn(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 1000.0f + static_cast<float>(i % 5);
    kernels::softmax_forward(x.data(), y.data(), 1, cols);
    kernels::softmax_forward_naive(x.data(), yn.data(), 1, cols);
    expect_vec_close(y, yn, 1e-5, 1e-7, "softmax of large logits " + label);
  });
}

TEST(NnKernels, CrossEntropyMatchesNaive) {
  for (float eps : {0.0f, 0.1f}) {
    for_each_isa_and_width([eps](std::int64_t cols, const std::string& label) {
      const std::int64_t n = kRows * cols;
      const auto x = rand_vec(n, 7 + static_cast<std::uint64_t>(cols), -6.0f, 6.0f);
      std::vector<std::int64_t> t(kRows);
      for (std::int64_t r = 0; r < kRows; ++r) t[static_cast<std::size_t>(r)] = (r * 13 + 3) % cols;
      t[1] = -100;  // one ignored row
      const auto scale = rand_vec(kRows, 9, 0.5f, 2.0f);
      std::vector<float> loss(kRows), lossn(kRows), lse(kRows), lsen(kRows), dx(n), dxn(n);
      kernels::cross_entropy_forward(x.data(), t.data(), loss.data(), lse.data(), kRows, cols, -100, eps);
      kernels::cross_entropy_forward_naive(x.data(), t.data(), lossn.data(), lsen.data(), kRows, cols, -100, eps);
      const std::string what = label + " eps=" + std::to_string(eps);
      expect_vec_close(loss, lossn, 1e-5, 1e-5, "ce loss " + what);
      expect_vec_close(lse, lsen, 1e-6, 1e-6, "ce lse " + what);
      EXPECT_EQ(loss[1], 0.0f);
      kernels::cross_entropy_backward(x.data(), t.data(), lsen.data(), scale.data(), dx.data(), kRows, cols, -100, eps);
      kernels::cross_entropy_backward_naive(x.data(), t.data(), lsen.data(), scale.data(), dxn.data(), kRows, cols,
                                            -100, eps);
      expect_vec_close(dx, dxn, 1e-5, 1e-6, "ce backward " + what);
    });
  }
}

TEST(NnKernels, LayerNormMatchesNaive) {
  for (int variant = 0; variant < 3; ++variant) {  // weight+bias, weight only, neither
    for_each_isa_and_width([variant](std::int64_t cols, const std::string& label0) {
      const std::string label = label0 + " variant=" + std::to_string(variant);
      const std::int64_t n = kRows * cols;
      const auto x = rand_vec(n, 11 + static_cast<std::uint64_t>(cols), -3.0f, 5.0f);
      const auto g = rand_vec(n, 12 + static_cast<std::uint64_t>(cols), -1.0f, 1.0f);
      const auto wv = rand_vec(cols, 13, 0.5f, 1.5f), bv = rand_vec(cols, 14, -0.5f, 0.5f);
      const float* w = variant < 2 ? wv.data() : nullptr;
      const float* b = variant < 1 ? bv.data() : nullptr;
      std::vector<float> y(n), yn(n), m(kRows), mn(kRows), rs(kRows), rsn(kRows);
      kernels::layer_norm_forward(x.data(), w, b, y.data(), m.data(), rs.data(), kRows, cols, 1e-5f);
      kernels::layer_norm_forward_naive(x.data(), w, b, yn.data(), mn.data(), rsn.data(), kRows, cols, 1e-5f);
      expect_vec_close(y, yn, 1e-4, 1e-5, "layer_norm " + label);
      expect_vec_close(m, mn, 1e-5, 1e-6, "layer_norm mean " + label);
      expect_vec_close(rs, rsn, 1e-5, 1e-6, "layer_norm rstd " + label);
      std::vector<float> dx(n), dxn(n), dw(cols), dwn(cols), db(cols), dbn(cols);
      kernels::layer_norm_backward(x.data(), w, mn.data(), rsn.data(), g.data(), dx.data(), dw.data(), db.data(),
                                   kRows, cols);
      kernels::layer_norm_backward_naive(x.data(), w, mn.data(), rsn.data(), g.data(), dxn.data(), dwn.data(),
                                         dbn.data(), kRows, cols);
      expect_vec_close(dx, dxn, 1e-4, 1e-5, "layer_norm dx " + label);
      expect_vec_close(dw, dwn, 1e-4, 1e-5, "layer_norm dw " + label);
      expect_vec_close(db, dbn, 1e-5, 1e-6, "layer_norm db " + label);
    });
  }
}

TEST(NnKernels, RmsNormMatchesNaive) {
  for (bool with_w : {true, false}) {
    for_each_isa_and_width([with_w](std::int64_t cols, const std::string& label0) {
      const std::string label = label0 + (with_w ? " weight" : " no weight");
      const std::int64_t n = kRows * cols;
      const auto x = rand_vec(n, 21 + static_cast<std::uint64_t>(cols), -3.0f, 5.0f);
      const auto g = rand_vec(n, 22 + static_cast<std::uint64_t>(cols), -1.0f, 1.0f);
      const auto wv = rand_vec(cols, 23, 0.5f, 1.5f);
      const float* w = with_w ? wv.data() : nullptr;
      std::vector<float> y(n), yn(n), rs(kRows), rsn(kRows), dx(n), dxn(n), dw(cols), dwn(cols);
      kernels::rms_norm_forward(x.data(), w, y.data(), rs.data(), kRows, cols, 1e-6f);
      kernels::rms_norm_forward_naive(x.data(), w, yn.data(), rsn.data(), kRows, cols, 1e-6f);
      expect_vec_close(y, yn, 1e-5, 1e-6, "rms_norm " + label);
      expect_vec_close(rs, rsn, 1e-5, 1e-6, "rms_norm rstd " + label);
      kernels::rms_norm_backward(x.data(), w, rsn.data(), g.data(), dx.data(), dw.data(), kRows, cols);
      kernels::rms_norm_backward_naive(x.data(), w, rsn.data(), g.data(), dxn.data(), dwn.data(), kRows, cols);
      expect_vec_close(dx, dxn, 1e-4, 1e-5, "rms_norm dx " + label);
      expect_vec_close(dw, dwn, 1e-4, 1e-5, "rms_norm dw " + label);
    });
  }
}

TEST(NnKernels, NormWeightGradSpanningManyBlocksMatchesNaive) {
  // 300 rows: several 64-row blocks plus a partial one.
  const std::int64_t rows = 300, cols = 33, n = rows * cols;
  const auto x = rand_vec(n, 31, -2.0f, 2.0f), g = rand_vec(n, 32, -1.0f, 1.0f), w = rand_vec(cols, 33, 0.5f, 1.5f);
  std::vector<float> y(n), m(rows), rs(rows), dw(cols), dwn(cols), db(cols), dbn(cols);
  kernels::layer_norm_forward_naive(x.data(), w.data(), nullptr, y.data(), m.data(), rs.data(), rows, cols, 1e-5f);
  kernels::layer_norm_backward(x.data(), w.data(), m.data(), rs.data(), g.data(), nullptr, dw.data(), db.data(), rows,
                               cols);
  kernels::layer_norm_backward_naive(x.data(), w.data(), m.data(), rs.data(), g.data(), nullptr, dwn.data(),
                                     dbn.data(), rows, cols);
  expect_vec_close(dw, dwn, 1e-4, 1e-5, "layer_norm dw, 300 rows");
  expect_vec_close(db, dbn, 1e-4, 1e-5, "layer_norm db, 300 rows");
}

TEST(NnKernels, EmbeddingBackwardEqualsNaiveBitwise) {
  const std::int64_t n = 257, V = 31, C = 33;
  std::vector<std::int64_t> ids(n);
  for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 7 + i / 5) % V;
  const auto g = rand_vec(n * C, 41, -1.0f, 1.0f);
  for (std::int64_t pad : {std::int64_t{-1}, std::int64_t{3}}) {
    std::vector<float> d(V * C), dn(V * C);
    kernels::embedding_backward(ids.data(), g.data(), d.data(), n, V, C, pad);
    kernels::embedding_backward_naive(ids.data(), g.data(), dn.data(), n, V, C, pad);
    test::expect_bitwise_equal(as_tensor(d), as_tensor(dn), "embedding backward pad=" + std::to_string(pad));
  }
}

TEST(NnKernels, AdamWUpdateMatchesNaiveOnEveryIsa) {
  const Isa saved = active_isa();
  kernels::AdamWScalars k;
  k.decay = 0.999f, k.b1 = 0.9f, k.a1 = 0.1f, k.b2 = 0.98f, k.a2 = 0.02f;
  k.step_size = 3e-3f, k.bc2_sqrt = 0.3f, k.eps = 1e-9f;
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (bool decay : {false, true})
      for (std::int64_t n : {1, 7, 15, 16, 17, 33, 1000}) {
        k.apply_decay = decay;
        const auto w0 = rand_vec(n, 61, -1.0f, 1.0f), g = rand_vec(n, 62, -2.0f, 2.0f);
        const auto m0 = rand_vec(n, 63, -0.1f, 0.1f), v0 = rand_vec(n, 64, 0.0f, 0.05f);
        auto w = w0, m = m0, v = v0, wn = w0, mn = m0, vn = v0;
        kernels::adamw_update(w.data(), g.data(), m.data(), v.data(), n, k);
        kernels::adamw_update_naive(wn.data(), g.data(), mn.data(), vn.data(), n, k);
        const std::string label = std::string(isa_name(isa)) + " n=" + std::to_string(n) + (decay ? " decay" : "");
        test::expect_bitwise_equal(as_tensor(w), as_tensor(wn), "adamw w " + label);
        test::expect_bitwise_equal(as_tensor(m), as_tensor(mn), "adamw m " + label);
        test::expect_bitwise_equal(as_tensor(v), as_tensor(vn), "adamw v " + label);
        EXPECT_NE(w, w0) << label;  // it did update
      }
  }
  set_active_isa(saved);
}

TEST(NnKernels, PhiloxBlocksMatchScalarPhiloxOnEveryIsa) {
  const Isa saved = active_isa();
  // Counts around the vector widths (4 and 8 counters); a start just below 2^32 makes the
  // counter's low word wrap into its high word inside one vector.
  const std::uint64_t firsts[] = {0, 5, (std::uint64_t{1} << 32) - 3, 0x123456789abcULL};
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    for (std::uint64_t first : firsts)
      for (std::int64_t n : {1, 3, 4, 7, 8, 9, 17, 64}) {
        std::vector<std::uint32_t> got(static_cast<std::size_t>(4 * n));
        kernels::philox4x32_blocks(0xfeedbeefcafe1234ULL, 0x500000002ULL, first, n, got.data());
        for (std::int64_t j = 0; j < n; ++j) {
          const auto want = kernels::philox4x32(0xfeedbeefcafe1234ULL, 0x500000002ULL, first + static_cast<std::uint64_t>(j));
          for (int w = 0; w < 4; ++w)
            ASSERT_EQ(got[static_cast<std::size_t>(4 * j + w)], want[static_cast<std::size_t>(w)])
                << isa_name(isa) << " first " << first << " n " << n << " block " << j << " word " << w;
        }
      }
  }
  set_active_isa(saved);
}

TEST(NnKernels, UniformThresholdIsExactlyTheFloatComparison) {
  for (float p : {0.0f, 1e-9f, 0.1f, 0.3f, 0.5f, 0.7f, 0.999999f, 1.0f}) {
    const std::uint32_t t = kernels::uniform_threshold(p);
    for (std::uint32_t u : {0u, 1u, t > 0 ? t - 1 : 0u, t, t + 1, 16777215u}) {
      if (u > 16777215u) continue;
      EXPECT_EQ(kernels::uniform_from_bits(u << 8) >= p, u >= t) << "p " << p << " u " << u;
    }
  }
}

TEST(NnKernels, DropoutMatchesNaiveAtAnyOffset) {
  for (std::int64_t n : {1, 7, 31, 32, 33, 257, 100000}) {
    const auto x = rand_vec(n, 51, -1.0f, 1.0f);
    for (std::uint64_t offset : {std::uint64_t{0}, std::uint64_t{3}, std::uint64_t{1} << 33}) {
      std::vector<float> y(n), yn(n);
      kernels::dropout_apply(x.data(), y.data(), n, 0.3f, 1.0f / 0.7f, 77, offset);
      kernels::dropout_apply_naive(x.data(), yn.data(), n, 0.3f, 1.0f / 0.7f, 77, offset);
      test::expect_bitwise_equal(as_tensor(y), as_tensor(yn), "dropout n=" + std::to_string(n));
    }
  }
}

TEST(NnKernels, SoftmaxMasksAndNaNsLikePyTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for_each_isa_and_width([&](std::int64_t cols, const std::string& label) {
    // Row 0: -inf masks on every other element (first one kept): masked -> exactly 0.
    // Row 1: one NaN -> the whole row is NaN. Row 2: all -inf -> NaN (0/0), as PyTorch.
    std::vector<float> x(static_cast<std::size_t>(3 * cols));
    for (std::int64_t c = 0; c < cols; ++c) {
      x[static_cast<std::size_t>(c)] = c % 2 ? -inf : 0.1f * static_cast<float>(c);
      x[static_cast<std::size_t>(cols + c)] = c == cols / 2 ? nan : 1.0f;
      x[static_cast<std::size_t>(2 * cols + c)] = -inf;
    }
    std::vector<float> y(x.size()), yn(x.size()), ly(x.size()), loss(3), lse(3);
    kernels::softmax_forward(x.data(), y.data(), 3, cols);
    kernels::softmax_forward_naive(x.data(), yn.data(), 3, cols);
    kernels::log_softmax_forward(x.data(), ly.data(), 3, cols);
    expect_vec_close(y, yn, 1e-5, 1e-7, "masked softmax " + label);
    for (std::int64_t c = 0; c < cols; ++c) {
      if (c % 2) {
        EXPECT_EQ(y[static_cast<std::size_t>(c)], 0.0f) << label;
        EXPECT_EQ(ly[static_cast<std::size_t>(c)], -inf) << label;
      }
      EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(cols + c)])) << label;
      EXPECT_TRUE(std::isnan(ly[static_cast<std::size_t>(cols + c)])) << label;
      EXPECT_TRUE(std::isnan(y[static_cast<std::size_t>(2 * cols + c)])) << label;
    }
    const std::int64_t t[3] = {0, 0, 0};
    kernels::cross_entropy_forward(x.data(), t, loss.data(), lse.data(), 3, cols, -100, 0.0f);
    EXPECT_TRUE(std::isnan(loss[1])) << label;
  });
}
