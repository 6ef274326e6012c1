// Linear, Norm, FeedForward and DropoutStream (Attention is in attention.cpp).
#include "nn/modules.h"

#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::nn {

Tensor fan_out(const Tensor& x, const RankSum& sum) {
  if (!sum || !autograd::needs_grad({&x})) return x;
  // A second handle on x's data (no copy) to hang the backward on.
  Tensor out = x.as_strided(x.shape(), x.strides(), x.offset());
  autograd::record("tensor_parallel_fan_out", out, [x, sum](const Tensor& g) {
    Tensor total = g.clone();
    (*sum)(total);
    autograd::accumulate(x, total);
  });
  return out;
}

Tensor sum_partials(const Tensor& y_in, const RankSum& sum) {
  if (!sum) return y_in;
  // A fresh product that nothing else reads, so it is summed in place (its backward does not
  // need it), and the output is a second handle on it: no copy is kept for the backward.
  Tensor y = contiguous(y_in);
  (*sum)(y);
  if (!autograd::needs_grad({&y})) return y;
  Tensor out = y.as_strided(y.shape(), y.strides(), y.offset());
  autograd::record("tensor_parallel_sum", out, [y](const Tensor& g) { autograd::accumulate(y, g); });
  return out;
}

Tensor DropoutStream::apply_shard_columns(const Tensor& x, double p) {
  if (shard_.ranks <= 1) return apply(x, p);
  if (!training_ || p <= 0.0) return x;
  TFM_CHECK(x.dim() >= 1 && x.size(-1) > 0, "dropout", "a shard's columns of ", x.str());
  const auto cols = static_cast<std::uint64_t>(x.size(-1)), width = cols * static_cast<std::uint64_t>(shard_.ranks);
  const auto rows = static_cast<std::uint64_t>(x.numel()) / cols;  // this window's rows
  std::uint64_t first_row = 0, all_rows = rows;                    // and where they sit in the batch's
  if (rows_.total != 0) {
    TFM_CHECK(rows_.count > 0 && rows % static_cast<std::uint64_t>(rows_.count) == 0, "dropout", "a tensor of ", rows,
              " rows is not ", rows_.count, " batch rows");
    const std::uint64_t per = rows / static_cast<std::uint64_t>(rows_.count);
    first_row = static_cast<std::uint64_t>(rows_.first) * per;
    all_rows = static_cast<std::uint64_t>(rows_.total) * per;
  }
  const std::uint64_t off = offset_ + first_row * width + static_cast<std::uint64_t>(shard_.rank) * cols;
  offset_ += all_rows * width;
  return dropout(x, static_cast<float>(p), true, seed_, off, width);
}

Tensor DropoutStream::apply(const Tensor& x, double p) {
  if (!training_ || p <= 0.0) return x;
  if (rows_.total == 0) {
    const std::uint64_t off = offset_;
    offset_ += static_cast<std::uint64_t>(x.numel());
    return dropout(x, static_cast<float>(p), true, seed_, off);
  }
  // The slice the whole batch would take, and these rows' part of it.
  TFM_CHECK(rows_.count > 0 && x.numel() % rows_.count == 0, "dropout", "a tensor of ", x.numel(),
            " elements is not ", rows_.count, " batch rows");
  const auto per_row = static_cast<std::uint64_t>(x.numel() / rows_.count);
  const std::uint64_t off = offset_ + static_cast<std::uint64_t>(rows_.first) * per_row;
  offset_ += static_cast<std::uint64_t>(rows_.total) * per_row;
  return dropout(x, static_cast<float>(p), true, seed_, off);
}

std::uint64_t DropoutStream::batch_offset(std::int64_t n) const {
  if (rows_.total == 0) return 0;
  TFM_CHECK(rows_.count > 0 && n % rows_.count == 0, "dropout", "a batch of ", n, " is not ", rows_.count, " rows");
  return static_cast<std::uint64_t>(rows_.first * (n / rows_.count));
}

Tensor drop_path(const Tensor& branch, double rate, DropoutStream& rng) {
  if (rate <= 0.0 || !rng.training()) return branch;
  Shape mask_shape(static_cast<std::size_t>(branch.dim()), 1);
  mask_shape[0] = branch.size(0);
  return mul(branch, rng.apply(Tensor::ones(mask_shape), rate));
}

std::uint64_t DropoutStream::next_seed() {
  // splitmix64 of (seed, call index): independent streams for kernels with their own counters.
  std::uint64_t z = seed_ + 0x9E3779B97F4A7C15ull * (++calls_);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Tensor Linear::operator()(const Tensor& x, DropoutStream* rng) const {
  // A compact weight (bf16, f16, block-quantized) is always stored (out, in), whatever the
  // family's layout (docs/quantization.md), so it goes through linear().
  const bool rows_out = !in_out || weight.dtype() != DType::f32;
  if (partial_sum) {  // this rank's share of the product, summed over the ranks, then the bias
    TFM_CHECK(!lora_a.defined(), "linear", name, ": LoRA factors on a tensor-parallel layer");
    const Tensor y = sum_partials(rows_out ? linear(x, weight, Tensor()) : matmul(x, weight), partial_sum);
    return bias.defined() ? add(y, bias) : y;
  }
  Tensor y = rows_out ? linear(x, weight, bias) : matmul(x, weight);
  if (!rows_out && bias.defined()) y = add(y, bias);
  if (!lora_a.defined()) return y;
  const Tensor h = rng != nullptr ? rng->apply(x, lora_dropout) : x;
  return add(y, mul_scalar(linear(linear(h, lora_a), lora_b), static_cast<float>(lora_scale)));
}

Tensor Bottleneck::operator()(const Tensor& h) const {
  if (!defined()) return h;
  Tensor z = down(h);
  switch (activation) {
    case BottleneckActivation::relu: z = relu(z); break;
    case BottleneckActivation::gelu: z = gelu(z); break;
    case BottleneckActivation::swish: z = silu(z); break;
  }
  return add(h, up(z));
}

Tensor Norm::operator()(const Tensor& x) const {
  switch (kind) {
    case NormKind::layer_norm: return layer_norm(x, weight, bias, static_cast<float>(eps));
    case NormKind::rms_norm: return rms_norm(x, weight, static_cast<float>(eps));
    case NormKind::scale_norm: {
      // ScaleNorm (Nguyen & Salazar 2019): g * x / ||x||, with eps inside the root so the
      // gradient stays finite at x = 0.
      const Tensor norm = sqrt(add_scalar(sum(mul(x, x), -1, true), static_cast<float>(eps)));
      return mul(div(x, norm), weight);
    }
  }
  fail("norm", "unknown norm kind");
}

Tensor FeedForward::operator()(const Tensor& x_in, DropoutStream& rng) const {
  const Tensor x = fan_out(x_in, input_grad_sum);
  Tensor h;
  switch (activation) {
    case FfnActivation::relu: h = relu(up(x, &rng)); break;
    case FfnActivation::gelu: h = gelu(up(x, &rng)); break;
    case FfnActivation::gelu_tanh: h = gelu(up(x, &rng), GeluApprox::tanh); break;
    case FfnActivation::silu: h = silu(up(x, &rng)); break;
    case FfnActivation::quick_gelu: h = quick_gelu(up(x, &rng)); break;
    // Gated variants (Shazeer 2020): act(x W_gate) * (x W_up).
    case FfnActivation::swiglu: h = mul(silu(gate(x, &rng)), up(x, &rng)); break;
    case FfnActivation::geglu:
      h = mul(gelu(gate(x, &rng), glu_gelu_tanh ? GeluApprox::tanh : GeluApprox::none), up(x, &rng));
      break;
    case FfnActivation::reglu: h = mul(relu(gate(x, &rng)), up(x, &rng)); break;
  }
  return down(rng.apply_shard_columns(h, dropout), &rng);
}

}  // namespace tfm::nn
