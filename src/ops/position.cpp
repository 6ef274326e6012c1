// Positional-encoding ops over the kernels in kernels/positional.h.
#include "tfm/ops/position.h"

#include "kernels/positional.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops/shape.h"

namespace tfm {

Tensor sinusoidal_positions(std::int64_t T, std::int64_t D, std::int64_t start, double base, RopePairing pairing) {
  TFM_CHECK(T >= 0 && D > 0 && D % 2 == 0, "sinusoidal_positions", "need T >= 0 and an even D > 0, got T=", T,
            " D=", D);
  Tensor out = Tensor::empty({T, D});
  kernels::sinusoidal_table(out.data<float>(), T, D, start, base, pairing == RopePairing::halves);
  return out;
}

Tensor position_ids(std::int64_t T, std::int64_t start) {
  Tensor out = Tensor::empty({T}, DType::i64);
  for (std::int64_t t = 0; t < T; ++t) out.data<std::int64_t>()[t] = start + t;
  return out;
}

namespace {
// Apply the rotation to a contiguous copy; rows of the flattened (N, D) view cycle through T.
Tensor rotate(const Tensor& x, const std::vector<std::int64_t>& row_pos, double base, RopePairing pairing,
              bool inverse) {
  Tensor out = x.clone();
  const std::int64_t D = x.size(-1);
  kernels::rope_rows(out.data<float>(), out.numel() / D, D, row_pos.data(), base, pairing == RopePairing::halves,
                     inverse);
  return out;
}
}  // namespace

Tensor rope(const Tensor& x, const Tensor& positions, double base, RopePairing pairing) {
  TFM_CHECK(x.dtype() == DType::f32, "rope", "x must be f32, got ", dtype_name(x.dtype()));
  TFM_CHECK(x.dim() >= 2, "rope", "x must be (..., T, D), got ", shape_str(x.shape()));
  const std::int64_t T = x.size(-2), D = x.size(-1);
  TFM_CHECK(D % 2 == 0, "rope", "head dim D must be even, got ", D);
  TFM_CHECK(positions.dim() == 1 && positions.size(0) == T && !dtype_is_float(positions.dtype()), "rope",
            "positions must be an integer (T) tensor with T=", T, ", got ", positions.str());
  const std::vector<std::int64_t> pos = positions.to_ints();
  std::vector<std::int64_t> row_pos(static_cast<std::size_t>(x.numel() / D));
  for (std::size_t r = 0; r < row_pos.size(); ++r) row_pos[r] = pos[r % static_cast<std::size_t>(T)];
  Tensor out = rotate(x, row_pos, base, pairing, false);
  if (autograd::needs_grad({&x})) {
    autograd::record("rope", out, [x, row_pos, base, pairing](const Tensor& g) {
      autograd::accumulate(x, rotate(g, row_pos, base, pairing, true));  // R^-1 = R^T
    });
  }
  return out;
}

Tensor t5_relative_buckets(std::int64_t Tq, std::int64_t Tk, bool bidirectional, std::int64_t num_buckets,
                           std::int64_t max_distance, std::int64_t query_offset) {
  TFM_CHECK(num_buckets >= 2 && max_distance >= 1, "t5_relative_buckets", "need num_buckets >= 2 and max_distance >= 1");
  Tensor out = Tensor::empty({Tq, Tk}, DType::i64);
  std::int64_t* o = out.data<std::int64_t>();
  for (std::int64_t i = 0; i < Tq; ++i)
    for (std::int64_t j = 0; j < Tk; ++j)
      o[i * Tk + j] = kernels::t5_relative_bucket(j - (i + query_offset), bidirectional, num_buckets, max_distance);
  return out;
}

}  // namespace tfm
