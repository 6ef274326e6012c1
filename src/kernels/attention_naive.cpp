// The naive attention twin: materialise the scores, softmax each row, multiply by V — plain
// loops that test every mask condition per element. The reference the fused kernels are
// checked against, and the "plain" path of the op (the one that can return the weights).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention.h"
#include "kernels/parallel.h"

namespace tfm::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Is key j visible to query i of batch b, head h? Each condition written out as in the spec
// (kernels/attention.h), element by element — independent of attention_key_spans.
bool allowed(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
  const std::int64_t ip = i + p.shift();
  if (p.causal && j > ip) return false;
  if (p.valid_lens != nullptr && j >= p.valid_lens[b * p.vl_sb + i * p.vl_si]) return false;
  // A window is symmetric, |i' - j| < w; with causal it keeps the w most recent keys.
  const bool local = p.window <= 0 || (ip - p.window < j && j < ip + p.window);
  if (local || !p.sparse()) return local;
  if (attention_is_global(p, ip) || attention_is_global(p, j)) return true;
  if (p.random_blocks <= 0) return false;
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(p.random_blocks));
  const std::int64_t key_end = p.valid_lens != nullptr ? p.valid_lens[b * p.vl_sb + i * p.vl_si] : p.Tk;
  const std::int64_t n = attention_random_key_blocks(p, h, ip / p.block_size, key_end, blocks.data());
  for (std::int64_t t = 0; t < n; ++t)
    if (blocks[static_cast<std::size_t>(t)] == j / p.block_size) return true;
  return false;
}

float dot(const float* a, const float* b, std::int64_t n) {
  float s = 0.0f;
  for (std::int64_t d = 0; d < n; ++d) s += a[d] * b[d];
  return s;
}

}  // namespace

void attention_naive_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,
                             float* probs) {
  const std::int64_t rows = p.B * p.Hq * p.Tq, Tk = p.Tk, D = p.D;
  parallel_for(rows, 1, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> keep(static_cast<std::size_t>(Tk), 1.0f);  // dropout scales of one row
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / (p.Hq * p.Tq), h = r / p.Tq % p.Hq, i = r % p.Tq, hk = h / p.group();
      float* a = probs + r * Tk;  // (Tk) this row of the weights
      // scores
      float mx = kNegInf;
      for (std::int64_t j = 0; j < Tk; ++j) {
        float s = kNegInf;
        if (allowed(p, b, h, i, j)) {
          s = p.scale * dot(q.row(b, h, i), k.row(b, hk, j), D);
          if (p.bias) s += p.bias[b * p.bias_sb + h * p.bias_sh + i * p.bias_si + j * p.bias_sj];
          if (p.alibi_slopes) s -= p.alibi_slopes[h] * std::fabs(static_cast<float>(i + p.shift() - j));
        }
        a[j] = s;
        mx = std::max(mx, s);
      }
      // softmax; a row with no finite score (fully masked) gives zeros, not NaN
      float sum = 0.0f;
      for (std::int64_t j = 0; j < Tk; ++j) {
        a[j] = mx == kNegInf ? 0.0f : std::exp(a[j] - mx);
        sum += a[j];
      }
      for (std::int64_t j = 0; j < Tk; ++j) a[j] = sum > 0.0f ? a[j] / sum : 0.0f;
      // out = dropout(a) v
      if (p.dropout_p > 0.0f) attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i), Tk, keep.data());
      float* o = out + r * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      for (std::int64_t j = 0; j < Tk; ++j) {
        const float z = a[j] * keep[static_cast<std::size_t>(j)];
        const float* vj = v.row(b, hk, j);
        for (std::int64_t d = 0; d < D; ++d) o[d] += z * vj[d];
      }
    }
  });
}

void attention_naive_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                              const float* probs, const float* dout, float* dq, float* dk, float* dv, float* ds) {
  const std::int64_t Tq = p.Tq, Tk = p.Tk, D = p.D, G = p.group();
  auto keep_row = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::vector<float>& keep) {
    if (p.dropout_p > 0.0f) attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i), Tk, keep.data());
  };
  // 1. ds = a * (da - sum_j a da), da = keep * (dout v^T): one row per (b, h, i).
  parallel_for(p.B * p.Hq * Tq, 1, [&](std::int64_t r0, std::int64_t r1) {
    std::vector<float> keep(static_cast<std::size_t>(Tk), 1.0f);
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / (p.Hq * Tq), h = r / Tq % p.Hq, i = r % Tq, hk = h / G;
      keep_row(b, h, i, keep);
      const float* a = probs + r * Tk;
      float* g = ds + r * Tk;
      float row_dot = 0.0f;
      for (std::int64_t j = 0; j < Tk; ++j) {
        g[j] = keep[static_cast<std::size_t>(j)] * dot(dout + r * D, v.row(b, hk, j), D);  // da
        row_dot += a[j] * g[j];
      }
      for (std::int64_t j = 0; j < Tk; ++j) g[j] = a[j] * (g[j] - row_dot);
    }
  });
  // 2. dq = scale * ds k.
  parallel_for(p.B * p.Hq * Tq, 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / (p.Hq * Tq), h = r / Tq % p.Hq, hk = h / G;
      float* o = dq + r * D;
      for (std::int64_t d = 0; d < D; ++d) o[d] = 0.0f;
      for (std::int64_t j = 0; j < Tk; ++j) {
        const float c = p.scale * ds[r * Tk + j];
        const float* kj = k.row(b, hk, j);
        for (std::int64_t d = 0; d < D; ++d) o[d] += c * kj[d];
      }
    }
  });
  // 3. dk = scale * ds^T q and dv = z^T dout, summed over the G query heads sharing a kv head.
  parallel_for(p.B * p.Hkv * Tk, 1, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const std::int64_t b = r / (p.Hkv * Tk), hk = r / Tk % p.Hkv, j = r % Tk;
      float* gk = dk + r * D;
      float* gv = dv + r * D;
      for (std::int64_t d = 0; d < D; ++d) gk[d] = gv[d] = 0.0f;
      for (std::int64_t h = hk * G; h < (hk + 1) * G; ++h) {
        for (std::int64_t i = 0; i < Tq; ++i) {
          const std::int64_t row = (b * p.Hq + h) * Tq + i;
          float keep = 1.0f;
          if (p.dropout_p > 0.0f) attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i) + j, 1, &keep);
          const float cs = p.scale * ds[row * Tk + j];
          const float z = probs[row * Tk + j] * keep;
          const float* qi = q.row(b, h, i);
          const float* gi = dout + row * D;
          for (std::int64_t d = 0; d < D; ++d) {
            gk[d] += cs * qi[d];
            gv[d] += z * gi[d];
          }
        }
      }
    }
  });
}

}  // namespace tfm::kernels
