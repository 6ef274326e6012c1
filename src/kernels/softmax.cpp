// Softmax family: ISA dispatch, threading over rows, and the naive scalar twins.
#include "kernels/softmax.h"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.h"
#include "kernels/softmax_rows.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace softmax_rows {
const Table generic_table = make_table<simd::Generic>();
}

namespace {

const softmax_rows::Table& table() {
  switch (active_isa()) {
    case Isa::avx512: return softmax_rows::avx512_table;
    case Isa::avx2: return softmax_rows::avx2_table;
    default: return softmax_rows::generic_table;
  }
}

// Rows per task: about 16K elements, so small rows still amortise the thread start.
std::int64_t grain(std::int64_t cols) { return std::max<std::int64_t>(1, (1 << 14) / std::max<std::int64_t>(cols, 1)); }

}  // namespace

void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  const auto fn = table().forward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) { fn(x + r0 * cols, y + r0 * cols, r1 - r0, cols); });
}

void log_softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  const auto fn = table().log_forward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) { fn(x + r0 * cols, y + r0 * cols, r1 - r0, cols); });
}

void softmax_backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  const auto fn = table().backward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(y + r0 * cols, g + r0 * cols, dx + r0 * cols, r1 - r0, cols);
  });
}

void log_softmax_backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  const auto fn = table().log_backward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(y + r0 * cols, g + r0 * cols, dx + r0 * cols, r1 - r0, cols);
  });
}

void cross_entropy_forward(const float* x, const std::int64_t* target, float* loss, float* lse, std::int64_t rows,
                           std::int64_t cols, std::int64_t ignore_index, float eps) {
  const auto fn = table().ce_forward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(x + r0 * cols, target + r0, loss + r0, lse + r0, r1 - r0, cols, ignore_index, eps);
  });
}

void cross_entropy_backward(const float* x, const std::int64_t* target, const float* lse, const float* scale,
                            float* dx, std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps) {
  const auto fn = table().ce_backward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(x + r0 * cols, target + r0, lse + r0, scale + r0, dx + r0 * cols, r1 - r0, cols, ignore_index, eps);
  });
}

// ---- naive twins --------------------------------------------------------------------------

namespace {
double naive_lse(const float* x, std::int64_t cols) {
  double m = -INFINITY;
  for (std::int64_t c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[c]));
  double s = 0;
  for (std::int64_t c = 0; c < cols; ++c) s += std::exp(x[c] - m);
  return m + std::log(s);
}
}  // namespace

void softmax_forward_naive(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const double lse = naive_lse(x + r * cols, cols);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - lse));
  }
}

void log_softmax_forward_naive(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const double lse = naive_lse(x + r * cols, cols);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(x[r * cols + c] - lse);
  }
}

void softmax_backward_naive(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) dot += static_cast<double>(g[r * cols + c]) * y[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = static_cast<float>(y[r * cols + c] * (g[r * cols + c] - dot));
  }
}

void log_softmax_backward_naive(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double sg = 0;
    for (std::int64_t c = 0; c < cols; ++c) sg += g[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = static_cast<float>(g[r * cols + c] - std::exp(static_cast<double>(y[r * cols + c])) * sg);
  }
}

void cross_entropy_forward_naive(const float* x, const std::int64_t* target, float* loss, float* lse,
                                 std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const double l = naive_lse(xr, cols);
    lse[r] = static_cast<float>(l);
    if (target[r] == ignore_index) {
      loss[r] = 0.0f;
      continue;
    }
    double smooth = 0;
    for (std::int64_t c = 0; c < cols; ++c) smooth += l - xr[c];
    loss[r] = static_cast<float>((1.0 - eps) * (l - xr[target[r]]) + eps / static_cast<double>(cols) * smooth);
  }
}

void cross_entropy_backward_naive(const float* x, const std::int64_t* target, const float* lse, const float* scale,
                                  float* dx, std::int64_t rows, std::int64_t cols, std::int64_t ignore_index,
                                  float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const bool ignored = target[r] == ignore_index;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double p = std::exp(static_cast<double>(x[r * cols + c]) - lse[r]);
      const double onehot = c == target[r] ? 1.0 : 0.0;
      dx[r * cols + c] =
          ignored ? 0.0f : static_cast<float>(scale[r] * (p - eps / static_cast<double>(cols) - (1.0 - eps) * onehot));
    }
  }
}

}  // namespace tfm::kernels
