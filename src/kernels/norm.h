// Row normalisations over the last dim of contiguous fp32 (rows, cols) arrays:
//   LayerNorm (Ba et al. 2016):   y = (x - mean) * rstd * w + b,  rstd = 1/sqrt(var + eps)
//   RMSNorm (Zhang & Sennrich 2019, Llama/T5):  y = x * rstd * w,  rstd = 1/sqrt(mean(x^2) + eps)
// w and b may be null (treated as ones / zeros). The forward writes the per-row statistics
// the backward needs. The weight/bias gradients are sums over rows: they are formed per
// fixed block of rows and the block partials added in block order, so they are
// bit-identical whatever the thread count. Fast versions dispatch on tfm::active_isa();
// the *_naive twins are plain scalar loops (double accumulators).
#pragma once

#include <cstdint>

namespace tfm::kernels {

// x, y: (rows, cols); w, b: (cols) or null; mean, rstd: (rows) out.
void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        std::int64_t rows, std::int64_t cols, float eps);
// g: d loss / d y (rows, cols). Outputs dx (rows, cols), dw (cols), db (cols): each may be
// null when not wanted; dw and db are overwritten, not accumulated.
void layer_norm_backward(const float* x, const float* w, const float* mean, const float* rstd, const float* g,
                         float* dx, float* dw, float* db, std::int64_t rows, std::int64_t cols);

// x, y: (rows, cols); w: (cols) or null; rstd: (rows) out.
void rms_norm_forward(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t cols,
                      float eps);
void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* g, float* dx, float* dw,
                       std::int64_t rows, std::int64_t cols);

// ---- naive twins ------------------------------------------------------------------------
void layer_norm_forward_naive(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                              std::int64_t rows, std::int64_t cols, float eps);
void layer_norm_backward_naive(const float* x, const float* w, const float* mean, const float* rstd,
                               const float* g, float* dx, float* dw, float* db, std::int64_t rows,
                               std::int64_t cols);
void rms_norm_forward_naive(const float* x, const float* w, float* y, float* rstd, std::int64_t rows,
                            std::int64_t cols, float eps);
void rms_norm_backward_naive(const float* x, const float* w, const float* rstd, const float* g, float* dx,
                             float* dw, std::int64_t rows, std::int64_t cols);

}  // namespace tfm::kernels
