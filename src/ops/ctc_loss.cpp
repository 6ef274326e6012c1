// ctc_loss: connectionist temporal classification (Graves et al. 2006). The forward runs the
// alpha recursion per row in log space (double precision: long inputs sum thousands of
// log-probabilities) and keeps alpha; the backward runs beta and turns alpha·beta, summed over
// the extended label positions of each class, into the gradient with respect to log_probs.
//
// The gradient is the true one, d loss / d log_probs[t][c] = -exp(lse(alpha·beta)[t][c] + nll -
// log_probs[t][c]). PyTorch's kernel returns instead the gradient with respect to the logits
// under a log_softmax (it adds softmax); after log_softmax's backward the two agree, which is how
// the parity test compares them.
#include <cmath>
#include <limits>
#include <memory>

#include "base/log_add.h"
#include "kernels/parallel.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// One row's problem: its frames' log-probabilities and its labels with blanks between and
// around them (the extended sequence l' of length 2L + 1).
struct CtcRow {
  const float* lp;  // (T_total, V) row-major; only the first frames rows are read
  std::int64_t frames, V;
  std::vector<std::int64_t> ext;

  double at(std::int64_t t, std::int64_t s) const { return lp[t * V + ext[static_cast<std::size_t>(s)]]; }
  // Whether position s may be reached from s - 2 (skipping the blank between two labels).
  bool skip(std::int64_t s) const {
    return s >= 2 && ext[static_cast<std::size_t>(s)] != ext[0] && ext[static_cast<std::size_t>(s)] != ext[static_cast<std::size_t>(s - 2)];
  }
};

// alpha (frames, S) in log space; returns the row's negative log-likelihood (inf when no
// alignment fits in its frames).
double forward_row(const CtcRow& r, double* alpha) {
  const auto S = static_cast<std::int64_t>(r.ext.size());
  if (r.frames == 0) return S == 1 ? 0.0 : std::numeric_limits<double>::infinity();
  for (std::int64_t s = 0; s < S; ++s) alpha[s] = s < 2 ? r.at(0, s) : kNegInf;
  for (std::int64_t t = 1; t < r.frames; ++t) {
    const double* prev = alpha + (t - 1) * S;
    double* cur = alpha + t * S;
    for (std::int64_t s = 0; s < S; ++s) {
      double a = prev[s];
      if (s >= 1) a = log_add(a, prev[s - 1]);
      if (r.skip(s)) a = log_add(a, prev[s - 2]);
      cur[s] = a == kNegInf ? kNegInf : a + r.at(t, s);
    }
  }
  const double* last = alpha + (r.frames - 1) * S;
  return -(S >= 2 ? log_add(last[S - 1], last[S - 2]) : last[S - 1]);
}

// Adds scale · d nll / d log_probs for one row into g (T_total, V), given its alpha.
void backward_row(const CtcRow& r, const double* alpha, double nll, double scale, float* g) {
  const auto S = static_cast<std::int64_t>(r.ext.size());
  const std::int64_t V = r.V;
  if (r.frames == 0 || scale == 0.0) return;
  std::vector<double> beta(static_cast<std::size_t>(2 * S), kNegInf), occupancy(static_cast<std::size_t>(V));
  double* next = beta.data();
  double* cur = beta.data() + S;
  for (std::int64_t t = r.frames - 1; t >= 0; --t) {
    for (std::int64_t s = 0; s < S; ++s) {
      double b;
      if (t == r.frames - 1) {
        b = s >= S - 2 ? 0.0 : kNegInf;
      } else {
        b = next[s];
        if (s + 1 < S) b = log_add(b, next[s + 1]);
        if (s + 2 < S && r.skip(s + 2)) b = log_add(b, next[s + 2]);
      }
      cur[s] = b == kNegInf ? kNegInf : b + r.at(t, s);
    }
    std::fill(occupancy.begin(), occupancy.end(), kNegInf);
    for (std::int64_t s = 0; s < S; ++s) {
      double& o = occupancy[static_cast<std::size_t>(r.ext[static_cast<std::size_t>(s)])];
      o = log_add(o, alpha[t * S + s] + cur[s]);
    }
    float* gt = g + t * V;
    for (std::int64_t c = 0; c < V; ++c) {
      const double o = occupancy[static_cast<std::size_t>(c)];
      if (o != kNegInf) gt[c] += static_cast<float>(-std::exp(o + nll - r.lp[t * V + c]) * scale);
    }
    std::swap(next, cur);
  }
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& input_lengths, const Tensor& targets, const Tensor& target_lengths,
                std::int64_t blank, LossReduction reduction, bool zero_infinity) {
  const char* op = "ctc_loss";
  nn_util::check_f32(log_probs, op, "log_probs");
  TFM_CHECK(log_probs.dim() == 3, op, "log_probs must be (batch, frames, classes), got ", shape_str(log_probs.shape()));
  const std::int64_t B = log_probs.size(0), T = log_probs.size(1), V = log_probs.size(2);
  TFM_CHECK(blank >= 0 && blank < V, op, "blank ", blank, " is out of range for ", V, " classes");
  TFM_CHECK(targets.defined() && targets.dim() == 2 && targets.size(0) == B, op, "targets must be (batch ", B,
            ", max target length), got ", targets.defined() ? shape_str(targets.shape()) : "undefined");
  const std::int64_t L = targets.size(1);
  const std::vector<std::int64_t> in_len = nn_util::index_values(input_lengths, op, "input_lengths");
  const std::vector<std::int64_t> tgt_len = nn_util::index_values(target_lengths, op, "target_lengths");
  const std::vector<std::int64_t> tgt = nn_util::index_values(targets, op, "targets");
  TFM_CHECK(static_cast<std::int64_t>(in_len.size()) == B && static_cast<std::int64_t>(tgt_len.size()) == B, op,
            "input_lengths and target_lengths need one value per row (", B, "), got ", in_len.size(), " and ",
            tgt_len.size());
  auto rows = std::make_shared<std::vector<CtcRow>>(static_cast<std::size_t>(B));
  const Tensor x = contiguous(log_probs);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t n = in_len[static_cast<std::size_t>(b)], l = tgt_len[static_cast<std::size_t>(b)];
    TFM_CHECK(n >= 0 && n <= T, op, "input_lengths[", b, "] = ", n, " is outside [0, ", T, "]");
    TFM_CHECK(l >= 0 && l <= L, op, "target_lengths[", b, "] = ", l, " is outside [0, ", L, "]");
    CtcRow& r = (*rows)[static_cast<std::size_t>(b)];
    r.lp = x.data<float>() + b * T * V;
    r.frames = n;
    r.V = V;
    r.ext.assign(static_cast<std::size_t>(2 * l + 1), blank);
    for (std::int64_t i = 0; i < l; ++i) {
      const std::int64_t c = tgt[static_cast<std::size_t>(b * L + i)];
      TFM_CHECK(c >= 0 && c < V && c != blank, op, "targets[", b, ", ", i, "] = ", c, " is not a label of ", V,
                " classes other than the blank ", blank);
      r.ext[static_cast<std::size_t>(2 * i + 1)] = c;
    }
  }
  // alpha for every row, each row's block sized by its own extended length.
  std::vector<std::int64_t> offset(static_cast<std::size_t>(B) + 1, 0);
  for (std::int64_t b = 0; b < B; ++b)
    offset[static_cast<std::size_t>(b) + 1] =
        offset[static_cast<std::size_t>(b)] + (*rows)[static_cast<std::size_t>(b)].frames * static_cast<std::int64_t>((*rows)[static_cast<std::size_t>(b)].ext.size());
  auto alpha = std::make_shared<std::vector<double>>(static_cast<std::size_t>(offset.back()));
  auto nll = std::make_shared<std::vector<double>>(static_cast<std::size_t>(B));
  kernels::parallel_for(B, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b)
      (*nll)[static_cast<std::size_t>(b)] = forward_row((*rows)[static_cast<std::size_t>(b)], alpha->data() + offset[static_cast<std::size_t>(b)]);
  });
  // Each row's weight in the reduced loss; an impossible row (inf) counts 0 under zero_infinity.
  std::vector<double> row_loss(static_cast<std::size_t>(B)), weight(static_cast<std::size_t>(B), 1.0);
  for (std::int64_t b = 0; b < B; ++b) {
    const double v = (*nll)[static_cast<std::size_t>(b)];
    row_loss[static_cast<std::size_t>(b)] = zero_infinity && std::isinf(v) ? 0.0 : v;
    if (reduction == LossReduction::mean)
      weight[static_cast<std::size_t>(b)] = 1.0 / static_cast<double>(std::max<std::int64_t>(1, tgt_len[static_cast<std::size_t>(b)]) * B);
  }
  Tensor out;
  if (reduction == LossReduction::none) {
    std::vector<float> v(row_loss.begin(), row_loss.end());
    out = Tensor::from_floats(v, {B});
  } else {
    double total = 0;
    for (std::int64_t b = 0; b < B; ++b) total += row_loss[static_cast<std::size_t>(b)] * weight[static_cast<std::size_t>(b)];
    out = Tensor::from_floats({static_cast<float>(total)}, {});
  }
  if (autograd::needs_grad({&x})) {
    autograd::record(op, out, [x, rows, alpha, nll, offset, weight, reduction, zero_infinity, B](const Tensor& g) {
      std::vector<double> scale(static_cast<std::size_t>(B));
      for (std::int64_t b = 0; b < B; ++b) {
        const double gb = reduction == LossReduction::none ? static_cast<double>(g.data<float>()[b]) : static_cast<double>(g.item());
        const bool dropped = zero_infinity && std::isinf((*nll)[static_cast<std::size_t>(b)]);
        scale[static_cast<std::size_t>(b)] = dropped ? 0.0 : gb * (reduction == LossReduction::none ? 1.0 : weight[static_cast<std::size_t>(b)]);
      }
      Tensor dx = Tensor::zeros(x.shape());
      const std::int64_t TV = x.size(1) * x.size(2);
      kernels::parallel_for(B, 1, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b)
          backward_row((*rows)[static_cast<std::size_t>(b)], alpha->data() + offset[static_cast<std::size_t>(b)],
                       (*nll)[static_cast<std::size_t>(b)], scale[static_cast<std::size_t>(b)], dx.data<float>() + b * TV);
      });
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

}  // namespace tfm
