// plan_activation_memory: what the autograd tape keeps per token, per layer, as the engine's ops
// record it (fused attention, the training default). The per-layer figures were read off the
// allocator (memory_stats) for each family and are checked against it in
// tests/unit/models/test_checkpoint_activations.cpp:
//   self-attention sublayer, norm to residual add: ~7 C per token (norm output, q/k/v, attention
//     output, o_proj output, dropout output, the sum), + H for the softmax statistics,
//     + 2 C with RoPE (the rotated q and k);
//   FFN sublayer: ~6 C (norm output, down projection, dropout, sum) + 2 d_ff (pre- and
//     post-activation), 4 d_ff when gated (gate, up, activation, product);
//   cross-attention (decoder of an encoder-decoder): ~6 C + H per target token, and the
//     memory's keys and values per source token.
#include <algorithm>
#include <limits>
#include <vector>

#include "tfm/error.h"
#include "tfm/memory_plan.h"
#include "tfm/model.h"

namespace tfm {
namespace {

// f32 elements per token that one layer keeps (self-attention + FFN).
std::int64_t layer_per_token(const ModelConfig& c) {
  const std::int64_t C = c.d_model, H = c.n_heads;
  const std::int64_t attn = 7 * C + H + (c.position == PositionKind::rope ? 2 * C : 0);
  const std::int64_t ffn = 6 * C + c.d_ff * (c.gated_ffn() ? 4 : 2);
  return attn + ffn;
}

// f32 elements per token of one stack's embeddings and final norm: the gathered rows, each
// added table (the gather and the sum), the embedding norm, the dropout output, the final norm.
std::int64_t embedding_per_token(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  std::int64_t n = 3 * C;
  if (c.position == PositionKind::learned) n += 2 * C;
  if (c.position == PositionKind::sinusoidal) n += C;
  if (c.type_vocab_size > 0) n += 2 * C;
  if (c.embedding_norm) n += C;
  return n;
}

}  // namespace

ActivationMemoryPlan plan_activation_memory(const ModelConfig& c, std::int64_t seq_len, std::int64_t batch) {
  TFM_CHECK(seq_len >= 1 && batch >= 1, "info", "training memory needs seq_len >= 1 and batch >= 1, got ", seq_len,
            " and ", batch);
  ActivationMemoryPlan p;
  p.seq_len = seq_len;
  p.batch = batch;

  const std::int64_t tokens = seq_len * batch, C = c.d_model;
  const std::int64_t per_layer = layer_per_token(c);
  // Embeddings (+ dropout), the final norm, and the head: the logits and the loss's softmax
  // for a language model, the pooled vector for a classifier.
  const std::int64_t head = c.head == HeadKind::lm || c.head == HeadKind::masked_lm ? 2 * c.vocab_size : 0;
  std::int64_t layers = 0, kept_inputs = 0, largest_layer = 0, fixed = 0;
  const auto stack = [&](std::int64_t n, std::int64_t per_token, std::int64_t extra) {
    layers += n * (per_token * tokens + extra);
    kept_inputs += n * C * tokens;
    largest_layer = std::max(largest_layer, per_token * tokens + extra);
    fixed += embedding_per_token(c) * tokens;
  };
  stack(c.n_layers, per_layer, 0);  // the encoder, or a decoder-only model's decoder
  if (c.architecture == Architecture::encoder_decoder)
    stack(c.decoder_layers(), per_layer + 6 * C + c.n_heads, 2 * c.kv_heads() * c.dim_head() * tokens);
  fixed += head * tokens;
  p.activation_bytes = 4 * (layers + fixed);
  p.checkpoint_kept_bytes = 4 * (kept_inputs + fixed);
  p.checkpoint_recompute_bytes = 4 * largest_layer;
  return p;
}

TrainingMemoryPlan plan_training_memory(const ModelConfig& c, std::int64_t batch, std::int64_t seq_len,
                                        int optimizer_buffers, bool checkpoint_activations) {
  TFM_CHECK(batch >= 1 && seq_len >= 1, "memory plan", "batch and sequence length must be >= 1");
  TrainingMemoryPlan p;
  p.batch = batch;
  p.seq_len = seq_len;
  for (const auto& s : parameter_specs(c)) p.weight_bytes += 4 * shape_numel(s.shape);
  p.gradient_bytes = p.weight_bytes;
  p.optimizer_bytes = optimizer_buffers * p.weight_bytes;
  const ActivationMemoryPlan a = plan_activation_memory(c, seq_len, batch);
  const std::int64_t tape = checkpoint_activations ? a.checkpointed_bytes() : a.activation_bytes;
  // The backward pass holds, beside the tape, the gradients of the layer it is in (as large as
  // that layer's activations) and the gradient of the logits.
  const bool lm = c.head == HeadKind::lm || c.head == HeadKind::masked_lm;
  const std::int64_t working = a.checkpoint_recompute_bytes + (lm ? 4 * batch * seq_len * c.vocab_size : 0);
  p.activation_bytes = tape + working;
  p.total_bytes = p.weight_bytes + p.gradient_bytes + p.optimizer_bytes + p.activation_bytes;
  return p;
}

PipelineStagePlan plan_pipeline_stages(const ModelConfig& c, const std::vector<std::int64_t>& in_flight,
                                       std::int64_t batch, std::int64_t seq_len, int optimizer_buffers,
                                       bool checkpoint_activations, bool even_split) {
  const auto stages = static_cast<std::int64_t>(in_flight.size());
  const std::int64_t L = c.n_layers;
  TFM_CHECK(c.architecture != Architecture::encoder_decoder && stages >= 1 && L >= stages, "memory plan",
            "pipeline stages split a decoder-only or encoder-only model of at least one layer per stage");
  // Linear in the layer count: a model of one layer and one of two give what a layer adds.
  auto plan_of = [&](std::int64_t layers) {
    ModelConfig one = c;
    one.n_layers = layers;
    return plan_training_memory(one, batch, seq_len, optimizer_buffers, checkpoint_activations);
  };
  const TrainingMemoryPlan p1 = plan_of(1), p2 = plan_of(2);
  const auto held = [](const TrainingMemoryPlan& p) { return p.weight_bytes + p.gradient_bytes + p.optimizer_bytes; };
  const std::int64_t layer_held = held(p2) - held(p1), shared_held = held(p1) - layer_held;
  const std::int64_t layer_act = p2.activation_bytes - p1.activation_bytes, edge_act = p1.activation_bytes - layer_act;
  const auto cost = [&](std::int64_t s, std::int64_t n) {  // stage s holding n layers
    const std::int64_t k = std::max<std::int64_t>(1, in_flight[static_cast<std::size_t>(s)]);
    return shared_held + n * layer_held + k * n * layer_act + (s == stages - 1 ? edge_act : 0);
  };
  // best[s][j]: the least largest cost of stages s.. holding layers j..L (each at least one).
  const std::int64_t inf = std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<std::int64_t>> best(static_cast<std::size_t>(stages + 1), std::vector<std::int64_t>(static_cast<std::size_t>(L + 1), inf));
  std::vector<std::vector<std::int64_t>> cut = best;
  best[static_cast<std::size_t>(stages)][static_cast<std::size_t>(L)] = 0;
  for (std::int64_t s = stages - 1; s >= 0; --s)
    for (std::int64_t j = s; j <= L - (stages - s); ++j)
      for (std::int64_t e = j + 1; e <= L - (stages - s - 1); ++e) {
        const std::int64_t rest = best[static_cast<std::size_t>(s + 1)][static_cast<std::size_t>(e)];
        if (rest == inf) continue;
        const std::int64_t worst = std::max(cost(s, e - j), rest);
        if (worst < best[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)]) {
          best[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = worst;
          cut[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = e;
        }
      }
  PipelineStagePlan plan;
  std::vector<std::int64_t> even{0};
  std::int64_t even_worst = 0;
  for (std::int64_t s = 0; s < stages; ++s) {
    const auto [first, last] = pipeline_layers(L, static_cast<int>(s), static_cast<int>(stages));
    even.push_back(last);
    even_worst = std::max(even_worst, cost(s, last - first));
  }
  if (even_split || even_worst <= best[0][0]) {
    plan.bounds = even;
  } else {
    plan.bounds = {0};
    for (std::int64_t s = 0; s < stages; ++s)
      plan.bounds.push_back(cut[static_cast<std::size_t>(s)][static_cast<std::size_t>(plan.bounds.back())]);
  }
  for (std::int64_t s = 0; s < stages; ++s)
    plan.stage_bytes.push_back(cost(s, plan.bounds[static_cast<std::size_t>(s) + 1] - plan.bounds[static_cast<std::size_t>(s)]));
  return plan;
}

PipelineStagePlan plan_encoder_decoder_stages(const ModelConfig& c,
                                              const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>& alive,
                                              std::int64_t batch, std::int64_t seq_len, int optimizer_buffers,
                                              bool checkpoint_activations, bool even_split) {
  const auto stages = static_cast<std::int64_t>(alive.size());
  const std::int64_t Le = c.n_layers, Ld = c.decoder_layers();
  TFM_CHECK(c.architecture == Architecture::encoder_decoder && stages >= 1 && Le >= stages && Ld >= stages, "memory plan",
            "an encoder-decoder's pipeline stages need at least one layer of each stack per stage");
  // Linear in each stack's layer count: one layer of each, and one more of either.
  auto plan_of = [&](std::int64_t encoder, std::int64_t decoder) {
    ModelConfig m = c;
    m.n_layers = encoder;
    m.n_decoder_layers = decoder;
    return plan_training_memory(m, batch, seq_len, optimizer_buffers, checkpoint_activations);
  };
  const TrainingMemoryPlan p11 = plan_of(1, 1), p21 = plan_of(2, 1), p12 = plan_of(1, 2);
  const auto held = [](const TrainingMemoryPlan& p) { return p.weight_bytes + p.gradient_bytes + p.optimizer_bytes; };
  const std::int64_t enc_held = held(p21) - held(p11), dec_held = held(p12) - held(p11);
  const std::int64_t shared_held = held(p11) - enc_held - dec_held;
  const std::int64_t enc_act = p21.activation_bytes - p11.activation_bytes, dec_act = p12.activation_bytes - p11.activation_bytes;
  const std::int64_t edge_act = p11.activation_bytes - enc_act - dec_act;
  const auto cost = [&](std::int64_t s, std::int64_t e, std::int64_t d) {  // stage s holding e and d layers
    std::int64_t act = 0;
    for (const auto& [encoders, decoders] : alive[static_cast<std::size_t>(s)])
      act = std::max(act, encoders * e * enc_act + decoders * d * dec_act);
    return shared_held + e * enc_held + d * dec_held + act + (s == stages - 1 ? edge_act : 0);
  };
  // best[s][je][jd]: the least largest cost of stages s.. holding encoder layers je..Le and
  // decoder layers jd..Ld (each stage at least one of each); cut: where stage s's runs end.
  const std::int64_t inf = std::numeric_limits<std::int64_t>::max();
  const auto at = [&](std::int64_t s, std::int64_t je, std::int64_t jd) {
    return static_cast<std::size_t>((s * (Le + 1) + je) * (Ld + 1) + jd);
  };
  std::vector<std::int64_t> best(static_cast<std::size_t>((stages + 1) * (Le + 1) * (Ld + 1)), inf);
  std::vector<std::pair<std::int64_t, std::int64_t>> cut(best.size());
  best[at(stages, Le, Ld)] = 0;
  for (std::int64_t s = stages - 1; s >= 0; --s) {
    const std::int64_t after = stages - s - 1;  // stages still to come, one layer of each at least
    std::vector<std::int64_t> costs(static_cast<std::size_t>((Le + 1) * (Ld + 1)));
    for (std::int64_t e = 1; e <= Le - s - after; ++e)
      for (std::int64_t d = 1; d <= Ld - s - after; ++d) costs[static_cast<std::size_t>(e * (Ld + 1) + d)] = cost(s, e, d);
    for (std::int64_t je = s; je <= Le - after - 1; ++je)
      for (std::int64_t jd = s; jd <= Ld - after - 1; ++jd)
        for (std::int64_t ee = je + 1; ee <= Le - after; ++ee)
          for (std::int64_t ed = jd + 1; ed <= Ld - after; ++ed) {
            const std::int64_t rest = best[at(s + 1, ee, ed)];
            if (rest == inf) continue;
            const std::int64_t worst = std::max(costs[static_cast<std::size_t>((ee - je) * (Ld + 1) + ed - jd)], rest);
            if (worst < best[at(s, je, jd)]) {
              best[at(s, je, jd)] = worst;
              cut[at(s, je, jd)] = {ee, ed};
            }
          }
  }
  std::vector<std::int64_t> enc{0}, dec{0};
  std::int64_t even_worst = 0;
  for (std::int64_t s = 0; s < stages; ++s) {
    const auto [ea, eb] = pipeline_layers(Le, static_cast<int>(s), static_cast<int>(stages));
    const auto [da, db] = pipeline_layers(Ld, static_cast<int>(s), static_cast<int>(stages));
    enc.push_back(eb);
    dec.push_back(db);
    even_worst = std::max(even_worst, cost(s, eb - ea, db - da));
  }
  if (!even_split && best[at(0, 0, 0)] < even_worst) {
    enc = {0};
    dec = {0};
    for (std::int64_t s = 0; s < stages; ++s) {
      const auto [ee, ed] = cut[at(s, enc.back(), dec.back())];
      enc.push_back(ee);
      dec.push_back(ed);
    }
  }
  PipelineStagePlan plan;
  for (std::int64_t s = 0; s < stages; ++s) {
    const auto u = static_cast<std::size_t>(s);
    plan.stage_bytes.push_back(cost(s, enc[u + 1] - enc[u], dec[u + 1] - dec[u]));
  }
  plan.bounds = enc;
  plan.bounds.insert(plan.bounds.end(), dec.begin(), dec.end());
  return plan;
}

}  // namespace tfm
