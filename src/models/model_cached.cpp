// The decoder stack with a KV cache: each call projects only the new tokens, appends their
// keys/values to the cache and attends over everything cached. Linear layers, norms and
// FFNs run on all rows at once; positions and attention are per row (each sequence has its
// own length). The per-row pieces and the few-row GEMM (kernels/gemm_rows.h) make a row's
// result independent of the rows beside it.
#include <algorithm>
#include <cmath>

#include "kernels/gemm_rows.h"
#include "models/model_impl.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/kv_cache.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

using model_detail::embed;

AttentionOptions base_options(const Model::Impl& m) {
  AttentionOptions o;
  o.scale = m.cfg.scale_attention_scores ? 1.0f / std::sqrt(static_cast<float>(m.cfg.dim_head())) : 1.0f;
  o.use_flash = m.fused_attention;
  return o;
}

// (1, H, T, Dh) attention output -> (1, T, H*Dh)
Tensor merge_heads(const Tensor& out) {
  return reshape(contiguous(transpose(out, 1, 2)), {1, out.size(2), out.size(1) * out.size(3)});
}

Tensor concat_rows(std::vector<Tensor>& rows) { return rows.size() == 1 ? rows[0] : concat(rows, 0); }

// Self-attention of new tokens h (R, T, C) of layer `l`, writing their keys/values at each
// row's cache position.
Tensor self_attention_cached(const Model::Impl& m, const Stack& s, const Layer& L, std::int64_t l, const Tensor& h,
                             const std::vector<std::int64_t>& slots, KVCache& cache) {
  const ModelConfig& c = m.cfg;
  const std::int64_t T = h.size(1);
  const nn::Attention::Heads hd = L.self_attn.project_self(h, nn::AttentionSetup{});  // q (R,H,T,Dh), k/v (R,Hkv,T,Dh)
  std::vector<Tensor> rows;
  for (std::size_t r = 0; r < slots.size(); ++r) {
    // Token t sits at cache position P + t, after the prefix (prefix tuning; P = 0 without).
    const std::int64_t slot = slots[r], ri = static_cast<std::int64_t>(r);
    const std::int64_t P = cache.prefix_positions(), tokens = cache.length(slot), pos = P + tokens;
    Tensor q = slice(hd.q, 0, ri, ri + 1), k = slice(hd.k, 0, ri, ri + 1), v = slice(hd.v, 0, ri, ri + 1);
    if (c.position == PositionKind::rope) {
      const Tensor p = position_ids(T, tokens);
      q = rope(q, p, c.rope_base, c.rope_pairing);
      k = rope(k, p, c.rope_base, c.rope_pairing);
    }
    cache.store(slot, l, 0, pos, k);
    cache.store(slot, l, 1, pos, v);
    AttentionOptions o = base_options(m);
    o.causal = true;  // queries are end-aligned: query i sees cached keys j <= pos + i (the prefix too)
    o.window = c.sliding_window;
    if (c.sparse_attention.enabled()) {  // the same pattern as the uncached pass (key-axis positions)
      o.window = c.sparse_attention.window;
      o.sparse = nn::sparse_pattern(c.sparse_attention, L.self_attn.layer, pos + T);
    }
    if (c.position == PositionKind::alibi) o.alibi_slopes = m.alibi;
    if (c.position == PositionKind::t5_relative) {
      const Tensor buckets = t5_relative_buckets(T, pos + T, false, c.relative_buckets, c.relative_max_distance, pos);  // prefix: P keys before
      o.bias = unsqueeze(permute(embedding(buckets, s.relative_bias), {2, 0, 1}), 0);  // (1, H, T, pos+T)
    }
    rows.push_back(merge_heads(scaled_dot_product_attention(q, cache.load(slot, l, 0, pos + T), cache.load(slot, l, 1, pos + T), o)));
  }
  return L.self_attn.o_proj(concat_rows(rows));
}

// Cross-attention of decoder states h (R, T, C) over each row's source keys/values.
Tensor cross_attention_cached(const Model::Impl& m, const Layer& L, std::int64_t l, const Tensor& h,
                              const std::vector<std::int64_t>& slots, const KVCache& cache) {
  const Tensor q_all = L.cross_attn.project_q(h, nn::AttentionSetup{});  // (R, H, T, Dh)
  std::vector<Tensor> rows;
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const std::int64_t src = cache.source_of(slots[r]), S = cache.source_length(src), ri = static_cast<std::int64_t>(r);
    TFM_CHECK(S > 0, "decode_cached", "slot ", slots[r], " reads source ", src, ", which was never encoded");
    const Tensor K = slice(cache.cross_keys(src, l), 2, 0, S), V = slice(cache.cross_values(src, l), 2, 0, S);
    rows.push_back(merge_heads(scaled_dot_product_attention(slice(q_all, 0, ri, ri + 1), K, V, base_options(m))));
  }
  return L.cross_attn.o_proj(concat_rows(rows));
}

// Prefix tuning: sizes the cache's prefix positions to the model's prefix and writes the
// decoder layers' prefix keys/values into every slot that starts a sequence (length 0).
void preload_prefix(const Model::Impl& m, const std::vector<std::int64_t>& slots, KVCache& cache) {
  const std::int64_t P = m.prefix ? m.prefix->num_virtual_tokens : 0;
  if (cache.prefix_positions() != P) cache.set_prefix_positions(P);
  if (P == 0) return;
  std::vector<std::pair<Tensor, Tensor>> kv;
  const std::size_t first = m.layout.encoder.layers.size();  // the decoder's layers follow the encoder's
  for (std::int64_t slot : slots) {
    if (cache.length(slot) != 0) continue;
    if (kv.empty()) kv = m.prefix_kv();
    for (std::int64_t l = 0; l < cache.layers(); ++l) {
      cache.store(slot, l, 0, 0, kv.at(first + static_cast<std::size_t>(l)).first);
      cache.store(slot, l, 1, 0, kv.at(first + static_cast<std::size_t>(l)).second);
    }
  }
}

// RETRO: appends each row's new ids to its slot's tokens, and retrieves, encodes and projects
// (every chunked cross-attention layer's keys and values) the neighbours of each chunk that the
// new positions read and the slot does not hold yet: chunk c for positions in chunk c + 1.
// Chunks completed by the new tokens are retrieved before the layers run, as RETRO's sampling
// does when a chunk ends.
void prepare_neighbours(const Model::Impl& m, const Tensor& ids, const std::vector<std::int64_t>& slots, KVCache& cache) {
  const std::int64_t chunk = m.cfg.retrieval.chunk_size, T = ids.size(1);
  const auto all_ids = ids.to_ints();
  struct Want {
    std::size_t row;  // of ids and slots
    std::int64_t c;
  };
  std::vector<Want> wanted;
  std::vector<std::int64_t> chunk_ids;
  std::vector<std::vector<std::int64_t>> seen(slots.size());  // each row's tokens with the new ones
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const std::int64_t slot = slots[r], len = cache.length(slot);
    std::vector<std::int64_t>& tokens = seen[r];
    tokens = cache.retro_tokens(slot);
    TFM_CHECK(static_cast<std::int64_t>(tokens.size()) >= len, "decode_cached", "slot ", slot, " holds ", len,
              " positions but RETRO saw ", tokens.size(), " of its tokens (KVCache::retro_tokens must be set for a "
              "cache filled another way)");
    tokens.resize(static_cast<std::size_t>(len));  // past the length: rolled back
    tokens.insert(tokens.end(), all_ids.begin() + static_cast<std::ptrdiff_t>(r) * T,
                  all_ids.begin() + static_cast<std::ptrdiff_t>(r + 1) * T);
    const auto& held = cache.retro_chunks(slot);
    for (std::int64_t c = 0; c < (len + T - 1) / chunk; ++c) {
      const std::vector<std::int64_t> span(tokens.begin() + c * chunk, tokens.begin() + (c + 1) * chunk);
      const auto it = held.find(c);
      if (it != held.end() && it->second.tokens == span) continue;
      wanted.push_back({r, c});
      chunk_ids.insert(chunk_ids.end(), span.begin(), span.end());
    }
  }
  const auto commit_tokens = [&] {
    for (std::size_t r = 0; r < slots.size(); ++r) cache.retro_tokens(slots[r]) = seen[r];
  };
  if (wanted.empty()) return commit_tokens();
  const auto N = static_cast<std::int64_t>(wanted.size());
  const Tensor neighbours = model_detail::retrieve(m, Tensor::from_ints(chunk_ids, {N, chunk}));  // (N, k, r)
  const std::int64_t k = neighbours.size(1), len = neighbours.size(2);
  nn::DropoutStream rng(false, 0);
  const Tensor enc = reshape(model_detail::encode_neighbours(m, reshape(neighbours, {N * k, len}), rng),
                             {N, k * len, m.cfg.d_model});
  std::vector<KVCache::RetroChunk> fresh(static_cast<std::size_t>(N));
  for (const Layer& L : m.layout.decoder.layers) {
    if (!L.has_cca) continue;
    const auto [keys, values] = L.cca.project_kv(enc, nn::AttentionSetup{});  // (N, Hkv, k*r, Dh)
    for (std::int64_t i = 0; i < N; ++i) {
      fresh[static_cast<std::size_t>(i)].kv.push_back(contiguous(slice(keys, 0, i, i + 1)).clone());
      fresh[static_cast<std::size_t>(i)].kv.push_back(contiguous(slice(values, 0, i, i + 1)).clone());
    }
  }
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const Want& w = wanted[i];
    fresh[i].tokens.assign(seen[w.row].begin() + w.c * chunk, seen[w.row].begin() + (w.c + 1) * chunk);
    cache.retro_chunks(slots[w.row])[w.c] = std::move(fresh[i]);
  }
  commit_tokens();
}

// Chunked cross-attention of new tokens h (R, T, C) in the `nth` chunked cross-attention layer:
// each run of a row's positions in chunk c >= 1 attends to the held neighbours of chunk c - 1,
// positions in chunk 0 get zeros (model.cpp's chunked_cross_attention, a chunk at a time).
Tensor chunked_cross_attention_cached(const Model::Impl& m, const Layer& L, std::size_t nth, const Tensor& h,
                                      const std::vector<std::int64_t>& slots, KVCache& cache) {
  const std::int64_t chunk = m.cfg.retrieval.chunk_size, T = h.size(1), C = h.size(2);
  std::vector<Tensor> rows;
  for (std::size_t r = 0; r < slots.size(); ++r) {
    const auto ri = static_cast<std::int64_t>(r);
    const std::int64_t len = cache.length(slots[r]);
    const Tensor row = slice(h, 0, ri, ri + 1);
    std::vector<Tensor> runs;
    for (std::int64_t a = 0; a < T;) {
      const std::int64_t c = (len + a) / chunk, b = std::min(T, (c + 1) * chunk - len);
      if (c == 0) {
        runs.push_back(Tensor::zeros({1, b - a, C}));
      } else {
        const KVCache::RetroChunk& held = cache.retro_chunks(slots[r]).at(c - 1);
        const Tensor q = L.cca.project_q(slice(row, 1, a, b), nn::AttentionSetup{});
        runs.push_back(L.cca.o_proj(merge_heads(
            scaled_dot_product_attention(q, held.kv.at(2 * nth), held.kv.at(2 * nth + 1), base_options(m)))));
      }
      a = b;
    }
    rows.push_back(runs.size() == 1 ? runs[0] : concat(runs, 1));
  }
  return concat_rows(rows);
}

// Below this many new tokens a pipelined step runs as one micro-batch (decode steps of a few
// rows read the weights, not compute: a second pass over them costs more than the overlap
// gains), and no micro-batch has fewer than kMinMicroBatchTokens: smaller ones were slower
// (docs/benchmarks.md), and one of 16 or fewer would take the GEMMs' row kernel (gemm_rows.h),
// which sums in another order than the tiles the whole step runs: with more, every result is
// the whole step's bit for bit.
constexpr std::int64_t kPipelineOverlapTokens = 64, kMinMicroBatchTokens = 32;
static_assert(kMinMicroBatchTokens > kernels::kRowInvariantMaxRows);

// How many micro-batches a pipelined step of `rows` x `tokens` goes through the stages in:
// groups of rows, or of one row's tokens (a prompt's prefill in chunks, each attending to the
// chunks before it through the cache), min(stages, ...) of them.
std::int64_t pipeline_micro_batches(const Model::Impl& m, std::int64_t rows, std::int64_t tokens) {
  // One pass per micro-batch re-reads the stage's weights: worth it where the tokens'
  // arithmetic, not the weights' bytes, sets the time (prefill, many rows; docs/benchmarks.md).
  const int stages = m.pp_stages;
  if (stages == 1 || rows * tokens < kPipelineOverlapTokens) return 1;
  // Every micro-batch keeps kMinMicroBatchTokens tokens or more.
  std::int64_t groups = std::min<std::int64_t>(rows > 1 ? rows : tokens, stages);
  while (groups > 1 && (rows > 1 ? rows / groups * tokens : tokens / groups) < kMinMicroBatchTokens) --groups;
  return groups;
}

// decode_cached's rows `slots` (ids (R, T)) through this stage's layers: the logits on the last
// stage (as decode_cached returns them), else nothing (the hidden states went on).
Tensor decode_rows(Model& model, const Model::Impl& m, const Tensor& ids, const std::vector<std::int64_t>& slots,
                   KVCache& cache, bool all_positions) {
  const ModelConfig& c = m.cfg;
  const std::int64_t R = ids.size(0), T = ids.size(1);
  nn::DropoutStream rng(false, 0);
  const bool first_stage = m.pp_stage == 0, last_stage = m.pp_stage == m.pp_stages - 1;
  Tensor x;
  if (first_stage) {
    std::vector<Tensor> rows;
    for (std::int64_t r = 0; r < R; ++r)
      rows.push_back(embed(m, slice(ids, 0, r, r + 1), Tensor(), cache.length(slots[static_cast<std::size_t>(r)]), rng));
    x = concat_rows(rows);  // (R, T, C)
  } else {
    x = Tensor::empty({R, T, c.d_model});
    m.pp->recv(x, m.pp_stage - 1);
  }

  const bool pre = c.norm_placement == NormPlacement::pre;
  auto sublayer = [&](const Tensor& x_in, const nn::Norm& norm, const nn::Bottleneck& adapter, auto&& f) {
    return pre ? add(x_in, adapter(f(norm(x_in)))) : norm(add(x_in, adapter(f(x_in))));
  };
  const Stack& s = m.layout.decoder;
  preload_prefix(m, slots, cache);
  if (c.retrieval.enabled()) prepare_neighbours(m, ids, slots, cache);
  std::size_t cca_layers = 0;
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    const Layer& L = s.layers[l];
    const auto li = static_cast<std::int64_t>(l);
    x = sublayer(x, L.self_norm, L.attn_adapter,
                 [&](const Tensor& h) { return self_attention_cached(m, s, L, li, h, slots, cache); });
    if (c.architecture == Architecture::encoder_decoder)
      x = sublayer(x, L.cross_norm, nn::Bottleneck{},
                   [&](const Tensor& h) { return cross_attention_cached(m, L, li, h, slots, cache); });
    if (L.has_cca)
      x = sublayer(x, L.cca_norm, nn::Bottleneck{},
                   [&](const Tensor& h) { return chunked_cross_attention_cached(m, L, cca_layers, h, slots, cache); });
    cca_layers += L.has_cca ? 1 : 0;
    x = sublayer(x, L.ffn_norm, L.ffn_adapter, [&](const Tensor& h) { return L.ffn(h, rng); });
  }
  for (std::int64_t slot : slots) cache.set_length(slot, cache.length(slot) + T);
  if (!last_stage) {  // on to the next stage
    m.pp->send(contiguous(x), m.pp_stage + 1);
    return Tensor();
  }
  if (s.has_final_norm) x = s.final_norm(x);
  return contiguous(all_positions ? model.head(x) : squeeze(model.head(slice(x, 1, T - 1, T)), 1));  // (R, T, V) or (R, V)
}

}  // namespace

void Model::encode_to_cache(const Tensor& src_ids, KVCache& cache, std::int64_t source) {
  TFM_CHECK(src_ids.dim() == 2 && src_ids.size(0) == 1, "encode_to_cache", "source must be (1, S), got ",
            shape_str(src_ids.shape()));
  TFM_CHECK(src_ids.size(1) >= 1 && src_ids.size(1) <= cache.source_capacity(), "encode_to_cache", "source of ",
            src_ids.size(1), " tokens; the cache holds sources of 1..", cache.source_capacity());
  ModelInputs in;
  in.input_ids = src_ids;
  encode_to_cache(in, cache, source);
}

void Model::encode_to_cache(const ModelInputs& in, KVCache& cache, std::int64_t source) {
  NoGradGuard no_grad;
  TFM_CHECK(impl_->cfg.architecture == Architecture::encoder_decoder, "encode_to_cache",
            "only encoder-decoder models have cross-attention");
  encoder_output_to_cache(encode(in), cache, source);
}

void Model::encode_parts_to_cache(const std::vector<Tensor>& parts, KVCache& cache, std::int64_t source) {
  NoGradGuard no_grad;
  TFM_CHECK(impl_->cfg.architecture == Architecture::encoder_decoder, "encode_parts_to_cache",
            "only encoder-decoder models have cross-attention");
  TFM_CHECK(!parts.empty(), "encode_parts_to_cache", "no parts to encode");
  std::vector<Tensor> outs;
  for (const Tensor& ids : parts) {
    TFM_CHECK(ids.dim() == 2 && ids.size(0) == 1 && ids.size(1) >= 1, "encode_parts_to_cache", "each part must be (1, S), got ",
              shape_str(ids.shape()));
    ModelInputs in;
    in.input_ids = ids;
    outs.push_back(encode(in));  // (1, S_i, C)
  }
  encoder_output_to_cache(outs.size() == 1 ? outs[0] : concat(outs, 1), cache, source);
}

void Model::encoder_output_to_cache(const Tensor& enc, KVCache& cache, std::int64_t source) {
  TFM_CHECK(enc.size(0) == 1, "encode_to_cache", "one source at a time, got a batch of ", enc.size(0));
  const std::int64_t S = enc.size(1);
  TFM_CHECK(S <= cache.source_capacity(), "encode_to_cache", "the encoder gave ", S,
            " positions; the cache holds sources of 1..", cache.source_capacity());
  const Stack& s = impl_->layout.decoder;
  for (std::size_t l = 0; l < s.layers.size(); ++l) {
    const auto [k, v] = s.layers[l].cross_attn.project_kv(enc, nn::AttentionSetup{});  // (1, Hkv, S, Dh)
    const auto li = static_cast<std::int64_t>(l);
    slice(cache.cross_keys(source, li), 2, 0, S).copy_(k);
    slice(cache.cross_values(source, li), 2, 0, S).copy_(v);
  }
  cache.set_source_length(source, S);
}

Tensor Model::decode_cached(const Tensor& ids, const std::vector<std::int64_t>& slots, KVCache& cache,
                            bool all_positions) {
  NoGradGuard no_grad;
  const Impl& m = *impl_;
  m.check_converted("decode_cached");
  const ModelConfig& c = m.cfg;
  TFM_CHECK(c.architecture != Architecture::encoder_only, "decode_cached", "an encoder-only model does not decode");
  model_detail::check_ids(ids, "ids");
  const std::int64_t R = ids.size(0), T = ids.size(1);
  TFM_CHECK(static_cast<std::int64_t>(slots.size()) == R, "decode_cached", R, " rows of ids for ", slots.size(), " slots");
  TFM_CHECK(cache.layers() == static_cast<std::int64_t>(m.layout.decoder.layers.size()), "decode_cached",
            "the cache has ", cache.layers(), " layers, the model's decoder ", m.layout.decoder.layers.size());
  for (std::int64_t slot : slots) {
    const std::int64_t len = cache.length(slot);
    TFM_CHECK(len + T <= cache.capacity(), "decode_cached", "sequence in slot ", slot, " would reach ", len + T,
              " tokens, past the context size ", cache.capacity());
  }
  // Pipeline stages (pipeline_parallel.cpp): a stage after the first takes the previous stage's
  // output instead of the ids' embeddings, and the last one's logits come back to every stage.
  // Rows, or one row's tokens, go through in micro-batches so that the stages overlap (stage s
  // runs a micro-batch while stage s + 1 runs the one before); the results are the same.
  const std::int64_t groups = pipeline_micro_batches(m, R, T);
  std::vector<Tensor> outputs;
  for (std::int64_t g = 0; g < groups; ++g) {
    if (R > 1) {  // rows [r0, r1)
      const std::int64_t r0 = g * R / groups, r1 = (g + 1) * R / groups;
      const std::vector<std::int64_t> part(slots.begin() + r0, slots.begin() + r1);
      outputs.push_back(decode_rows(*this, m, slice(ids, 0, r0, r1), part, cache, all_positions));
    } else {  // the row's tokens [t0, t1), after the chunks before them
      const std::int64_t t0 = g * T / groups, t1 = (g + 1) * T / groups;
      outputs.push_back(decode_rows(*this, m, slice(ids, 1, t0, t1), slots, cache, all_positions));
    }
  }
  const bool last_stage = m.pp_stage == m.pp_stages - 1;
  Tensor logits = !last_stage ? Tensor::empty(all_positions ? Shape{R, T, c.vocab_size} : Shape{R, c.vocab_size})
                  : R > 1 || groups == 1 ? concat_rows(outputs)
                  : all_positions ? concat(outputs, 1)
                                  : outputs.back();  // the last token's
  if (m.pp_stages > 1) m.pp->broadcast(logits, m.pp_stages - 1);
  return logits;
}

}  // namespace tfm
