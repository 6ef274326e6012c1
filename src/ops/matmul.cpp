// matmul and linear over the GEMM kernel, with their backward rules beside them.
//
// A matrix operand (..., R, C) is handed to the GEMM as a pointer per batch item plus a
// leading dimension and a transpose flag, read from its strides: row-major (stride[-1] == 1)
// or column-major (stride[-2] == 1, e.g. a transpose view) go in without a copy; any other
// layout is copied with clone() first. Backward passes transposed VIEWS (mT below), so
// gradients never materialise a transpose either.
#include "tfm/ops/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "kernels/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/reduce.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops/shape.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {

std::size_t u(std::int64_t i) { return static_cast<std::size_t>(i); }

// Every product below (forward and backward) goes through these two, which follow the
// process-wide precision: fp32 GEMM, or bf16 operands with fp32 accumulation (mixed-precision
// training, tfm/runtime.h).
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* A, std::int64_t lda,
          const float* B, std::int64_t ldb, float* C, std::int64_t ldc) {
  if (matmul_precision() == Precision::bf16)
    return kernels::gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
  kernels::gemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
void gemm_batched(bool ta, bool tb, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                  const float* A, std::int64_t lda, std::int64_t sa, const float* B, std::int64_t ldb, std::int64_t sb,
                  float* C, std::int64_t ldc, std::int64_t sc) {
  if (matmul_precision() == Precision::bf16)
    return kernels::gemm_bf16_batched(ta, tb, batch, M, N, K, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc);
  kernels::gemm_batched(ta, tb, batch, M, N, K, 1.0f, A, lda, sa, B, ldb, sb, 0.0f, C, ldc, sc);
}

// How the last two dims (R, C) of a tensor lie in memory.
struct MatLayout {
  bool trans = false;    // stored column-major: element (r, c) at c * ld + r
  std::int64_t ld = 1;   // stride between stored rows, in elements
};

bool layout_of(const Tensor& x, MatLayout& L) {
  const std::int64_t n = x.dim(), R = x.shape()[u(n - 2)], C = x.shape()[u(n - 1)];
  const std::int64_t sr = x.strides()[u(n - 2)], sc = x.strides()[u(n - 1)];
  if ((C == 1 || sc == 1) && (R == 1 || sr >= C)) {
    L = {false, R == 1 ? std::max<std::int64_t>(C, 1) : sr};
    return true;
  }
  if ((R == 1 || sr == 1) && (C == 1 || sc >= R)) {
    L = {true, C == 1 ? std::max<std::int64_t>(R, 1) : sc};
    return true;
  }
  return false;
}

// x, or a row-major copy when the GEMM cannot read its layout.
Tensor gemm_readable(const Tensor& x, MatLayout& L) {
  if (layout_of(x, L)) return x;
  Tensor c = x.clone();
  layout_of(c, L);
  return c;
}

// The transpose of the last two dims as a raw view (no copy, not recorded).
Tensor mT(const Tensor& x) {
  Shape shape = x.shape(), strides = x.strides();
  const std::size_t n = shape.size();
  std::swap(shape[n - 1], shape[n - 2]);
  std::swap(strides[n - 1], strides[n - 2]);
  return x.as_strided(shape, strides, x.offset());
}

// Row-major (..., R, C) whose rows sit at one uniform stride across all leading dims: the
// whole tensor is one (rows, C) matrix with leading dimension ld.
bool rows_uniform(const Tensor& x, std::int64_t& ld) {
  MatLayout L;
  const std::int64_t n = x.dim();
  if (n < 2 || x.shape()[u(n - 2)] <= 1 || !layout_of(x, L) || L.trans) {
    if (!x.is_contiguous()) return false;
    ld = std::max<std::int64_t>(x.shape()[u(n - 1)], 1);
    return true;
  }
  ld = L.ld;
  std::int64_t expect = ld * x.shape()[u(n - 2)];
  for (std::int64_t d = n - 3; d >= 0; --d) {
    if (x.shape()[u(d)] != 1 && x.strides()[u(d)] != expect) return false;
    expect *= x.shape()[u(d)];
  }
  return true;
}

// Element offsets of every batch item of x (batch dims = all but the last two) when its
// batch dims are broadcast to `batch` (row-major order over `batch`).
std::vector<std::int64_t> batch_offsets(const Tensor& x, const Shape& batch) {
  const std::size_t nb = batch.size(), xb = u(x.dim() - 2);
  Shape st(nb, 0);
  for (std::size_t i = 0; i < xb; ++i)
    if (x.shape()[i] != 1) st[nb - xb + i] = x.strides()[i];
  std::vector<std::int64_t> offs(u(shape_numel(batch)));
  std::vector<std::int64_t> idx(nb, 0);
  std::int64_t off = 0;
  for (std::size_t k = 0; k < offs.size(); ++k) {
    offs[k] = off;
    for (std::size_t i = nb; i-- > 0;) {
      if (++idx[i] < batch[i]) {
        off += st[i];
        break;
      }
      off -= (batch[i] - 1) * st[i];
      idx[i] = 0;
    }
  }
  return offs;
}

bool arithmetic(const std::vector<std::int64_t>& v, std::int64_t& step) {
  step = v.size() > 1 ? v[1] - v[0] : 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i] - v[i - 1] != step) return false;
  return true;
}

void check_f32(const Tensor& x, const char* op, const char* what) {
  TFM_CHECK(x.defined(), op, what, " is undefined");
  TFM_CHECK(x.dtype() == DType::f32, op, what, " must be f32, got ", dtype_name(x.dtype()));
}

// op-free product of a (..., M, K) and b (..., K, N), both >= 2-D, batch dims broadcast.
// Returns a fresh contiguous (batch..., M, N). No autograd.
Tensor product(const Tensor& a_in, const Tensor& b_in) {
  const std::int64_t na = a_in.dim(), nb = b_in.dim();
  const std::int64_t M = a_in.shape()[u(na - 2)], K = a_in.shape()[u(na - 1)], N = b_in.shape()[u(nb - 1)];
  TFM_CHECK(b_in.shape()[u(nb - 2)] == K, "matmul", shape_str(a_in.shape()), " @ ", shape_str(b_in.shape()),
            ": inner dims ", K, " != ", b_in.shape()[u(nb - 2)]);
  const Shape a_batch(a_in.shape().begin(), a_in.shape().end() - 2), b_batch(b_in.shape().begin(), b_in.shape().end() - 2);
  Shape out_shape = broadcast_shapes(a_batch, b_batch, "matmul");
  const Shape batch = out_shape;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = Tensor::empty(out_shape);
  if (out.numel() == 0) return out;
  float* C = out.data<float>();
  const std::int64_t nbatch = shape_numel(batch);

  MatLayout La, Lb;
  const Tensor a = gemm_readable(a_in, La), b = gemm_readable(b_in, Lb);
  const float* A = a.data<float>();
  const float* B = b.data<float>();

  // b shared by every batch item and a's rows uniform: one GEMM with M' = batch * M (the
  // Linear case (B, T, C) @ (C, N): one big call instead of B small ones).
  std::int64_t lda_rows = 0;
  if (shape_numel(b_batch) == 1 && a_batch == batch && !La.trans && rows_uniform(a, lda_rows)) {
    gemm(false, Lb.trans, nbatch * M, N, K, A, lda_rows, B, Lb.ld, C, N);
    return out;
  }
  const std::vector<std::int64_t> oa = batch_offsets(a, batch), ob = batch_offsets(b, batch);
  std::int64_t sa = 0, sb = 0;
  if (arithmetic(oa, sa) && arithmetic(ob, sb)) {
    gemm_batched(La.trans, Lb.trans, nbatch, M, N, K, A, La.ld, sa, B, Lb.ld, sb, C, N, M * N);
    return out;
  }
  for (std::int64_t i = 0; i < nbatch; ++i)
    gemm(La.trans, Lb.trans, M, N, K, A + oa[u(i)], La.ld, B + ob[u(i)], Lb.ld, C + i * M * N, N);
  return out;
}

// d(loss)/d(b) for out = a @ b when b has no batch (or all-ones batch) dims and a's rows are
// uniform: gb (K, N) = a_flatᵀ (K, rows) @ g_flat (rows, N), one GEMM over all rows.
bool shared_rhs_grad(const Tensor& a, const Tensor& g, const Shape& b_shape, Tensor& gb) {
  const std::int64_t na = a.dim();
  std::int64_t lda = 0;
  if (shape_numel(Shape(b_shape.begin(), b_shape.end() - 2)) != 1 || !rows_uniform(a, lda)) return false;
  const Shape a_batch(a.shape().begin(), a.shape().end() - 2), g_batch(g.shape().begin(), g.shape().end() - 2);
  if (a_batch != g_batch) return false;
  const std::int64_t K = a.shape()[u(na - 1)], N = g.shape()[u(g.dim() - 1)];
  const std::int64_t rows = a.numel() / std::max<std::int64_t>(K, 1);
  gb = Tensor::zeros({K, N});
  gemm(true, false, K, N, rows, a.data<float>(), lda, g.data<float>(), N, gb.data<float>(), N);
  gb = gb.as_strided(b_shape, contiguous_strides(b_shape), 0);
  return true;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_f32(a, "matmul", "a");
  check_f32(b, "matmul", "b");
  TFM_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul", "operands must be at least 1-D, got ", shape_str(a.shape()),
            " and ", shape_str(b.shape()));
  // 1-D operands: the PyTorch rule through differentiable unsqueeze/squeeze views.
  if (a.dim() == 1) return squeeze(matmul(unsqueeze(a, 0), b), -2);
  if (b.dim() == 1) return squeeze(matmul(a, unsqueeze(b, 1)), -1);

  Tensor out = product(a, b);
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("matmul", out, [a, b](const Tensor& g) {
      // g (batch..., M, N). ga = g @ bᵀ, gb = aᵀ @ g, then summed over broadcast batch dims.
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(product(g, mT(b)), a.shape()));
      if (b.requires_grad()) {
        Tensor gb;
        if (!shared_rhs_grad(a, g, b.shape(), gb)) gb = sum_to_shape(product(mT(a), g), b.shape());
        autograd::accumulate(b, gb);
      }
    });
  }
  return out;
}

namespace {
// x (..., in) · wᵀ (+ b) with w (out, in) in a compact type (bf16, f16, q8_0, q4_0, q4_k,
// q6_k): inference only, through the compact-weight kernels (kernels/qgemm.h).
Tensor linear_compact(const Tensor& x, const Tensor& w, const Tensor& b) {
  TFM_CHECK(!autograd::needs_grad({&x, &b}), "linear", "the weight ", shape_str(w.shape()), " is ", dtype_name(w.dtype()),
            ": compact weights are for inference only (train or merge the f32 model)");
  TFM_CHECK(w.is_contiguous(), "linear", "a ", dtype_name(w.dtype()), " weight must be contiguous");
  const std::int64_t out_f = w.shape()[0], in_f = w.shape()[1];
  Shape shape = x.shape();
  shape.back() = out_f;
  Tensor y = Tensor::empty(shape);  // (..., out)
  const std::int64_t rows = y.numel() / std::max<std::int64_t>(out_f, 1);
  if (rows == 0 || out_f == 0) return y;
  std::int64_t ldx = 0;
  Tensor xr = x;
  if (!rows_uniform(x, ldx)) {
    xr = x.clone();
    ldx = in_f;
  }
  kernels::qgemm(w.dtype(), rows, out_f, in_f, xr.data<float>(), ldx, w.raw_data(), y.data<float>(), out_f);
  if (b.defined()) {
    const Tensor bc = b.is_contiguous() ? b : b.clone();
    const float* bias = bc.data<float>();
    float* Y = y.data<float>();
    const kernels::BinaryRunFn run = kernels::binary_run_kernel();
    for (std::int64_t r = 0; r < rows; ++r) run(kernels::BinaryOp::add, Y + r * out_f, 1, bias, 1, Y + r * out_f, out_f);
  }
  return y;
}
// bf16 precision: y = x·wᵀ + b as one GEMM that adds the bias as it writes each tile
// (kernels::gemm_bf16_bias): the values of the product followed by the add, bit for bit,
// without a second pass over y. Taken when x's rows are uniform and w is contiguous (every
// Linear of a training step); false leaves y alone.
bool bf16_linear_with_bias(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  std::int64_t ldx = 0;
  if (matmul_precision() != Precision::bf16 || !b.defined() || !w.is_contiguous() || !rows_uniform(x, ldx))
    return false;
  const std::int64_t out_f = w.shape()[0], in_f = w.shape()[1];
  Shape shape = x.shape();
  shape.back() = out_f;
  y = Tensor::empty(shape);
  if (y.numel() == 0) return true;
  const Tensor bc = b.is_contiguous() ? b : b.clone();
  kernels::gemm_bf16_bias(false, true, y.numel() / out_f, out_f, in_f, x.data<float>(), ldx, w.data<float>(), in_f,
                          bc.data<float>(), y.data<float>(), out_f);
  return true;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_f32(x, "linear", "x");
  TFM_CHECK(w.defined(), "linear", "w is undefined");
  const bool compact = w.dtype() == DType::bf16 || w.dtype() == DType::f16 || dtype_is_block(w.dtype());
  if (compact && w.dim() == 2) {
    TFM_CHECK(x.dim() >= 1 && x.shape().back() == w.shape()[1], "linear", "x ", shape_str(x.shape()), " and w ",
              shape_str(w.shape()), ": in features ", x.dim() >= 1 ? x.shape().back() : 0, " != ", w.shape()[1]);
    if (b.defined()) check_f32(b, "linear", "b");
    return linear_compact(x, w, b);
  }
  check_f32(w, "linear", "w");
  TFM_CHECK(w.dim() == 2, "linear", "w must be (out, in), got ", shape_str(w.shape()));
  TFM_CHECK(x.dim() >= 1 && x.shape().back() == w.shape()[1], "linear", "x ", shape_str(x.shape()), " and w ",
            shape_str(w.shape()), ": in features ", x.dim() >= 1 ? x.shape().back() : 0, " != ", w.shape()[1]);
  const std::int64_t out_f = w.shape()[0];
  if (b.defined()) {
    check_f32(b, "linear", "b");
    TFM_CHECK(b.dim() == 1 && b.shape()[0] == out_f, "linear", "b must be (", out_f, "), got ", shape_str(b.shape()));
  }
  if (x.dim() == 1) return squeeze(linear(unsqueeze(x, 0), w, b), 0);

  Tensor y;
  if (!bf16_linear_with_bias(x, w, b, y)) {
    y = product(x, mT(w));  // (..., out); wᵀ is a view, read with the transpose flag
    if (b.defined()) {
      const Tensor bc = b.is_contiguous() ? b : b.clone();
      const float* bias = bc.data<float>();
      float* Y = y.data<float>();
      const kernels::BinaryRunFn run = kernels::binary_run_kernel();  // the ISA's vector add, one row at a time
      kernels::parallel_for(y.numel() / std::max<std::int64_t>(out_f, 1), 64, [&](std::int64_t r0, std::int64_t r1) {
        for (std::int64_t r = r0; r < r1; ++r)
          run(kernels::BinaryOp::add, Y + r * out_f, 1, bias, 1, Y + r * out_f, out_f);
      });
    }
  }
  if (autograd::needs_grad({&x, &w, &b})) {
    autograd::record("linear", y, [x, w, b, out_f](const Tensor& g) {
      // g (..., out) contiguous, rows = numel / out.
      const std::int64_t in_f = w.shape()[1], rows = g.numel() / std::max<std::int64_t>(out_f, 1);
      if (x.requires_grad()) autograd::accumulate(x, product(g, w));  // (..., out) @ (out, in)
      if (w.requires_grad()) {
        // gw (out, in) = g_flatᵀ (out, rows) @ x_flat (rows, in)
        std::int64_t ldx = 0;
        Tensor xr = x;
        if (!rows_uniform(x, ldx)) {
          xr = x.clone();
          ldx = in_f;
        }
        Tensor gw = Tensor::empty({out_f, in_f});  // beta = 0 overwrites (BLAS convention)
        gemm(true, false, out_f, in_f, rows, g.data<float>(), out_f, xr.data<float>(), ldx, gw.data<float>(), in_f);
        autograd::accumulate(w, gw);
      }
      if (b.defined() && b.requires_grad()) {
        // Column sums of g in the kernels' fixed row blocks: the same grouping whatever the
        // thread count, vectorised for the ISA.
        Tensor gb = Tensor::empty({out_f});
        kernels::col_sum(g.data<float>(), gb.data<float>(), rows, out_f);
        autograd::accumulate(b, gb);
      }
    });
  }
  return y;
}

}  // namespace tfm
