// Norm family: ISA dispatch, threading, the fixed-block weight-gradient reduction, and the
// naive scalar twins.
#include "kernels/norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/norm_rows.h"
#include "kernels/parallel.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace norm_rows {
const Table generic_table = make_table<simd::Generic>();
}

namespace {

const norm_rows::Table& table() {
  switch (active_isa()) {
    case Isa::avx512: return norm_rows::avx512_table;
    case Isa::avx2: return norm_rows::avx2_table;
    default: return norm_rows::generic_table;
  }
}

std::int64_t grain(std::int64_t cols) { return std::max<std::int64_t>(1, (1 << 14) / std::max<std::int64_t>(cols, 1)); }

// Rows per block of the weight-gradient sum. Fixed (not derived from the thread count) so the
// grouping of the additions, hence the bits of the result, never change.
constexpr std::int64_t kBlockRows = 64;

// Runs rows_fn(r0, r1, dw_acc, db_acc) over fixed blocks of rows, each block accumulating into
// its own zeroed partials, then writes dw/db (cols) = the block partials added in block order.
template <class RowsFn>
void blocked_param_grads(std::int64_t rows, std::int64_t cols, float* dw, float* db, RowsFn&& rows_fn) {
  const std::int64_t nblocks = (rows + kBlockRows - 1) / kBlockRows;
  const std::size_t part = static_cast<std::size_t>(nblocks * cols);
  std::vector<float> pw(dw ? part : 0, 0.0f), pb(db ? part : 0, 0.0f);  // (nblocks, cols)
  parallel_for(nblocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      const std::int64_t r0 = blk * kBlockRows, r1 = std::min(rows, r0 + kBlockRows);
      rows_fn(r0, r1, dw ? pw.data() + blk * cols : nullptr, db ? pb.data() + blk * cols : nullptr);
    }
  });
  parallel_for(cols, 1024, [&](std::int64_t c0, std::int64_t c1) {
    for (std::int64_t c = c0; c < c1; ++c) {
      float sw = 0.0f, sb = 0.0f;
      for (std::int64_t blk = 0; blk < nblocks; ++blk) {
        if (dw) sw += pw[static_cast<std::size_t>(blk * cols + c)];
        if (db) sb += pb[static_cast<std::size_t>(blk * cols + c)];
      }
      if (dw) dw[c] = sw;
      if (db) db[c] = sb;
    }
  });
}

}  // namespace

void layer_norm_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                        std::int64_t rows, std::int64_t cols, float eps) {
  const auto fn = table().ln_forward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(x + r0 * cols, w, b, y + r0 * cols, mean + r0, rstd + r0, r1 - r0, cols, eps);
  });
}

void layer_norm_backward(const float* x, const float* w, const float* mean, const float* rstd, const float* g,
                         float* dx, float* dw, float* db, std::int64_t rows, std::int64_t cols) {
  const auto fn = table().ln_backward;
  auto run = [&](std::int64_t r0, std::int64_t r1, float* dw_acc, float* db_acc) {
    fn(x + r0 * cols, w, mean + r0, rstd + r0, g + r0 * cols, dx ? dx + r0 * cols : nullptr, dw_acc, db_acc,
       r1 - r0, cols);
  };
  if (dw || db) {
    blocked_param_grads(rows, cols, dw, db, run);
  } else {
    parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) { run(r0, r1, nullptr, nullptr); });
  }
}

void rms_norm_forward(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t cols,
                      float eps) {
  const auto fn = table().rms_forward;
  parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) {
    fn(x + r0 * cols, w, y + r0 * cols, rstd + r0, r1 - r0, cols, eps);
  });
}

void rms_norm_backward(const float* x, const float* w, const float* rstd, const float* g, float* dx, float* dw,
                       std::int64_t rows, std::int64_t cols) {
  const auto fn = table().rms_backward;
  auto run = [&](std::int64_t r0, std::int64_t r1, float* dw_acc, float*) {
    fn(x + r0 * cols, w, rstd + r0, g + r0 * cols, dx ? dx + r0 * cols : nullptr, dw_acc, r1 - r0, cols);
  };
  if (dw) {
    blocked_param_grads(rows, cols, dw, nullptr, run);
  } else {
    parallel_for(rows, grain(cols), [&](std::int64_t r0, std::int64_t r1) { run(r0, r1, nullptr, nullptr); });
  }
}

// ---- naive twins --------------------------------------------------------------------------

void layer_norm_forward_naive(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                              std::int64_t rows, std::int64_t cols, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mu = 0, var = 0;
    for (std::int64_t c = 0; c < cols; ++c) mu += xr[c];
    mu /= static_cast<double>(cols);
    for (std::int64_t c = 0; c < cols; ++c) var += (xr[c] - mu) * (xr[c] - mu);
    var /= static_cast<double>(cols);
    const double rs = 1.0 / std::sqrt(var + eps);
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(rs);
    for (std::int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>((xr[c] - mu) * rs * (w ? w[c] : 1.0f) + (b ? b[c] : 0.0f));
  }
}

void layer_norm_backward_naive(const float* x, const float* w, const float* mean, const float* rstd,
                               const float* g, float* dx, float* dw, float* db, std::int64_t rows,
                               std::int64_t cols) {
  std::vector<double> sw(static_cast<std::size_t>(cols), 0.0), sb(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = g + r * cols;
    double a = 0, bb = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = (xr[c] - static_cast<double>(mean[r])) * rstd[r];
      const double gw = static_cast<double>(gr[c]) * (w ? w[c] : 1.0f);
      a += gw;
      bb += gw * xhat;
      sw[static_cast<std::size_t>(c)] += gr[c] * xhat;
      sb[static_cast<std::size_t>(c)] += gr[c];
    }
    a /= static_cast<double>(cols);
    bb /= static_cast<double>(cols);
    if (dx) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const double xhat = (xr[c] - static_cast<double>(mean[r])) * rstd[r];
        const double gw = static_cast<double>(gr[c]) * (w ? w[c] : 1.0f);
        dx[r * cols + c] = static_cast<float>(rstd[r] * (gw - a - xhat * bb));
      }
    }
  }
  for (std::int64_t c = 0; c < cols; ++c) {
    if (dw) dw[c] = static_cast<float>(sw[static_cast<std::size_t>(c)]);
    if (db) db[c] = static_cast<float>(sb[static_cast<std::size_t>(c)]);
  }
}

void rms_norm_forward_naive(const float* x, const float* w, float* y, float* rstd, std::int64_t rows,
                            std::int64_t cols, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double ms = 0;
    for (std::int64_t c = 0; c < cols; ++c) ms += static_cast<double>(xr[c]) * xr[c];
    const double rs = 1.0 / std::sqrt(ms / static_cast<double>(cols) + eps);
    rstd[r] = static_cast<float>(rs);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(xr[c] * rs * (w ? w[c] : 1.0f));
  }
}

void rms_norm_backward_naive(const float* x, const float* w, const float* rstd, const float* g, float* dx,
                             float* dw, std::int64_t rows, std::int64_t cols) {
  std::vector<double> sw(static_cast<std::size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* gr = g + r * cols;
    double bb = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      const double xhat = static_cast<double>(xr[c]) * rstd[r];
      bb += static_cast<double>(gr[c]) * (w ? w[c] : 1.0f) * xhat;
      sw[static_cast<std::size_t>(c)] += gr[c] * xhat;
    }
    bb /= static_cast<double>(cols);
    if (dx) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const double xhat = static_cast<double>(xr[c]) * rstd[r];
        dx[r * cols + c] = static_cast<float>(rstd[r] * (static_cast<double>(gr[c]) * (w ? w[c] : 1.0f) - xhat * bb));
      }
    }
  }
  if (dw)
    for (std::int64_t c = 0; c < cols; ++c) dw[c] = static_cast<float>(sw[static_cast<std::size_t>(c)]);
}

}  // namespace tfm::kernels
