// The vocabulary split across tensor-parallel ranks (vocab_parallel.h).
#include "nn/vocab_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/parallel.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::nn {
namespace {

void check_shard(const VocabShard& v, const char* op) {
  TFM_CHECK(v.sum && v.ranks > 1 && v.rank >= 0 && v.rank < v.ranks && v.first >= 0 && v.first < v.last &&
                v.last <= v.vocab,
            op, "rank ", v.rank, " of ", v.ranks, " holds [", v.first, ", ", v.last, ") of a vocabulary of ", v.vocab);
}

}  // namespace

std::pair<std::int64_t, std::int64_t> vocab_part(std::int64_t vocab, int rank, int ranks) {
  const std::int64_t base = vocab / ranks, extra = vocab % ranks;
  const std::int64_t first = rank * base + std::min<std::int64_t>(rank, extra);
  return {first, first + base + (rank < extra ? 1 : 0)};
}

Tensor vocab_parallel_embedding(const Tensor& ids, const Tensor& rows, const VocabShard& v) {
  check_shard(v, "embedding");
  TFM_CHECK(rows.dim() == 2 && rows.size(0) == v.last - v.first, "embedding", "this rank's table is ", rows.str(),
            ", not its ", v.last - v.first, " rows of the vocabulary");
  const std::vector<std::int64_t> all = ids.to_ints();
  std::vector<std::int64_t> local(all.size(), 0);
  std::vector<float> mine(all.size(), 0.0f);
  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::int64_t id = all[i];
    TFM_CHECK(id >= 0 && id < v.vocab, "embedding", "index ", id, " at position ", i, " is out of range for a table of ",
              v.vocab, " rows");
    if (id >= v.first && id < v.last) {
      local[i] = id - v.first;
      mine[i] = 1.0f;
    }
  }
  Shape column = ids.shape();
  column.push_back(1);
  // Another rank's id reads row 0 here and is multiplied by 0 (its gradient too): the sum over
  // the ranks adds exact zeros to the one rank's row.
  const Tensor x = mul(embedding(Tensor::from_ints(local, ids.shape()), rows), Tensor::from_floats(mine, column));
  return sum_partials(x, v.sum);
}

Tensor gather_vocab_columns(const Tensor& columns_in, const VocabShard& v) {
  check_shard(v, "logits");
  const std::int64_t W = v.last - v.first;
  TFM_CHECK(columns_in.dim() >= 1 && columns_in.size(-1) == W && columns_in.dtype() == DType::f32, "logits",
            "this rank's columns are ", columns_in.str(), ", not (..., ", W, ") f32");
  const Tensor c = contiguous(columns_in);
  Shape shape = c.shape();
  shape.back() = v.vocab;
  Tensor whole = Tensor::zeros(shape);
  const std::int64_t rows = c.numel() / W;
  const float* src = c.data<float>();
  float* dst = whole.data<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    std::memcpy(dst + r * v.vocab + v.first, src + r * W, static_cast<std::size_t>(W) * sizeof(float));
  (*v.sum)(whole);
  if (!autograd::needs_grad({&c})) return whole;
  autograd::record("vocab_parallel_gather", whole, [c, rows, W, first = v.first, vocab = v.vocab](const Tensor& g) {
    Tensor dx = Tensor::empty(c.shape());
    const float* gs = g.data<float>();
    float* d = dx.data<float>();
    for (std::int64_t r = 0; r < rows; ++r)
      std::memcpy(d + r * W, gs + r * vocab + first, static_cast<std::size_t>(W) * sizeof(float));
    autograd::accumulate(c, dx);
  });
  return whole;
}

Tensor vocab_parallel_cross_entropy(const Tensor& columns, const Tensor& targets, const VocabShard& v,
                                    std::int64_t ignore_index, float label_smoothing) {
  check_shard(v, "cross_entropy");
  const std::int64_t W = v.last - v.first, V = v.vocab;
  TFM_CHECK(columns.dim() >= 1 && columns.size(-1) == W && columns.dtype() == DType::f32, "cross_entropy",
            "this rank's logits are ", columns.str(), ", not (..., ", W, ") f32");
  const Shape row_shape(columns.shape().begin(), columns.shape().end() - 1);
  TFM_CHECK(targets.defined() && targets.shape() == row_shape, "cross_entropy", "targets ",
            targets.defined() ? targets.str() : std::string("undefined"), " must have shape ", shape_str(row_shape),
            " for logits ", columns.str());
  TFM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  auto tgt = std::make_shared<const std::vector<std::int64_t>>(targets.to_ints());
  const auto N = static_cast<std::int64_t>(tgt->size());
  std::int64_t valid = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int64_t t = (*tgt)[static_cast<std::size_t>(i)];
    if (t == ignore_index) continue;
    TFM_CHECK(t >= 0 && t < V, "cross_entropy", "target ", t, " at position ", i, " is out of range for ", V,
              " classes (ignore_index ", ignore_index, ")");
    ++valid;
  }
  const Tensor x = contiguous(columns);
  const float* xs = x.data<float>();
  // 1. Each row's maximum over the whole vocabulary: every rank writes its own in its column
  //    of (N, ranks) zeros, and one sum hands every rank all of them (exact: one term each).
  Tensor maxima = Tensor::zeros({N, v.ranks});
  float* mx = maxima.data<float>();
  kernels::parallel_for(N, std::max<std::int64_t>(1, 4096 / W), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) mx[r * v.ranks + v.rank] = *std::max_element(xs + r * W, xs + (r + 1) * W);
  });
  (*v.sum)(maxima);
  // 2. Per row: the sum of exp(x - max), the target's logit (on the rank holding it) and the
  //    sum of the logits (label smoothing), summed over the ranks in one call.
  Tensor stats = Tensor::zeros({N, 3});
  float* st = stats.data<float>();
  std::vector<float> row_max(static_cast<std::size_t>(N));
  kernels::parallel_for(N, std::max<std::int64_t>(1, 4096 / W), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float m = *std::max_element(mx + r * v.ranks, mx + (r + 1) * v.ranks);
      row_max[static_cast<std::size_t>(r)] = m;
      const float* xr = xs + r * W;
      double e = 0, s = 0;
      for (std::int64_t j = 0; j < W; ++j) {
        e += std::exp(static_cast<double>(xr[j]) - m);
        s += xr[j];
      }
      const std::int64_t t = (*tgt)[static_cast<std::size_t>(r)];
      st[r * 3] = static_cast<float>(e);
      st[r * 3 + 1] = t != ignore_index && t >= v.first && t < v.last ? xr[t - v.first] : 0.0f;
      st[r * 3 + 2] = static_cast<float>(s);
    }
  });
  (*v.sum)(stats);
  auto lse = std::make_shared<std::vector<float>>(static_cast<std::size_t>(N));
  double total = 0;  // fixed order, double: the same bits on every rank and thread count
  const double eps = label_smoothing;
  for (std::int64_t r = 0; r < N; ++r) {
    const double l = row_max[static_cast<std::size_t>(r)] + std::log(static_cast<double>(st[r * 3]));
    (*lse)[static_cast<std::size_t>(r)] = static_cast<float>(l);
    if ((*tgt)[static_cast<std::size_t>(r)] == ignore_index) continue;
    total += (1.0 - eps) * (l - st[r * 3 + 1]) + eps * (l - st[r * 3 + 2] / static_cast<double>(V));
  }
  Tensor out = Tensor::from_floats({static_cast<float>(total / static_cast<double>(valid))}, {});  // 0/0: NaN, as cross_entropy
  if (!autograd::needs_grad({&x})) return out;
  autograd::record("vocab_parallel_cross_entropy", out, [x, tgt, lse, N, W, V, valid, ignore_index, eps,
                                                         first = v.first](const Tensor& g) {
    const double scale = static_cast<double>(g.item()) / static_cast<double>(valid);
    Tensor dx = Tensor::empty(x.shape());
    const float* xv = x.data<float>();
    float* d = dx.data<float>();
    kernels::parallel_for(N, std::max<std::int64_t>(1, 4096 / W), [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const std::int64_t t = (*tgt)[static_cast<std::size_t>(r)];
        float* dr = d + r * W;
        if (t == ignore_index) {
          std::fill(dr, dr + W, 0.0f);
          continue;
        }
        const double l = (*lse)[static_cast<std::size_t>(r)];
        for (std::int64_t j = 0; j < W; ++j) {
          const double p = std::exp(static_cast<double>(xv[r * W + j]) - l);
          dr[j] = static_cast<float>(scale * (p - eps / static_cast<double>(V) - (first + j == t ? 1.0 - eps : 0.0)));
        }
      }
    });
    autograd::accumulate(x, dx);
  });
  return out;
}

}  // namespace tfm::nn
