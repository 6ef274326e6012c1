// Row-wise softmax, log-softmax and the fused log-softmax + NLL (cross-entropy) over
// contiguous fp32 arrays of `rows` rows of `cols` elements, forward and backward.
//
// Every row is max-subtracted before exp, so large logits do not overflow. Rows are split
// over threads; each row is computed by one thread with the same code, so results do not
// depend on the thread count. The fast versions dispatch on tfm::active_isa(); the *_naive
// twins are plain scalar loops kept as the reference the tests compare against.
#pragma once

#include <cstdint>

namespace tfm::kernels {

// y = softmax(x) per row.                     x, y: (rows, cols)
void softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols);
// y = x - max - log(sum(exp(x - max))).        x, y: (rows, cols)
void log_softmax_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols);
// dx = y * (g - sum(g * y)), y the softmax output.
void softmax_backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);
// dx = g - exp(y) * sum(g), y the log-softmax output.
void log_softmax_backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);

// Cross-entropy with label smoothing eps (PyTorch's definition), per row i with target t:
//   loss[i] = (1 - eps) * (lse - x[t]) + (eps / cols) * sum_v (lse - x[v]),  lse = logsumexp(x)
// Rows whose target == ignore_index get loss 0. lse (rows) is written for the backward.
// Targets must already be validated (in [0, cols) or == ignore_index).
void cross_entropy_forward(const float* x, const std::int64_t* target, float* loss, float* lse,
                           std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps);
// dx[i, v] = scale[i] * (exp(x[i, v] - lse[i]) - eps / cols - (1 - eps) * [v == t_i]);
// rows with target == ignore_index get dx = 0. scale: (rows), d(total loss)/d(loss[i]).
void cross_entropy_backward(const float* x, const std::int64_t* target, const float* lse, const float* scale,
                            float* dx, std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps);

// ---- naive twins (scalar, double accumulators) --------------------------------------------
void softmax_forward_naive(const float* x, float* y, std::int64_t rows, std::int64_t cols);
void log_softmax_forward_naive(const float* x, float* y, std::int64_t rows, std::int64_t cols);
void softmax_backward_naive(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);
void log_softmax_backward_naive(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);
void cross_entropy_forward_naive(const float* x, const std::int64_t* target, float* loss, float* lse,
                                 std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps);
void cross_entropy_backward_naive(const float* x, const std::int64_t* target, const float* lse, const float* scale,
                                  float* dx, std::int64_t rows, std::int64_t cols, std::int64_t ignore_index,
                                  float eps);

}  // namespace tfm::kernels
