// Activation kernels: dispatch, the baseline build and the naive (double-precision) twins.
#include "kernels/activation.h"

#include <cmath>

#include "kernels/activation_impl.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace tfm::kernels {
namespace {
// Transcendental kernels cost ~10-30 ns per 16 floats; 16K elements per chunk keeps the
// fork/join overhead (a few µs) small.
constexpr std::int64_t kGrain = 1 << 14;
}  // namespace

const char* activation_name(Activation f) {
  switch (f) {
    case Activation::relu: return "relu";
    case Activation::gelu: return "gelu";
    case Activation::gelu_tanh: return "gelu_tanh";
    case Activation::quick_gelu: return "quick_gelu";
    case Activation::silu: return "silu";
    case Activation::sigmoid: return "sigmoid";
    case Activation::tanh: return "tanh";
    case Activation::exp: return "exp";
    case Activation::log: return "log";
  }
  return "?";
}

void activation_forward_generic(Activation f, const float* x, float* y, std::int64_t n) {
  impl::activation_forward<simd::Generic>(f, x, y, n);
}
void activation_backward_generic(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  impl::activation_backward<simd::Generic>(f, x, dy, dx, n);
}

void activation_forward(Activation f, const float* x, float* y, std::int64_t n) {
  const auto run = pick_isa(&activation_forward_generic, &activation_forward_avx2, &activation_forward_avx512);
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) { run(f, x + s, y + s, e - s); });
}

void activation_backward(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  const auto run = pick_isa(&activation_backward_generic, &activation_backward_avx2, &activation_backward_avx512);
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) { run(f, x + s, dy + s, dx + s, e - s); });
}

namespace naive {
namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double forward1(Activation f, double x) {
  switch (f) {
    case Activation::relu: return x > 0 ? x : 0.0;
    case Activation::gelu: return 0.5 * x * std::erfc(-x * kInvSqrt2);
    case Activation::gelu_tanh: return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
    case Activation::quick_gelu: return x / (1.0 + std::exp(-1.702 * x));
    case Activation::silu: return x / (1.0 + std::exp(-x));
    case Activation::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Activation::tanh: return std::tanh(x);
    case Activation::exp: return std::exp(x);
    case Activation::log: return std::log(x);
  }
  return 0.0;
}

double derivative(Activation f, double x) {
  switch (f) {
    case Activation::relu: return x > 0 ? 1.0 : 0.0;
    case Activation::gelu: return 0.5 * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case Activation::gelu_tanh: {
      const double t = std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x));
      return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case Activation::quick_gelu: {
      const double s = 1.0 / (1.0 + std::exp(-1.702 * x));
      return s * (1.0 + 1.702 * x * (1.0 - s));
    }
    case Activation::silu: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 + x * (1.0 - s));
    }
    case Activation::sigmoid: {
      const double s = 1.0 / (1.0 + std::exp(-x));
      return s * (1.0 - s);
    }
    case Activation::tanh: {
      const double t = std::tanh(x);
      return 1.0 - t * t;
    }
    case Activation::exp: return std::exp(x);
    case Activation::log: return 1.0 / x;
  }
  return 0.0;
}
}  // namespace

void activation_forward(Activation f, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(forward1(f, x[i]));
}
void activation_backward(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = static_cast<float>(dy[i] * derivative(f, x[i]));
}
}  // namespace naive

}  // namespace tfm::kernels
