// Multi-head / grouped-query attention with projections, RoPE, masks and biases.
#include <algorithm>
#include <cmath>

#include "nn/modules.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::nn {
namespace {
// (B, T, H*Dh) -> (B, H, T, Dh)
Tensor split_heads(const Tensor& x, std::int64_t heads, std::int64_t dh) {
  return transpose(reshape(x, {x.size(0), x.size(1), heads, dh}), 1, 2);
}
}  // namespace

Tensor Attention::project_q(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const {
  return q_heads(fan_out(x, input_grad_sum), s, rng);
}

std::pair<Tensor, Tensor> Attention::project_kv(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const {
  return kv_heads(fan_out(x, input_grad_sum), s, rng);
}

Tensor Attention::q_heads(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const {
  TFM_CHECK(!qkv_proj.weight.defined(), "attention", "a fused qkv projection serves self-attention only");
  Tensor q = split_heads(q_proj(x, rng), n_heads, head_dim);
  return s.rope ? rope(q, s.q_positions, s.rope_base, s.rope_pairing) : q;
}

std::pair<Tensor, Tensor> Attention::kv_heads(const Tensor& x, const AttentionSetup& s, DropoutStream* rng) const {
  TFM_CHECK(!qkv_proj.weight.defined(), "attention", "a fused qkv projection serves self-attention only");
  Tensor k = split_heads(k_proj(x, rng), n_kv_heads, head_dim);
  Tensor v = split_heads(v_proj(x, rng), n_kv_heads, head_dim);
  if (s.rope) k = rope(k, s.k_positions, s.rope_base, s.rope_pairing);
  return {k, v};
}

Attention::Heads Attention::project_self(const Tensor& x_in, const AttentionSetup& s, DropoutStream* rng) const {
  const Tensor x = fan_out(x_in, input_grad_sum);  // once for q, k and v
  if (!qkv_proj.weight.defined()) {
    auto [k, v] = kv_heads(x, s, rng);
    return {q_heads(x, s, rng), k, v};
  }
  // One GEMM for all three (GPT-2's c_attn), then views of its column blocks.
  const auto parts = split(qkv_proj(x, rng), {n_heads * head_dim, n_kv_heads * head_dim, n_kv_heads * head_dim}, -1);
  Heads h{split_heads(parts[0], n_heads, head_dim), split_heads(parts[1], n_kv_heads, head_dim),
          split_heads(parts[2], n_kv_heads, head_dim)};
  if (s.rope) {
    h.q = rope(h.q, s.q_positions, s.rope_base, s.rope_pairing);
    h.k = rope(h.k, s.k_positions, s.rope_base, s.rope_pairing);
  }
  return h;
}

SparseAttentionPattern sparse_pattern(const SparseAttentionConfig& c, std::int64_t layer, std::int64_t Tk) {
  SparseAttentionPattern p;
  for (std::int64_t g = 0; g < std::min(c.global_first, Tk); ++g) p.global_tokens.push_back(g);
  for (std::int64_t g : c.global_tokens)
    if (g < Tk) p.global_tokens.push_back(g);
  p.random_blocks = c.random_blocks;
  p.block_size = c.block_size;
  p.seed = c.seed ^ (static_cast<std::uint64_t>(layer) + 1) * 0x9E3779B97F4A7C15ull;  // one stream per layer
  return p;
}

Tensor Attention::attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSetup& s,
                         DropoutStream& rng) const {
  AttentionOptions o;
  o.causal = s.causal;
  o.valid_lens = s.valid_lens;
  o.window = s.window;
  if (s.sparse.enabled()) {
    o.window = s.sparse.window;
    o.sparse = sparse_pattern(s.sparse, layer, k.size(2));
  }
  o.bias = s.bias;
  o.alibi_slopes = s.alibi_slopes;
  o.use_flash = s.fused;
  o.scale = s.scale_scores ? 1.0f / std::sqrt(static_cast<float>(head_dim)) : 1.0f;
  if (rng.training() && s.dropout > 0) {
    o.dropout_p = static_cast<float>(s.dropout);
    o.dropout_seed = rng.next_seed();
    o.dropout_batch_offset = rng.batch_offset(q.size(0));
  }
  o.head_offset = head_offset;
  o.heads_total = heads_total;
  Tensor keys = k, values = v;
  if (s.prefix_k.defined()) {  // prefix tuning: P learned keys/values before every row's own
    const std::int64_t B = k.size(0), P = s.prefix_k.size(2);
    keys = concat({expand(s.prefix_k, {B, k.size(1), P, k.size(3)}), k}, 2);
    values = concat({expand(s.prefix_v, {B, v.size(1), P, v.size(3)}), v}, 2);
    if (o.valid_lens.defined()) o.valid_lens = add_scalar(cast(o.valid_lens, DType::f32), static_cast<float>(P));
  }
  // q, k, v stay strided views of the projections: the kernels read any (B, H, T, Dh) layout
  // whose Dh stride is 1, so copying them first would only cost time.
  Tensor out;  // (B, H, Tq, Dh)
  if (s.capture != nullptr) {
    auto r = scaled_dot_product_attention_with_weights(q, keys, values, o);
    s.capture->push_back({s.capture_stack, s.capture_kind, layer, r.weights, head_offset, heads_total});
    out = r.out;
  } else {
    out = scaled_dot_product_attention(q, keys, values, o);
  }
  const Tensor merged = reshape(contiguous(transpose(out, 1, 2)), {q.size(0), q.size(2), n_heads * head_dim});
  return o_proj(merged, &rng);
}

Tensor Attention::operator()(const Tensor& x_q, const Tensor& x_kv, const AttentionSetup& s, DropoutStream& rng) const {
  TFM_CHECK(x_q.dim() == 3 && x_kv.dim() == 3, "attention", "inputs must be (B, T, C), got ", shape_str(x_q.shape()),
            " and ", shape_str(x_kv.shape()));
  if (x_q.storage() == x_kv.storage() && x_q.shape() == x_kv.shape() && x_q.offset() == x_kv.offset()) {
    const Heads h = project_self(x_q, s, &rng);
    return attend(h.q, h.k, h.v, s, rng);
  }
  const auto [k, v] = project_kv(x_kv, s, &rng);
  return attend(project_q(x_q, s, &rng), k, v, s, rng);
}

}  // namespace tfm::nn
