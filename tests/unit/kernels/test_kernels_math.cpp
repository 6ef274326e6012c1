// Fast kernels vs their naive twins (elementwise, activation, reduce) for every ISA this CPU
// runs, at sizes around the vector widths, plus thread-count invariance of the reductions.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;
namespace k = tfm::kernels;

namespace {

const std::vector<std::int64_t> kSizes = {1, 7, 31, 32, 33, 257, 4099};

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::generic};
  if (static_cast<int>(cpu_best_isa()) >= static_cast<int>(Isa::avx2)) out.push_back(Isa::avx2);
  if (cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

// Runs the body under each supported ISA, restoring the active one afterwards.
template <class Fn>
void for_each_isa(Fn fn) {
  const Isa saved = active_isa();
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    fn(isa);
  }
  set_active_isa(saved);
}

std::vector<float> randv(std::int64_t n, std::uint64_t seed, float lo, float hi) {
  return Tensor::uniform({n}, seed, lo, hi).to_floats();
}

// |a - b| <= atol + rtol |b| everywhere; reports the first failure.
void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (std::isnan(want[i]) ? !std::isnan(got[i]) : !(d <= atol + rtol * std::fabs(want[i]) || got[i] == want[i])) {
      ADD_FAILURE() << what << " [" << i << "/" << got.size() << "] got " << got[i] << " want " << want[i];
      return;
    }
  }
}

}  // namespace

TEST(KernelElementwise, BinaryRunMatchesNaiveForEveryStridePattern) {
  for_each_isa([](Isa isa) {
    for (std::int64_t n : kSizes) {
      const auto a = randv(n, 1, -2, 2), b = randv(n, 2, 0.5f, 3);
      for (auto op : {k::BinaryOp::add, k::BinaryOp::sub, k::BinaryOp::mul, k::BinaryOp::div}) {
        for (int pattern = 0; pattern < 4; ++pattern) {
          const std::int64_t sa = pattern & 1, sb = (pattern >> 1) & 1;
          std::vector<float> got(n), want(n);
          k::binary_run_kernel()(op, a.data(), sa, b.data(), sb, got.data(), n);
          k::naive::binary_run(op, a.data(), sa, b.data(), sb, want.data(), n);
          // Exact: one IEEE operation per element either way.
          EXPECT_EQ(got, want) << isa_name(isa) << " op " << static_cast<int>(op) << " n " << n << " strides " << sa
                               << sb;
        }
      }
    }
  });
}

TEST(KernelElementwise, AxpyAndScaleMatchNaive) {
  for_each_isa([](Isa) {
    for (std::int64_t n : kSizes) {
      const auto x = randv(n, 3, -1, 1);
      auto y = randv(n, 4, -1, 1), want = y;
      k::axpy(0.37f, x.data(), y.data(), n);
      k::naive::axpy(0.37f, x.data(), want.data(), n);
      // The AVX builds may contract mul+add into one fma: allow that rounding difference.
      expect_near_all(y, want, 1e-6, 1e-7, "axpy n=" + std::to_string(n));
      std::vector<float> s(n);
      k::scale(x.data(), -1.5f, s.data(), n);
      for (std::int64_t i = 0; i < n; ++i) EXPECT_EQ(s[i], -1.5f * x[i]);
    }
  });
}

TEST(KernelActivation, ForwardAndBackwardMatchNaive) {
  using A = k::Activation;
  for_each_isa([](Isa) {
    for (A f : {A::relu, A::gelu, A::gelu_tanh, A::quick_gelu, A::silu, A::sigmoid, A::tanh, A::exp, A::log}) {
      for (std::int64_t n : kSizes) {
        // Wide range: covers the tanh polynomial/exp switch, GELU tails and saturation.
        std::vector<float> x = f == A::log ? randv(n, 5, 1e-3f, 50.0f) : randv(n, 5, -12.0f, 12.0f);
        if (n >= 7 && f != A::log) {
          x[0] = 0.0f;
          x[1] = -0.3f;
          x[2] = 0.6249f;
          x[3] = -40.0f;
          x[4] = 40.0f;
          x[5] = 1e-4f;
        }
        const auto dy = randv(n, 6, -1, 1);
        std::vector<float> y(n), yref(n), dx(n), dxref(n);
        k::activation_forward(f, x.data(), y.data(), n);
        k::naive::activation_forward(f, x.data(), yref.data(), n);
        k::activation_backward(f, x.data(), dy.data(), dx.data(), n);
        k::naive::activation_backward(f, x.data(), dy.data(), dxref.data(), n);
        const std::string what = std::string(k::activation_name(f)) + " n=" + std::to_string(n);
        // ~1e-6 absolute (the erfc fit's accuracy) and a few ulp relative.
        expect_near_all(y, yref, 2e-6, 1e-6, what + " forward");
        expect_near_all(dx, dxref, 4e-6, 1e-6, what + " backward");
      }
    }
  });
}

TEST(KernelActivation, GeluTailIsRelativelyAccurate) {
  // For negative x GELU is x·erfc(|x|/sqrt2)/2: tiny values must keep relative accuracy.
  for_each_isa([](Isa) {
    std::vector<float> x, y(64), ref(64);
    for (int i = 0; i < 64; ++i) x.push_back(-0.1f - 0.12f * static_cast<float>(i));  // down to -7.7
    k::activation_forward(k::Activation::gelu, x.data(), y.data(), 64);
    k::naive::activation_forward(k::Activation::gelu, x.data(), ref.data(), 64);
    expect_near_all(y, ref, 5e-6, 0.0, "gelu tail");
  });
}

TEST(KernelActivation, ReluPropagatesNan) {
  for_each_isa([](Isa) {
    std::vector<float> x(33, -1.0f), y(33);
    x[3] = x[32] = std::nanf("");
    k::activation_forward(k::Activation::relu, x.data(), y.data(), 33);
    EXPECT_TRUE(std::isnan(y[3]) && std::isnan(y[32]));
    EXPECT_EQ(y[0], 0.0f);
  });
}

TEST(KernelReduce, RowSumRowMaxColSumMatchNaive) {
  for_each_isa([](Isa) {
    for (std::int64_t cols : kSizes) {
      for (std::int64_t rows : {std::int64_t{1}, std::int64_t{3}, std::int64_t{257}, std::int64_t{600}}) {
        if (rows * cols > 300000) continue;
        const auto x = randv(rows * cols, 7, -1, 1);
        std::vector<float> s(rows), sref(rows), m(rows), mref(rows), c(cols), cref(cols);
        std::vector<std::int64_t> mi(rows), miref(rows);
        k::row_sum(x.data(), s.data(), rows, cols);
        k::naive::row_sum(x.data(), sref.data(), rows, cols);
        k::row_max(x.data(), m.data(), mi.data(), rows, cols);
        k::naive::row_max(x.data(), mref.data(), miref.data(), rows, cols);
        k::col_sum(x.data(), c.data(), rows, cols);
        k::naive::col_sum(x.data(), cref.data(), rows, cols);
        const std::string what = std::to_string(rows) + "x" + std::to_string(cols);
        expect_near_all(s, sref, 1e-5, 1e-5 * std::sqrt(static_cast<double>(cols)), what + " row_sum");
        EXPECT_EQ(m, mref) << what;
        EXPECT_EQ(mi, miref) << what;
        expect_near_all(c, cref, 1e-5, 1e-5 * std::sqrt(static_cast<double>(rows)), what + " col_sum");
      }
    }
  });
}

TEST(KernelReduce, RowMaxFindsFirstOfTies) {
  const std::vector<float> x = {1, 5, 2, 5, 5, -1, 0};
  float m;
  std::int64_t i;
  k::row_max(x.data(), &m, &i, 1, 7);
  EXPECT_EQ(m, 5.0f);
  EXPECT_EQ(i, 1);
}

TEST(KernelReduce, SumAllAndMaxAllMatchNaive) {
  for_each_isa([](Isa) {
    for (std::int64_t n : {std::int64_t{1}, std::int64_t{33}, std::int64_t{4099}, std::int64_t{100003}}) {
      const auto x = randv(n, 8, -1, 1);
      float sref, mref;
      k::naive::row_sum(x.data(), &sref, 1, n);
      k::naive::row_max(x.data(), &mref, nullptr, 1, n);
      EXPECT_NEAR(k::sum_all(x.data(), n), sref, 1e-5 * std::sqrt(static_cast<double>(n)));
      EXPECT_EQ(k::max_all(x.data(), n), mref);
    }
  });
}

TEST(KernelReduce, SumMiddleMatchesNaive) {
  const std::int64_t outer = 5, mid = 300, inner = 37;
  const auto x = randv(outer * mid * inner, 9, -1, 1);
  std::vector<float> y(outer * inner);
  k::sum_middle(x.data(), y.data(), outer, mid, inner);
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 0; i < inner; ++i) {
      double s = 0;
      for (std::int64_t m = 0; m < mid; ++m) s += x[(o * mid + m) * inner + i];
      EXPECT_NEAR(y[o * inner + i], s, 1e-4);
    }
}

TEST(KernelReduce, ResultsIdenticalAcrossThreadCounts) {
  const int saved = num_threads();
  const std::int64_t rows = 3000, cols = 700;  // several column-sum row blocks and chunks
  const auto x = randv(rows * cols, 10, -1, 1);
  auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<float> out(rows + cols + 2 + 4 * cols);
    k::row_sum(x.data(), out.data(), rows, cols);
    k::col_sum(x.data(), out.data() + rows, rows, cols);
    out[rows + cols] = k::sum_all(x.data(), rows * cols);
    out[rows + cols + 1] = k::max_all(x.data(), rows * cols);
    k::sum_middle(x.data(), out.data() + rows + cols + 2, 4, rows * cols / (4 * cols), cols);
    return out;
  };
  const auto one = run(1), two = run(2);
  set_num_threads(saved);
  EXPECT_EQ(one, two);  // float == float: bitwise for non-NaN values
}
