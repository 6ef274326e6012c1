// The plain attention path for sparse patterns: the naive twin's plain loops, but each row
// keeps only its allowed keys (attention_key_spans), packed row after row. Memory is the
// number of allowed (query, key) pairs, O(T (w + g + r bs)) — plus T per global query row —
// instead of the dense twin's (B, Hq, Tq, Tk).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/parallel.h"

namespace tfm::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

// One row's spans and its dropout scales, in packed order.
struct Row {
  std::vector<std::int64_t> lo, hi;
  std::vector<float> keep;  // (nnz of the row) 1, or the dropout scale
  std::int64_t n = 0, b = 0, h = 0, i = 0, hk = 0;

  explicit Row(const AttentionParams& p)
      : lo(static_cast<std::size_t>(attention_max_spans(p))), hi(lo.size()) {}
  void load(const AttentionParams& p, std::int64_t r, std::int64_t nnz) {
    b = r / (p.Hq * p.Tq), h = r / p.Tq % p.Hq, i = r % p.Tq, hk = h / p.group();
    n = attention_key_spans(p, b, h, i, lo.data(), hi.data());
    keep.assign(static_cast<std::size_t>(nnz), 1.0f);
    if (p.dropout_p <= 0.0f) return;
    std::int64_t at = 0;
    for (std::int64_t t = 0; t < n; ++t) {
      const std::int64_t a = lo[static_cast<std::size_t>(t)], e = hi[static_cast<std::size_t>(t)];
      attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i) + static_cast<std::uint64_t>(a),
                               e - a, keep.data() + at);
      at += e - a;
    }
  }
  // Calls fn(packed index, key j) for every allowed key, in packed order.
  template <class Fn>
  void for_each_key(Fn&& fn) const {
    std::int64_t at = 0;
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t j = lo[static_cast<std::size_t>(t)]; j < hi[static_cast<std::size_t>(t)]; ++j) fn(at++, j);
  }
};

}  // namespace

std::int64_t attention_sparse_row_ptr(const AttentionParams& p, std::int64_t* row_ptr) {
  const std::int64_t rows = p.B * p.Hq * p.Tq;
  std::vector<std::int64_t> lo(static_cast<std::size_t>(attention_max_spans(p))), hi(lo.size());
  row_ptr[0] = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t b = r / (p.Hq * p.Tq), h = r / p.Tq % p.Hq, i = r % p.Tq;
    const std::int64_t n = attention_key_spans(p, b, h, i, lo.data(), hi.data());
    std::int64_t len = 0;
    for (std::int64_t t = 0; t < n; ++t) len += hi[static_cast<std::size_t>(t)] - lo[static_cast<std::size_t>(t)];
    row_ptr[r + 1] = row_ptr[r] + len;
  }
  return row_ptr[rows];
}

void attention_sparse_naive_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                                    const std::int64_t* row_ptr, float* out, float* probs) {
  const std::int64_t D = p.D;
  parallel_for(p.B * p.Hq * p.Tq, 1, [&](std::int64_t r0, std::int64_t r1) {
    Row row(p);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t nnz = row_ptr[r + 1] - row_ptr[r];
      row.load(p, r, nnz);
      float* a = probs + row_ptr[r];  // (nnz) this row's weights
      const std::int64_t b = row.b, h = row.h, i = row.i, hk = row.hk;
      float mx = kNegInf;
      row.for_each_key([&](std::int64_t t, std::int64_t j) {
        float s = p.scale * dot(q.row(b, h, i), k.row(b, hk, j), D);
        if (p.bias) s += p.bias[b * p.bias_sb + h * p.bias_sh + i * p.bias_si + j * p.bias_sj];
        if (p.alibi_slopes) s -= p.alibi_slopes[h] * std::fabs(static_cast<float>(i + p.shift() - j));
        a[t] = s;
        mx = std::max(mx, s);
      });
      float sum = 0.0f;
      for (std::int64_t t = 0; t < nnz; ++t) {  // every score -inf (a masking bias): zeros, not NaN
        a[t] = mx == kNegInf ? 0.0f : std::exp(a[t] - mx);
        sum += a[t];
      }
      for (std::int64_t t = 0; t < nnz; ++t) a[t] = sum > 0.0f ? a[t] / sum : 0.0f;
      float* o = out + r * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] = 0.0f;  // a row with no key stays zero
      row.for_each_key([&](std::int64_t t, std::int64_t j) {
        const float z = a[t] * row.keep[static_cast<std::size_t>(t)];
        const float* vj = v.row(b, hk, j);
        for (std::int64_t d = 0; d < D; ++d) o[d] += z * vj[d];
      });
    }
  });
}

void attention_sparse_naive_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                                     const std::int64_t* row_ptr, const float* probs, const float* dout, float* dq,
                                     float* dk, float* dv, float* ds, float* dbias) {
  const std::int64_t D = p.D, rows = p.B * p.Hq * p.Tq;
  // 1. ds = a * (da - sum_j a da), da = keep * (dout v^T), and dq = scale * ds k: per row.
  parallel_for(rows, 1, [&](std::int64_t r0, std::int64_t r1) {
    Row row(p);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t nnz = row_ptr[r + 1] - row_ptr[r];
      row.load(p, r, nnz);
      const float* a = probs + row_ptr[r];
      float* g = ds + row_ptr[r];
      const std::int64_t b = row.b, hk = row.hk;
      float row_dot = 0.0f;
      row.for_each_key([&](std::int64_t t, std::int64_t j) {
        g[t] = row.keep[static_cast<std::size_t>(t)] * dot(dout + r * D, v.row(b, hk, j), D);
        row_dot += a[t] * g[t];
      });
      for (std::int64_t t = 0; t < nnz; ++t) g[t] = a[t] * (g[t] - row_dot);
      float* o = dq + r * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      row.for_each_key([&](std::int64_t t, std::int64_t j) {
        const float c = p.scale * g[t];
        const float* kj = k.row(b, hk, j);
        for (std::int64_t d = 0; d < D; ++d) o[d] += c * kj[d];
        if (dbias != nullptr) dbias[r * p.Tk + j] = g[t];
      });
    }
  });
  // 2. dk = scale * ds^T q and dv = z^T dout: one work item per (b, kv head) owns its keys'
  //    rows, visiting its G query heads' rows in order (deterministic, no atomics).
  const std::int64_t G = p.group();
  parallel_for(p.B * p.Hkv, 1, [&](std::int64_t w0, std::int64_t w1) {
    Row row(p);
    for (std::int64_t w = w0; w < w1; ++w) {
      const std::int64_t b = w / p.Hkv, hk = w % p.Hkv;
      for (std::int64_t j = 0; j < p.Tk; ++j)
        for (std::int64_t d = 0; d < D; ++d) dk[(w * p.Tk + j) * D + d] = dv[(w * p.Tk + j) * D + d] = 0.0f;
      for (std::int64_t h = hk * G; h < (hk + 1) * G; ++h)
        for (std::int64_t i = 0; i < p.Tq; ++i) {
          const std::int64_t r = (b * p.Hq + h) * p.Tq + i;
          row.load(p, r, row_ptr[r + 1] - row_ptr[r]);
          const float* qi = q.row(b, h, i);
          const float* gi = dout + r * D;
          row.for_each_key([&](std::int64_t t, std::int64_t j) {
            const float cs = p.scale * ds[row_ptr[r] + t];
            const float z = probs[row_ptr[r] + t] * row.keep[static_cast<std::size_t>(t)];
            float* gk = dk + (w * p.Tk + j) * D;
            float* gv = dv + (w * p.Tk + j) * D;
            for (std::int64_t d = 0; d < D; ++d) {
              gk[d] += cs * qi[d];
              gv[d] += z * gi[d];
            }
          });
        }
    }
  });
}

void attention_sparse_unpack(const AttentionParams& p, const std::int64_t* row_ptr, const float* probs, float* dense) {
  parallel_for(p.B * p.Hq * p.Tq, 16, [&](std::int64_t r0, std::int64_t r1) {
    Row row(p);
    for (std::int64_t r = r0; r < r1; ++r) {
      row.load(p, r, row_ptr[r + 1] - row_ptr[r]);
      row.for_each_key([&](std::int64_t t, std::int64_t j) { dense[r * p.Tk + j] = probs[row_ptr[r] + t]; });
    }
  });
}

}  // namespace tfm::kernels
