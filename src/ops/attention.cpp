// scaled_dot_product_attention: shape checks, the mask spec, dispatch to the fused or the
// plain kernel, and the backward rule beside the forward.
#include "tfm/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm_bf16.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops/shape.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {

constexpr const char* kOp = "scaled_dot_product_attention";

// Everything the kernels read, kept alive together: the params hold raw pointers into these.
struct Prepared {
  kernels::AttentionParams p;
  Tensor q, k, v;       // unit stride along D (a copy only when the input's D stride is not 1)
  Tensor valid_lens;    // i64, contiguous
  Tensor bias;          // f32 view broadcast to (B, Hq, Tq, Tk)
  Tensor slopes;        // f32 (Hq), contiguous
  Tensor global_pos;    // i64 (n_global) sorted, distinct
};

Tensor unit_stride_d(const Tensor& x) { return x.strides()[3] == 1 || x.shape()[3] == 1 ? x : x.clone(); }

// bf16 precision (tfm/runtime.h), plain kernels: a contiguous copy of x rounded to bf16, so
// the products q·k and p·v (and in backward dout·v, dS·k, dSᵀ·q, zᵀ·dout) take bf16
// operands from the inputs. The fused kernels round every product operand themselves
// (AttentionParams::bf16: the probabilities and dS too), so they need no copies.
Tensor bf16_rounded(const Tensor& x) {
  Tensor c = x.clone();
  kernels::round_bf16_inplace(c.data<float>(), c.numel());
  return c;
}

kernels::HeadsView heads(const Tensor& x) {
  const Shape& st = x.strides();
  return {x.data<float>(), st[0], st[1], st[2]};
}

Prepared prepare(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o, bool flash) {
  for (const auto* t : {&q, &k, &v}) {
    TFM_CHECK(t->defined(), kOp, "q, k and v must be defined");
    TFM_CHECK(t->dim() == 4, kOp, "q, k, v must be (B, H, T, D); got ", shape_str(t->shape()));
    TFM_CHECK(t->dtype() == DType::f32, kOp, "q, k, v must be f32; got ", dtype_name(t->dtype()));
  }
  const std::int64_t B = q.size(0), Hq = q.size(1), Tq = q.size(2), D = q.size(3);
  const std::int64_t Hkv = k.size(1), Tk = k.size(2);
  TFM_CHECK(k.shape() == v.shape(), kOp, "k ", shape_str(k.shape()), " and v ", shape_str(v.shape()),
            " must have the same shape");
  TFM_CHECK(k.size(0) == B, kOp, "batch of q ", shape_str(q.shape()), " != batch of k ", shape_str(k.shape()));
  TFM_CHECK(k.size(3) == D, kOp, "head dim of q ", shape_str(q.shape()), " != head dim of k ", shape_str(k.shape()));
  TFM_CHECK(D >= 1, kOp, "head dim must be >= 1, got ", D);
  TFM_CHECK(Hkv >= 1 && Hq % Hkv == 0, kOp, "query heads ", Hq, " must be a multiple of kv heads ", Hkv);

  Prepared pr;
  kernels::AttentionParams& p = pr.p;
  p.B = B, p.Hq = Hq, p.Hkv = Hkv, p.Tq = Tq, p.Tk = Tk, p.D = D;
  p.scale = o.scale.value_or(1.0f / std::sqrt(static_cast<float>(D)));
  TFM_CHECK(std::isfinite(p.scale), kOp, "scale must be finite, got ", p.scale);
  pr.q = unit_stride_d(q), pr.k = unit_stride_d(k), pr.v = unit_stride_d(v);
  if (matmul_precision() == Precision::bf16) {
    if (flash) p.bf16 = true;
    else pr.q = bf16_rounded(pr.q), pr.k = bf16_rounded(pr.k), pr.v = bf16_rounded(pr.v);
  }

  p.causal = o.causal;
  TFM_CHECK(o.window >= 0, kOp, "window must be >= 0 (0 = none), got ", o.window);
  p.window = o.window;

  if (o.valid_lens.defined()) {
    const Tensor& vl = o.valid_lens;
    const bool per_batch = vl.dim() == 1 && vl.size(0) == B;
    const bool per_query = vl.dim() == 2 && vl.size(0) == B && vl.size(1) == Tq;
    TFM_CHECK(per_batch || per_query, kOp, "valid_lens must be (B)=(", B, ") or (B, Tq)=(", B, ",", Tq, "); got ",
              shape_str(vl.shape()));
    std::vector<std::int64_t> lens;
    if (dtype_is_float(vl.dtype())) {
      for (float x : vl.to_floats()) {
        TFM_CHECK(std::nearbyint(x) == x, kOp, "valid_lens must be whole numbers, got ", x);
        lens.push_back(static_cast<std::int64_t>(x));
      }
    } else {
      lens = vl.to_ints();
    }
    for (std::int64_t n : lens) TFM_CHECK(n >= 0, kOp, "valid_lens must be >= 0, got ", n);
    pr.valid_lens = Tensor::from_ints(lens, vl.shape());
    p.valid_lens = pr.valid_lens.data<std::int64_t>();
    p.vl_sb = per_batch ? 1 : Tq;
    p.vl_si = per_batch ? 0 : 1;
  }

  if (o.bias.defined()) {
    const Tensor& bias = o.bias;
    TFM_CHECK(bias.dtype() == DType::f32, kOp, "bias must be f32; got ", dtype_name(bias.dtype()));
    TFM_CHECK(bias.dim() <= 4, kOp, "bias ", shape_str(bias.shape()), " has more than 4 dims");
    const Shape target{B, Hq, Tq, Tk};
    Shape strides(4, 0);
    for (std::int64_t d = 0; d < bias.dim(); ++d) {
      const std::size_t t = static_cast<std::size_t>(4 - bias.dim() + d), s = static_cast<std::size_t>(d);
      TFM_CHECK(bias.shape()[s] == target[t] || bias.shape()[s] == 1, kOp, "bias ", shape_str(bias.shape()),
                " does not broadcast to (B, Hq, Tq, Tk) = ", shape_str(target));
      strides[t] = bias.shape()[s] == 1 ? 0 : bias.strides()[s];
    }
    pr.bias = bias;
    p.bias = bias.data<float>();
    p.bias_sb = strides[0], p.bias_sh = strides[1], p.bias_si = strides[2], p.bias_sj = strides[3];
  }

  if (o.alibi_slopes.defined()) {
    const Tensor& s = o.alibi_slopes;
    TFM_CHECK(s.dtype() == DType::f32 && s.dim() == 1 && s.size(0) == Hq, kOp, "alibi_slopes must be f32 (Hq)=(",
              Hq, "); got ", s.str());
    pr.slopes = s.clone();
    p.alibi_slopes = pr.slopes.data<float>();
  }

  TFM_CHECK(o.dropout_p >= 0.0f && o.dropout_p < 1.0f, kOp, "dropout_p must be in [0, 1), got ", o.dropout_p);
  p.dropout_p = o.dropout_p;
  p.dropout_seed = o.dropout_seed;
  p.dropout_batch_offset = o.dropout_batch_offset;
  TFM_CHECK(o.head_offset >= 0 && (o.heads_total == 0 || o.head_offset + Hq <= o.heads_total), kOp, "heads [",
            o.head_offset, ", ", o.head_offset + Hq, ") are not within the model's ", o.heads_total);
  p.head_offset = o.head_offset;
  p.heads_total = o.heads_total;

  const SparseAttentionPattern& sp = o.sparse;
  if (sp.active()) {
    TFM_CHECK(Tq <= Tk, kOp, "a sparse pattern needs Tq <= Tk (queries aligned to the end of the keys); got Tq ", Tq,
              ", Tk ", Tk);
    std::vector<std::int64_t> g = sp.global_tokens;
    for (std::int64_t x : g)
      TFM_CHECK(x >= 0 && x < Tk, kOp, "sparse global token ", x, " is outside the keys [0, ", Tk, ")");
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    TFM_CHECK(sp.random_blocks >= 0, kOp, "sparse random_blocks must be >= 0, got ", sp.random_blocks);
    TFM_CHECK(sp.random_blocks == 0 || sp.block_size >= 1, kOp, "sparse block_size must be >= 1, got ",
              sp.block_size);
    if (!g.empty()) {
      pr.global_pos = Tensor::from_ints(g, {static_cast<std::int64_t>(g.size())});
      p.global_pos = pr.global_pos.data<std::int64_t>();
      p.n_global = static_cast<std::int64_t>(g.size());
    }
    p.random_blocks = sp.random_blocks;
    p.block_size = sp.block_size;
    p.random_seed = sp.seed;
  }
  return pr;
}

// The plain path for a sparse pattern: weights packed row by row (only the allowed keys).
AttentionWithWeights sparse_plain_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                            const AttentionOptions& o, bool want_weights) {
  Prepared pr = prepare(q, k, v, o, /*flash=*/false);
  const kernels::AttentionParams& p = pr.p;
  Tensor row_ptr = Tensor::empty({p.B * p.Hq * p.Tq + 1}, DType::i64);  // (B*Hq*Tq + 1)
  const std::int64_t nnz = kernels::attention_sparse_row_ptr(p, row_ptr.data<std::int64_t>());
  Tensor out = Tensor::empty({p.B, p.Hq, p.Tq, p.D});
  Tensor probs = Tensor::empty({std::max<std::int64_t>(nnz, 1)});  // (nnz) packed weights
  kernels::attention_sparse_naive_forward(p, heads(pr.q), heads(pr.k), heads(pr.v), row_ptr.data<std::int64_t>(),
                                          out.data<float>(), probs.data<float>());
  const Tensor& bias = o.bias;
  if (autograd::needs_grad({&q, &k, &v, &bias})) {
    autograd::record(kOp, out, [q, k, v, bias, pr, row_ptr, probs](const Tensor& g) {
      const kernels::AttentionParams& bp = pr.p;
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(k.shape());
      const bool want_dbias = bias.defined() && bias.requires_grad();
      Tensor ds = Tensor::empty(probs.shape());  // (nnz) d loss / d scores, packed
      Tensor dbias = want_dbias ? Tensor::zeros({bp.B, bp.Hq, bp.Tq, bp.Tk}) : Tensor();
      kernels::attention_sparse_naive_backward(bp, heads(pr.q), heads(pr.k), heads(pr.v), row_ptr.data<std::int64_t>(),
                                               probs.data<float>(), g.data<float>(), dq.data<float>(), dk.data<float>(),
                                               dv.data<float>(), ds.data<float>(),
                                               want_dbias ? dbias.data<float>() : nullptr);
      autograd::accumulate(q, dq);
      autograd::accumulate(k, dk);
      autograd::accumulate(v, dv);
      if (want_dbias) autograd::accumulate(bias, sum_to_shape(dbias, bias.shape()));
    });
  }
  Tensor weights;
  if (want_weights) {  // inspection asks for the full map: only then is a T x T matrix made
    weights = Tensor::zeros({p.B, p.Hq, p.Tq, p.Tk});
    kernels::attention_sparse_unpack(p, row_ptr.data<std::int64_t>(), probs.data<float>(), weights.data<float>());
  }
  return {out, weights};
}

AttentionWithWeights attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                               bool flash, bool want_weights) {
  if (!flash && o.sparse.active()) return sparse_plain_attention(q, k, v, o, want_weights);
  Prepared pr = prepare(q, k, v, o, flash);
  const kernels::AttentionParams& p = pr.p;
  Tensor out = Tensor::empty({p.B, p.Hq, p.Tq, p.D});
  Tensor saved;  // flash: lse (B, Hq, Tq); plain: weights (B, Hq, Tq, Tk)
  if (flash) {
    saved = Tensor::empty({p.B, p.Hq, p.Tq});
    kernels::attention_flash_forward(p, heads(pr.q), heads(pr.k), heads(pr.v), out.data<float>(), saved.data<float>());
  } else {
    saved = Tensor::empty({p.B, p.Hq, p.Tq, p.Tk});
    kernels::attention_naive_forward(p, heads(pr.q), heads(pr.k), heads(pr.v), out.data<float>(), saved.data<float>());
  }
  const Tensor& bias = o.bias;
  if (autograd::needs_grad({&q, &k, &v, &bias})) {
    autograd::record(kOp, out, [q, k, v, bias, pr, out, saved, flash](const Tensor& g_in) {
      const kernels::AttentionParams& bp = pr.p;
      const Tensor g = !flash && matmul_precision() == Precision::bf16 ? bf16_rounded(g_in) : g_in;
      Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(k.shape());
      const bool want_dbias = bias.defined() && bias.requires_grad();
      // d loss / d scores over the full (B, Hq, Tq, Tk): only when the bias needs it (the
      // fused path otherwise never holds a T x T matrix).
      Tensor ds = want_dbias ? Tensor::zeros({bp.B, bp.Hq, bp.Tq, bp.Tk}) : Tensor();
      if (flash) {
        kernels::attention_flash_backward(bp, heads(pr.q), heads(pr.k), heads(pr.v), out.data<float>(),
                                          saved.data<float>(), g.data<float>(), dq.data<float>(), dk.data<float>(),
                                          dv.data<float>(), want_dbias ? ds.data<float>() : nullptr);
      } else {
        if (!want_dbias) ds = Tensor::empty({bp.B, bp.Hq, bp.Tq, bp.Tk});
        kernels::attention_naive_backward(bp, heads(pr.q), heads(pr.k), heads(pr.v), saved.data<float>(),
                                          g.data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>(),
                                          ds.data<float>());
      }
      autograd::accumulate(q, dq);
      autograd::accumulate(k, dk);
      autograd::accumulate(v, dv);
      if (want_dbias) autograd::accumulate(bias, sum_to_shape(ds, bias.shape()));
    });
  }
  return {out, flash ? Tensor() : saved};
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options) {
  return attention(q, k, v, options, options.use_flash, /*want_weights=*/false).out;
}

AttentionWithWeights scaled_dot_product_attention_with_weights(const Tensor& q, const Tensor& k, const Tensor& v,
                                                               const AttentionOptions& options) {
  return attention(q, k, v, options, /*flash=*/false, /*want_weights=*/true);
}

Tensor alibi_slopes(std::int64_t n_heads) {
  TFM_CHECK(n_heads >= 1, "alibi_slopes", "n_heads must be >= 1, got ", n_heads);
  const std::vector<float> s = kernels::alibi_slopes(n_heads);
  return Tensor::from_floats(s, {n_heads});
}

}  // namespace tfm
