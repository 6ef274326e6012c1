// Model: creation, parameter checks, and the forward pass of every architecture family.
#include "tfm/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>

#include "models/init.h"
#include "models/layout.h"
#include "models/model_impl.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {

// ---- creation -----------------------------------------------------------------------------

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {
bool is_compact_dtype(DType t) { return t == DType::bf16 || t == DType::f16 || dtype_is_block(t); }
Tensor to_f32(const Tensor& t) { return dtype_is_block(t.dtype()) ? t.clone_as_f32() : cast(t, DType::f32); }

std::map<std::string, bool> compact_candidates(const ModelConfig& cfg, const std::map<std::string, Tensor>& params) {
  std::map<std::string, bool> out;
  for (const auto& w : model_detail::weight_matrices_of(cfg, params)) out[w.name] = w.in_out;
  return out;
}
}  // namespace

Model Model::create(const ModelConfig& cfg, std::uint64_t seed) {
  validate_model_config(cfg, "model");
  std::map<std::string, Tensor> params;
  init_parameters(cfg, parameter_specs(cfg), params, seed);
  return from_parameters(cfg, std::move(params));
}

Model Model::from_parameters(const ModelConfig& cfg, std::map<std::string, Tensor> params, bool keep_compact) {
  return build(cfg, std::move(params), keep_compact, false);
}

Model Model::from_parameters_deferred(const ModelConfig& cfg, std::map<std::string, Tensor> params, bool keep_compact) {
  return build(cfg, std::move(params), keep_compact, true);
}

Model Model::build(const ModelConfig& cfg, std::map<std::string, Tensor> params, bool keep_compact, bool defer) {
  validate_model_config(cfg, "model");
  const auto specs = parameter_specs(cfg);
  for (const auto& s : specs)
    TFM_CHECK(params.count(s.name) != 0, "model", "missing tensor '", s.name, "' (expected shape ", shape_str(s.shape), ")");
  // Weight matrices that may stay in a compact type (name -> in_out layout); the rest is f32.
  const std::map<std::string, bool> compact = compact_candidates(cfg, params);
  std::set<std::string> deferred;
  for (const auto& s : specs) {
    auto it = params.find(s.name);
    Tensor& t = it->second;
    const auto c = compact.find(s.name);
    if (c != compact.end() && (dtype_is_block(t.dtype()) || (keep_compact && is_compact_dtype(t.dtype())))) {
      // Kept in its type, stored (out, in) whatever the family's layout (GPT-2's Conv1D).
      Shape want = s.shape;
      if (c->second) std::reverse(want.begin(), want.end());
      TFM_CHECK(t.shape() == want, "model", "tensor '", s.name, "' (", dtype_name(t.dtype()), ") has shape ",
                shape_str(t.shape()), ", the config needs ", shape_str(want), " (compact weights are (out, in))");
      continue;
    }
    TFM_CHECK(t.shape() == s.shape, "model", "tensor '", s.name, "' has shape ", shape_str(t.shape()),
              ", the config needs ", shape_str(s.shape));
    if (t.dtype() != DType::f32) {
      if (defer) {
        deferred.insert(s.name);
        continue;  // (its autograd record comes with the conversion)
      }
      t = to_f32(t);
    }
    // Give every parameter its autograd record now, so the modules' handles share it and a
    // later requires_grad_() on the map's entry reaches them.
    if (it->second.autograd_meta() == nullptr) it->second.requires_grad_(false);
  }
  if (params.size() != specs.size()) {
    for (const auto& [name, t] : params) {
      bool known = false;
      for (const auto& s : specs) known = known || s.name == name;
      TFM_CHECK(known, "model", "unexpected tensor '", name, "' ", shape_str(t.shape()), " not in the config's model");
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->cfg = cfg;
  impl->params = std::move(params);
  impl->deferred = std::move(deferred);
  impl->layout = wire_layout(cfg, impl->params);
  if (cfg.position == PositionKind::alibi) impl->alibi = alibi_slopes(cfg.n_heads);
  return Model(std::move(impl));
}

void Model::convert_deferred_weights() {
  Impl& m = *impl_;
  if (m.deferred.empty()) return;
  m.layout = Layout{};  // (its handles would keep each stored tensor alive until the end)
  std::map<const void*, Tensor> converted;  // a tied table once
  for (const std::string& name : m.deferred) {
    Tensor& t = m.params.at(name);
    auto [it, fresh] = converted.try_emplace(t.raw_data());
    if (fresh) {
      it->second = to_f32(t);
      it->second.requires_grad_(false);
    }
    const Tensor stored = t;
    t = it->second;
    stored.storage()->release_file_pages();
  }
  m.deferred.clear();
  m.rewire();
}

void Model::Impl::check_converted(const char* what) const {
  TFM_CHECK(deferred.empty(), what, "the model's ", deferred.size(), " weights in their stored type (",
            *deferred.begin(), ", ...) are not converted yet (Model::convert_deferred_weights)");
}

const ModelConfig& Model::config() const { return impl_->cfg; }
std::map<std::string, Tensor>& Model::parameters() { return impl_->params; }
const std::map<std::string, Tensor>& Model::parameters() const { return impl_->params; }
std::int64_t Model::parameter_count() const {
  std::int64_t n = 0;
  for (const auto& [name, t] : impl_->params) n += t.numel();
  return n;
}
void Model::set_training(bool on) { impl_->training = on; }
bool Model::training() const { return impl_->training; }
void Model::set_fused_attention(bool on) { impl_->fused_attention = on; }
void Model::set_checkpoint_activations(bool on) { impl_->checkpoint_activations = on; }
bool Model::checkpoint_activations() const { return impl_->checkpoint_activations; }
void Model::set_attention_capture(std::vector<AttentionMap>* sink) { impl_->attention_sink = sink; }
void Model::set_hidden_capture(HiddenStates* sink) { impl_->hidden_sink = sink; }
void Model::set_retriever(Retriever r) { impl_->retriever = std::move(r); }
bool Model::has_retriever() const { return static_cast<bool>(impl_->retriever); }
void Model::set_dropout_seed(std::uint64_t seed, std::uint64_t step) {
  impl_->dropout_seed = seed;
  impl_->dropout_step = step;
  impl_->forward_calls = 0;
}
void Model::set_dropout_rows(std::int64_t first, std::int64_t count, std::int64_t total) {
  TFM_CHECK(total == 0 || (first >= 0 && count > 0 && first + count <= total), "model", "dropout rows [", first, ", ",
            first + count, ") are not within a batch of ", total);
  impl_->dropout_rows = total == 0 || count == total ? nn::DropoutRows{} : nn::DropoutRows{first, count, total};
}

// ---- forward ------------------------------------------------------------------------------
namespace model_detail {

void check_ids(const Tensor& ids, const char* what) {
  TFM_CHECK(ids.defined() && ids.dim() == 2 && !dtype_is_float(ids.dtype()), "model", what,
            " must be a (B, T) integer tensor, got ", ids.defined() ? ids.str() : std::string("nothing"));
}

Tensor embed(const Model::Impl& m, const Tensor& ids, const Tensor& types, std::int64_t offset, nn::DropoutStream& rng) {
  const ModelConfig& c = m.cfg;
  const Layout& l = m.layout;
  const std::int64_t T = ids.size(1);
  Tensor x = m.tp_vocab.ranks > 1 ? nn::vocab_parallel_embedding(ids, l.tok_emb, m.tp_vocab)  // (B, T, C)
                                  : embedding(ids, l.tok_emb);
  if (c.scale_embeddings) x = mul_scalar(x, static_cast<float>(std::sqrt(static_cast<double>(c.d_model))));
  if (c.position == PositionKind::learned) {
    TFM_CHECK(offset + T <= c.max_positions, "model", "positions ", offset, "..", offset + T - 1,
              " exceed max_positions ", c.max_positions);
    x = add(x, embedding(position_ids(T, offset), l.pos_emb));
  } else if (c.position == PositionKind::sinusoidal) {
    x = add(x, sinusoidal_positions(T, c.d_model, offset, 10000.0, c.sinusoid_pairing));
  }
  if (l.type_emb.defined()) {
    const Tensor t = types.defined() ? types : Tensor::zeros(ids.shape(), DType::i64);
    x = add(x, embedding(t, l.type_emb));
  }
  if (l.has_embed_norm) x = l.embed_norm(x);
  return rng.apply(x, c.embedding_dropout);
}

// Self-attention setup for one stack over T positions starting at `offset`.
nn::AttentionSetup self_setup(const Model::Impl& m, const Stack& s, bool causal, std::int64_t T, std::int64_t offset,
                              const Tensor& valid_lens) {
  const ModelConfig& c = m.cfg;
  nn::AttentionSetup a;
  a.causal = causal;
  a.valid_lens = valid_lens;
  a.window = c.sliding_window;
  a.sparse = c.sparse_attention;
  a.scale_scores = c.scale_attention_scores;
  a.dropout = c.attention_dropout;
  a.fused = m.fused_attention;
  a.capture = m.attention_sink;
  a.capture_stack = &s == &m.layout.encoder ? "encoder" : "decoder";
  a.capture_kind = "self";
  if (c.position == PositionKind::rope) {
    a.rope = true;
    a.rope_pairing = c.rope_pairing;
    a.rope_base = c.rope_base;
    a.q_positions = a.k_positions = position_ids(T, offset);
  }
  if (c.position == PositionKind::alibi) a.alibi_slopes = m.alibi;
  if (c.position == PositionKind::t5_relative) {
    // (1, H, T, T) = table[bucket(k - q)], learned: its gradient flows into the table. The keys
    // are the same T tokens as the queries (no cache here), so k - q does not depend on offset.
    // A prefix (prefix tuning) occupies the P key positions before the first token.
    const std::int64_t P = m.prefix ? m.prefix->num_virtual_tokens : 0;
    const Tensor buckets = t5_relative_buckets(T, P + T, !causal, c.relative_buckets, c.relative_max_distance, P);
    a.bias = unsqueeze(permute(embedding(buckets, s.relative_bias), {2, 0, 1}), 0);
  }
  return a;
}

nn::AttentionSetup cross_setup(const Model::Impl& m, const Tensor& src_valid_lens) {
  const ModelConfig& c = m.cfg;
  nn::AttentionSetup a;
  a.fused = m.fused_attention;
  a.capture = m.attention_sink;
  a.capture_stack = "decoder";
  a.capture_kind = "cross";
  a.valid_lens = src_valid_lens;
  a.scale_scores = c.scale_attention_scores;
  a.dropout = c.attention_dropout;
  return a;
}

// Layer i of n drops its branches with rate max_rate * i / (n - 1): none in the first layer,
// max_rate in the last (Huang et al. 2016's linear decay rule, as timm's drop_path_rate).
double drop_path_rate(const ModelConfig& c, std::size_t i, std::size_t n) {
  if (c.stochastic_depth <= 0.0) return 0.0;
  return n > 1 ? c.stochastic_depth * static_cast<double>(i) / static_cast<double>(n - 1) : c.stochastic_depth;
}

// RETRO's neighbours for one forward: their encodings (B * (L - 1), k * r, C), row b * (L - 1) + i
// holding chunk i's, read by the positions of chunk i + 1 (undefined when the sequence has
// one chunk), and the chunk size.
struct ChunkMemory {
  Tensor encoded;
  std::int64_t chunk = 0;
  nn::AttentionSetup setup;
};

// Chunked cross-attention over h (B, T, C): the positions of chunk i + 1 attend to all k * r
// neighbour tokens of chunk i (one softmax over them, no mask, no positions), the positions of
// chunk 0 get zeros. The chunks are one batch of B * (L - 1) rows of m queries.
Tensor chunked_cross_attention(const nn::Attention& attn, const Tensor& h, const ChunkMemory& mem, nn::DropoutStream& rng) {
  const std::int64_t B = h.size(0), T = h.size(1), C = h.size(2), m = mem.chunk;
  if (!mem.encoded.defined()) return Tensor::zeros({B, T, C});
  const std::int64_t reading = mem.encoded.size(0) / B;  // chunks 1 .. L-1
  Tensor q = slice(h, 1, m, T);
  if (const std::int64_t pad = reading * m - (T - m); pad > 0) q = concat({q, Tensor::zeros({B, pad, C})}, 1);
  const Tensor out = attn(reshape(contiguous(q), {B * reading, m, C}), mem.encoded, mem.setup, rng);
  return concat({Tensor::zeros({B, m, C}), slice(reshape(out, {B, reading * m, C}), 1, 0, T - m)}, 1);
}

// One layer. Post-norm: x = norm(x + f(x)); pre-norm: x = x + f(norm(x)).
Tensor run_layer(const ModelConfig& c, const Layer& L, Tensor x, const nn::AttentionSetup& self,
                 const Tensor* memory, const nn::AttentionSetup* cross, double drop_rate, nn::DropoutStream& rng,
                 const ChunkMemory* chunks = nullptr) {
  const bool pre = c.norm_placement == NormPlacement::pre;
  // A bottleneck adapter (identity when absent) transforms the branch before the residual sum.
  auto sublayer = [&](const nn::Norm& norm, const nn::Bottleneck& adapter, auto&& f) {
    if (pre) return add(x, nn::drop_path(adapter(rng.apply(f(norm(x)), c.dropout)), drop_rate, rng));
    return norm(add(x, nn::drop_path(adapter(rng.apply(f(x), c.dropout)), drop_rate, rng)));
  };
  x = sublayer(L.self_norm, L.attn_adapter, [&](const Tensor& h) { return L.self_attn(h, h, self, rng); });
  if (memory != nullptr)
    x = sublayer(L.cross_norm, nn::Bottleneck{}, [&](const Tensor& h) { return L.cross_attn(h, *memory, *cross, rng); });
  if (chunks != nullptr && L.has_cca)
    x = sublayer(L.cca_norm, nn::Bottleneck{}, [&](const Tensor& h) { return chunked_cross_attention(L.cca, h, *chunks, rng); });
  return sublayer(L.ffn_norm, L.ffn_adapter, [&](const Tensor& h) { return L.ffn(h, rng); });
}

// A layer under activation checkpointing: the forward advances `rng` as usual; the
// recomputation in the backward pass replays the same masks from a copy of its start state.
// What it captures by value (x, the setups, the memory) is what the layer keeps alive.
Tensor run_layer_checkpointed(const ModelConfig& c, const Layer& L, const Tensor& x, const nn::AttentionSetup& self,
                              const Tensor* memory, const nn::AttentionSetup* cross, double drop_rate,
                              nn::DropoutStream& rng, const ChunkMemory* chunks) {
  const nn::DropoutStream start = rng;
  const Tensor mem = memory != nullptr ? *memory : Tensor();
  const nn::AttentionSetup cross_setup_copy = cross != nullptr ? *cross : nn::AttentionSetup();
  nn::AttentionSetup self_copy = self;
  self_copy.capture = nullptr;  // inspection runs without autograd; never capture twice
  return autograd::checkpoint(
      "checkpoint_activations", [&] { return run_layer(c, L, x, self, memory, cross, drop_rate, rng, chunks); },
      [&c, &L, x, self_copy, mem, cross_setup_copy, has_memory = memory != nullptr, drop_rate, start,
       chunk_copy = chunks != nullptr ? *chunks : ChunkMemory(), has_chunks = chunks != nullptr] {
        nn::DropoutStream replay = start;
        return run_layer(c, L, x, self_copy, has_memory ? &mem : nullptr, has_memory ? &cross_setup_copy : nullptr,
                         drop_rate, replay, has_chunks ? &chunk_copy : nullptr);
      });
}

// finish: the stack's final norm (and its dropout) too; a pipeline stage before the last
// hands its layers' output on without them.
Tensor run_stack(const Model::Impl& m, const Stack& s, Tensor x, const nn::AttentionSetup& self, const Tensor* memory,
                 const nn::AttentionSetup* cross, nn::DropoutStream& rng, const ChunkMemory* chunks = nullptr,
                 bool finish = true) {
  const bool checkpointed = m.checkpoint_activations && grad_enabled();
  std::vector<Tensor>* hidden = m.hidden_sink == nullptr ? nullptr
                                : &s == &m.layout.encoder ? &m.hidden_sink->encoder : &m.hidden_sink->decoder;
  if (hidden != nullptr) hidden->push_back(x);
  const auto prefix = m.prefix_kv();  // prefix tuning: per layer, encoder layers first
  const std::size_t first = &s == &m.layout.decoder ? m.layout.encoder.layers.size() : 0;
  nn::AttentionSetup layer_self = self;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const Layer& L = s.layers[i];
    // A pipeline stage's layers keep their places in the whole model's depth.
    const bool decoder = &s == &m.layout.decoder, staged = m.pp_stages > 1 && (decoder || &s == &m.layout.encoder);
    const double rate =
        staged ? drop_path_rate(m.cfg, static_cast<std::size_t>(decoder ? m.pp_first : m.pp_enc_first) + i,
                                static_cast<std::size_t>(decoder ? m.pp_whole_cfg.decoder_layers() : m.pp_whole_cfg.n_layers))
               : drop_path_rate(m.cfg, i, s.layers.size());
    if (!prefix.empty()) std::tie(layer_self.prefix_k, layer_self.prefix_v) = prefix.at(first + i);
    x = checkpointed ? run_layer_checkpointed(m.cfg, L, x, layer_self, memory, cross, rate, rng, chunks)
                     : run_layer(m.cfg, L, x, layer_self, memory, cross, rate, rng, chunks);
    if (hidden != nullptr) hidden->push_back(x);
  }
  if (!finish) return x;
  if (s.has_final_norm) x = s.final_norm(x);
  if (s.dropout_after_final_norm) x = rng.apply(x, m.cfg.dropout);
  return x;
}

Tensor run_self_stack(const Model::Impl& m, const Stack& s, const Tensor& x, const nn::AttentionSetup& self,
                      nn::DropoutStream& rng) {
  return run_stack(m, s, x, self, nullptr, nullptr, rng);
}

// DeiT's two heads: the classifier on [CLS] and the distillation classifier on the token after it.
std::pair<Tensor, Tensor> distilled_heads(const Model::Impl& m, const Tensor& hidden) {
  const Layout& l = m.layout;
  return {l.classifier(squeeze(slice(hidden, 1, 0, 1), 1)), l.dist_classifier(squeeze(slice(hidden, 1, 1, 2), 1))};
}

Tensor encode_neighbours(const Model::Impl& m, const Tensor& ids, nn::DropoutStream& rng) {
  const Stack& s = m.layout.retriever;
  Tensor x = embed(m, ids, Tensor(), 0, rng);
  nn::AttentionSetup setup = self_setup(m, s, false, ids.size(1), 0, Tensor());
  setup.capture_stack = "retriever";
  for (std::size_t i = 0; i < s.layers.size(); ++i)
    x = run_layer(m.cfg, s.layers[i], x, setup, nullptr, nullptr, drop_path_rate(m.cfg, i, s.layers.size()), rng);
  if (s.has_final_norm) x = s.final_norm(x);
  return x;
}

Tensor retrieve(const Model::Impl& m, const Tensor& chunks) {
  const RetrievalConfig& r = m.cfg.retrieval;
  TFM_CHECK(static_cast<bool>(m.retriever), "model", "this RETRO model has no neighbours to read: pass "
            "ModelInputs::neighbours, or load it with its chunk database (retrieval_db.safetensors)");
  const Tensor n = m.retriever(chunks);
  TFM_CHECK(n.defined() && n.dim() == 3 && n.size(0) == chunks.size(0) && n.size(1) == r.neighbours &&
                n.size(2) == r.length() && !dtype_is_float(n.dtype()),
            "model", "the retriever gave ", n.defined() ? n.str() : std::string("nothing"), " for ", chunks.size(0),
            " chunks; the model reads (", chunks.size(0), ", ", r.neighbours, ", ", r.length(), ") token ids");
  return n;
}

// The encoded neighbours of a decoder-only forward's chunks 0 .. L-2 (L = ceil(T / m)), from
// the inputs' neighbours or the retriever.
ChunkMemory chunk_memory(const Model::Impl& m, const ModelInputs& in, nn::DropoutStream& rng) {
  const RetrievalConfig& r = m.cfg.retrieval;
  ChunkMemory mem;
  mem.chunk = r.chunk_size;
  mem.setup = cross_setup(m, Tensor());
  mem.setup.capture_kind = "chunked_cross";
  const std::int64_t B = in.input_ids.size(0), T = in.input_ids.size(1), m_ = r.chunk_size;
  const std::int64_t reading = (T + m_ - 1) / m_ - 1;  // chunks that read their predecessor's neighbours
  if (reading <= 0) return mem;
  TFM_CHECK(in.position_offset == 0, "model", "a RETRO forward starts at position 0 (chunks are counted from the "
            "sequence's start); use decode_cached to continue a sequence, got position_offset ", in.position_offset);
  const std::int64_t k = r.neighbours, len = r.length();
  Tensor n = in.neighbours;
  if (n.defined()) {
    TFM_CHECK(n.dim() == 4 && n.size(0) == B && n.size(1) >= reading && n.size(2) == k && n.size(3) == len &&
                  !dtype_is_float(n.dtype()),
              "model", "neighbours must be (B, L, k, r) = (", B, ", >= ", reading, ", ", k, ", ", len,
              ") token ids for ", T, " positions in chunks of ", m_, ", got ", n.str());
    n = slice(n, 1, 0, reading);
  } else {
    const Tensor chunks = reshape(contiguous(slice(in.input_ids, 1, 0, reading * m_)), {B * reading, m_});
    n = retrieve(m, chunks);
  }
  const Tensor enc = encode_neighbours(m, reshape(contiguous(n), {B * reading * k, len}), rng);  // (B*reading*k, r, C)
  mem.encoded = reshape(enc, {B * reading, k * len, m.cfg.d_model});
  return mem;
}

}  // namespace model_detail

using namespace model_detail;

namespace {

// A stack of a pipeline stage (inference): stage 0 embeds the inputs, each stage runs its
// layers on what the previous one sends (its shape first: a later stage cannot tell an audio
// encoder's length from the inputs), the last applies the final norm, and its output (an
// encoder's memory, which every stage's cross-attention reads; a decoder's last hidden states)
// comes back to all of them. An encoder-decoder's decoder layers read `memory` (every stage's
// copy) through `cross`.
Tensor run_staged(const Model::Impl& m, const Stack& stack, bool causal, std::int64_t offset,
                  const std::function<Tensor(nn::DropoutStream&)>& embed_inputs, const Tensor& valid_lens,
                  const Tensor* memory = nullptr, const nn::AttentionSetup* cross = nullptr) {
  nn::DropoutStream rng(false, 0);
  const bool first = m.pp_stage == 0, last = m.pp_stage == m.pp_stages - 1;
  Tensor x, shape = Tensor::zeros({3});
  if (first) {
    x = embed_inputs(rng);
    for (int d = 0; d < 3; ++d) shape.data<float>()[d] = static_cast<float>(x.size(d));
  } else {
    m.pp->recv(shape, m.pp_stage - 1);
    const float* d = shape.data<float>();
    x = Tensor::empty({static_cast<std::int64_t>(d[0]), static_cast<std::int64_t>(d[1]), static_cast<std::int64_t>(d[2])});
    m.pp->recv(x, m.pp_stage - 1);
  }
  const auto setup = self_setup(m, stack, causal, x.size(1), offset, valid_lens);
  x = contiguous(run_stack(m, stack, x, setup, memory, cross, rng, nullptr, last));
  if (!last) {
    m.pp->send(shape, m.pp_stage + 1);
    m.pp->send(x, m.pp_stage + 1);
  }
  m.pp->broadcast(x, m.pp_stages - 1);
  return x;
}

}  // namespace

namespace {
Tensor encode_inputs(Model::Impl& m, const ModelInputs& in) {
  m.check_converted("encode");
  TFM_CHECK(m.cfg.architecture != Architecture::decoder_only, "model", "a decoder_only model has no encoder");
  if (m.pp_stages > 1) {
    TFM_CHECK(!m.training, "model", "pipeline stage ", m.pp_stage, " of ", m.pp_stages,
              ": an encoder's stages run inference only");
    NoGradGuard no_grad;
    const Stack& enc = m.layout.encoder;
    if (m.cfg.reads_images())
      return run_staged(m, enc, false, 0, [&](nn::DropoutStream& rng) { return embed_patches(m, in.pixel_values, rng); }, Tensor());
    if (m.cfg.reads_audio())
      return run_staged(m, enc, false, 0, [&](nn::DropoutStream& rng) { return embed_audio(m, in.input_features, rng); }, Tensor());
    check_ids(in.input_ids, "input_ids");
    return run_staged(m, enc, false, 0,
                      [&](nn::DropoutStream& rng) { return embed(m, in.input_ids, in.token_type_ids, 0, rng); },
                      in.valid_lens);
  }
  nn::DropoutStream rng = m.stream();
  if (m.cfg.reads_images()) {
    const Tensor x = embed_patches(m, in.pixel_values, rng);
    const auto setup = self_setup(m, m.layout.encoder, false, x.size(1), 0, Tensor());
    return run_stack(m, m.layout.encoder, x, setup, nullptr, nullptr, rng);
  }
  if (m.cfg.reads_audio()) {
    const Tensor x = embed_audio(m, in.input_features, rng);
    const auto setup = self_setup(m, m.layout.encoder, false, x.size(1), 0, Tensor());
    return run_stack(m, m.layout.encoder, x, setup, nullptr, nullptr, rng);
  }
  check_ids(in.input_ids, "input_ids");
  const Tensor x = embed(m, in.input_ids, in.token_type_ids, 0, rng);
  const auto setup = self_setup(m, m.layout.encoder, false, in.input_ids.size(1), 0, in.valid_lens);
  return run_stack(m, m.layout.encoder, x, setup, nullptr, nullptr, rng);
}
}  // namespace

Tensor Model::encode(const ModelInputs& in) {
  CaptureGather gather(*impl_);
  Tensor out = encode_inputs(*impl_, in);
  gather.finish();
  return out;
}

Tensor Model::decode(const ModelInputs& in, const Tensor& encoder_hidden) {
  impl_->check_converted("decode");
  Impl& m = *impl_;
  if (m.pp_stages > 1) {  // the last hidden states on every stage (no gradients)
    TFM_CHECK(!m.training, "model", "pipeline stage ", m.pp_stage, " of ", m.pp_stages,
              " holds some of the layers: training runs forward_stage");
    NoGradGuard no_grad;
    if (m.cfg.architecture == Architecture::encoder_decoder) {  // every stage holds the memory (encode)
      check_ids(in.decoder_input_ids, "decoder_input_ids");
      TFM_CHECK(encoder_hidden.defined(), "model", "decode needs the encoder output");
      const auto cross = cross_setup(m, in.valid_lens);
      return run_staged(m, m.layout.decoder, true, in.position_offset,
                        [&](nn::DropoutStream& rng) { return embed(m, in.decoder_input_ids, Tensor(), in.position_offset, rng); },
                        in.decoder_valid_lens, &encoder_hidden, &cross);
    }
    check_ids(in.input_ids, "input_ids");
    return run_staged(m, m.layout.decoder, true, in.position_offset,
                      [&](nn::DropoutStream& rng) { return embed(m, in.input_ids, Tensor(), in.position_offset, rng); },
                      in.valid_lens);
  }
  nn::DropoutStream rng = m.stream();
  if (m.cfg.architecture == Architecture::decoder_only) {
    check_ids(in.input_ids, "input_ids");
    const Tensor x = embed(m, in.input_ids, Tensor(), in.position_offset, rng);
    const auto setup = self_setup(m, m.layout.decoder, true, in.input_ids.size(1), in.position_offset, in.valid_lens);
    if (m.cfg.retrieval.enabled()) {
      const ChunkMemory chunks = chunk_memory(m, in, rng);
      return run_stack(m, m.layout.decoder, x, setup, nullptr, nullptr, rng, &chunks);
    }
    return run_stack(m, m.layout.decoder, x, setup, nullptr, nullptr, rng);
  }
  TFM_CHECK(m.cfg.architecture == Architecture::encoder_decoder, "model", "an encoder_only model has no decoder");
  check_ids(in.decoder_input_ids, "decoder_input_ids");
  TFM_CHECK(encoder_hidden.defined(), "model", "decode needs the encoder output");
  const Tensor x = embed(m, in.decoder_input_ids, Tensor(), in.position_offset, rng);
  const auto self = self_setup(m, m.layout.decoder, true, in.decoder_input_ids.size(1), in.position_offset,
                               in.decoder_valid_lens);
  const auto cross = cross_setup(m, in.valid_lens);
  return run_stack(m, m.layout.decoder, x, self, &encoder_hidden, &cross, rng);
}

Tensor Model::head(const Tensor& hidden, const Tensor& valid_lens, bool shard_logits) {
  impl_->check_converted("head");
  const Impl& m = *impl_;
  const ModelConfig& c = m.cfg;
  const Layout& l = m.layout;
  // A vocabulary-split shard: its columns of the logits from the whole hidden states (whose
  // gradient is then summed over the shards), gathered unless the loss reads them as they are.
  const bool split = m.tp_vocab.ranks > 1;
  const auto vocabulary = [&](const Tensor& columns) {
    return split && !shard_logits ? nn::gather_vocab_columns(columns, m.tp_vocab) : columns;
  };
  switch (c.head) {
    case HeadKind::none: return hidden;
    case HeadKind::lm: {
      TFM_CHECK(l.lm_head.defined(), "model", "no lm_head weight");
      Tensor h = l.lm_scale != 1.0 ? mul_scalar(hidden, static_cast<float>(l.lm_scale)) : hidden;
      if (split) h = nn::fan_out(h, m.tp_sum);
      if (l.logits_bias.defined()) return vocabulary(add(linear(h, l.lm_head), l.logits_bias));  // + (1, V) broadcast
      return vocabulary(linear(h, l.lm_head));  // (B, T, V)
    }
    case HeadKind::masked_lm: {
      Tensor t = l.mlm_norm(gelu(l.mlm_dense(hidden)));
      if (split) t = nn::fan_out(t, m.tp_sum);
      return vocabulary(linear(t, l.mlm_decoder, l.mlm_bias));
    }
    case HeadKind::classifier: {
      if (l.dist_classifier.weight.defined()) {
        const auto [cls, dist] = distilled_heads(m, hidden);
        return mul_scalar(add(cls, dist), 0.5f);
      }
      Tensor pooled;
      if (c.reads_images() && c.pooling == Pooling::mean) {
        pooled = mean(slice(hidden, 1, c.prefix_tokens(), hidden.size(1)), 1);  // the patches' average
      } else if (c.pooling == Pooling::first) {
        pooled = squeeze(slice(hidden, 1, 0, 1), 1);  // (B, C)
      } else {
        // Mean over valid positions: mask (B, T, 1) of 1s for t < valid_len.
        const std::int64_t B = hidden.size(0), T = hidden.size(1);
        std::vector<float> mask(static_cast<std::size_t>(B * T), 1.0f), count(static_cast<std::size_t>(B), static_cast<float>(T));
        if (valid_lens.defined()) {
          const auto lens = valid_lens.to_ints();
          for (std::int64_t b = 0; b < B; ++b) {
            const std::int64_t n = std::min<std::int64_t>(std::max<std::int64_t>(lens[static_cast<std::size_t>(b)], 1), T);
            count[static_cast<std::size_t>(b)] = static_cast<float>(n);
            for (std::int64_t t = n; t < T; ++t) mask[static_cast<std::size_t>(b * T + t)] = 0.0f;
          }
        }
        const Tensor summed = sum(mul(hidden, Tensor::from_floats(mask, {B, T, 1})), 1);  // (B, C)
        pooled = div(summed, Tensor::from_floats(count, {B, 1}));
      }
      if (l.pooler.weight.defined()) pooled = tanh(l.pooler(pooled));  // BERT's pooler
      return l.classifier(pooled);  // (B, num_labels)
    }
  }
  fail("model", "unknown head");
}

void Model::StreamPosition::to_floats(float* out) const {
  static_assert(2 * sizeof(std::uint64_t) == kFloats * sizeof(float));
  std::memcpy(out, &offset, sizeof offset);
  std::memcpy(out + 2, &calls, sizeof calls);
}

Model::StreamPosition Model::StreamPosition::from_floats(const float* in) {
  StreamPosition at;
  std::memcpy(&at.offset, in, sizeof at.offset);
  std::memcpy(&at.calls, in + 2, sizeof at.calls);
  return at;
}

Shape Model::stage_hidden_shape(const ModelInputs& in) const {
  const Impl& m = *impl_;
  const std::int64_t C = m.cfg.d_model;
  if (m.cfg.architecture == Architecture::encoder_decoder) {
    check_ids(in.decoder_input_ids, "decoder_input_ids");
    return {in.decoder_input_ids.size(0), in.decoder_input_ids.size(1), C};
  }
  if (m.cfg.reads_images()) {
    TFM_CHECK(in.pixel_values.defined() && in.pixel_values.dim() == 4, "model", "pixel_values must be (B, channels, H, W)");
    return {in.pixel_values.size(0), m.cfg.image_tokens(), C};
  }
  TFM_CHECK(!m.cfg.reads_audio(), "model", "an audio encoder's stages are trained as an encoder-decoder's");
  check_ids(in.input_ids, "input_ids");
  return {in.input_ids.size(0), in.input_ids.size(1), C};
}

Shape Model::stage_memory_shape(const ModelInputs& in) const {
  const Impl& m = *impl_;
  TFM_CHECK(m.cfg.architecture == Architecture::encoder_decoder, "model", "only an encoder-decoder has a memory");
  if (m.cfg.reads_audio()) {  // the stem's second convolution halves the frames
    TFM_CHECK(in.input_features.defined() && in.input_features.dim() == 3, "model", "input_features must be (B, mel bins, frames)");
    return {in.input_features.size(0), (in.input_features.size(2) - 1) / 2 + 1, m.cfg.d_model};
  }
  check_ids(in.input_ids, "input_ids");
  return {in.input_ids.size(0), in.input_ids.size(1), m.cfg.d_model};
}

namespace {
// A later stage's input: the previous stage's output, of the shape the inputs give.
void check_received(const Model::Impl& m, const Tensor& received, const Shape& shape, const char* what) {
  TFM_CHECK(received.defined() && received.shape() == shape, "model", "stage ", m.pp_stage, " received ",
            received.defined() ? received.str() : std::string("nothing"), ", not (", shape[0], ", ", shape[1], ", ",
            shape[2], ") ", what);
}

// A training stage's dropout stream: one process's stream number `call` of the step (its
// encode() draws the first, an encoder-decoder's decode() the second), continued on a later
// stage where the previous stage's ended (`at`), whose output `received` must be of `shape`.
nn::DropoutStream stage_stream(Model::Impl& m, std::uint64_t call, const Tensor& received, const Shape& shape,
                               const char* what, const Model::StreamPosition& at) {
  m.forward_calls = call;
  nn::DropoutStream rng = m.stream();
  if (m.pp_stage > 0) {
    check_received(m, received, shape, what);
    rng.seek({at.offset, at.calls});
  }
  return rng;
}
}  // namespace

Tensor Model::encode_stage(const ModelInputs& in, const Tensor& received, StreamPosition& stream) {
  Impl& m = *impl_;
  m.check_converted("encode_stage");
  TFM_CHECK(m.cfg.architecture == Architecture::encoder_decoder, "model", "encode_stage runs an encoder-decoder's stage");
  const Shape shape = stage_memory_shape(in);
  nn::DropoutStream rng = stage_stream(m, 0, received, shape, "encoder states", stream);
  Tensor x = received;
  if (m.pp_stage == 0)
    x = m.cfg.reads_audio() ? embed_audio(m, in.input_features, rng) : embed(m, in.input_ids, in.token_type_ids, 0, rng);
  const auto setup = self_setup(m, m.layout.encoder, false, shape[1], 0, m.cfg.reads_audio() ? Tensor() : in.valid_lens);
  x = run_stack(m, m.layout.encoder, x, setup, nullptr, nullptr, rng, nullptr, m.pp_stage == m.pp_stages - 1);
  std::tie(stream.offset, stream.calls) = rng.position();
  return x;
}

Tensor Model::decode_stage(const ModelInputs& in, const Tensor& received, const Tensor& memory, StreamPosition& stream) {
  Impl& m = *impl_;
  m.check_converted("decode_stage");
  TFM_CHECK(m.cfg.architecture == Architecture::encoder_decoder, "model", "decode_stage runs an encoder-decoder's stage");
  const Shape shape = stage_hidden_shape(in);
  check_received(m, memory, stage_memory_shape(in), "memory");
  nn::DropoutStream rng = stage_stream(m, 1, received, shape, "decoder states", stream);
  Tensor x = m.pp_stage == 0 ? embed(m, in.decoder_input_ids, Tensor(), in.position_offset, rng) : received;
  const bool last = m.pp_stage == m.pp_stages - 1;
  const auto self = self_setup(m, m.layout.decoder, true, shape[1], in.position_offset, in.decoder_valid_lens);
  const auto cross = cross_setup(m, in.valid_lens);
  x = run_stack(m, m.layout.decoder, x, self, &memory, &cross, rng, nullptr, last);
  std::tie(stream.offset, stream.calls) = rng.position();
  return last ? head(x, in.decoder_valid_lens, in.shard_logits) : x;
}

Tensor Model::forward_stage(const ModelInputs& in, const Tensor& received, StreamPosition& stream) {
  Impl& m = *impl_;
  m.check_converted("forward_stage");
  const bool first = m.pp_stage == 0, last = m.pp_stage == m.pp_stages - 1;
  const bool decoder = m.cfg.architecture == Architecture::decoder_only;
  TFM_CHECK(decoder || m.cfg.architecture == Architecture::encoder_only, "model",
            "forward_stage runs a decoder-only or an encoder-only model's stage");
  const Shape shape = stage_hidden_shape(in);
  nn::DropoutStream rng = stage_stream(m, 0, received, shape, "hidden states", stream);
  Tensor x = received;
  if (first && decoder)
    x = embed(m, in.input_ids, Tensor(), in.position_offset, rng);
  else if (first)
    x = m.cfg.reads_images() ? embed_patches(m, in.pixel_values, rng) : embed(m, in.input_ids, in.token_type_ids, 0, rng);
  // As decode() and encode() run them: the LM's causal layers, or the encoder's over the valid positions.
  const Stack& stack = decoder ? m.layout.decoder : m.layout.encoder;
  const Tensor lens = m.cfg.reads_images() ? Tensor() : in.valid_lens;
  const auto setup = self_setup(m, stack, decoder, shape[1], decoder ? in.position_offset : 0, lens);
  x = run_stack(m, stack, x, setup, nullptr, nullptr, rng, nullptr, last);
  std::tie(stream.offset, stream.calls) = rng.position();
  return last ? head(x, in.valid_lens, in.shard_logits) : x;
}

Tensor Model::forward_pipelined(const ModelInputs& in) {
  Impl& m = *impl_;
  NoGradGuard no_grad;  // each stage's part only: the gradient would stop at the stage's edge
  check_ids(in.input_ids, "input_ids");
  const std::int64_t B = in.input_ids.size(0), T = in.input_ids.size(1);
  const bool first = m.pp_stage == 0, last = m.pp_stage == m.pp_stages - 1;
  Tensor received, position = Tensor::zeros({StreamPosition::kFloats});  // the dropout stream's position
  StreamPosition at;
  if (!first) {
    received = Tensor::empty({B, T, m.cfg.d_model});
    m.pp->recv(received, m.pp_stage - 1);
    m.pp->recv(position, m.pp_stage - 1);
    at = StreamPosition::from_floats(position.data<float>());
  }
  ModelInputs whole_logits = in;  // (every stage gets the whole vocabulary's)
  whole_logits.shard_logits = false;
  Tensor out = forward_stage(whole_logits, received, at);
  if (!last) {
    m.pp->send(contiguous(out), m.pp_stage + 1);
    at.to_floats(position.data<float>());
    m.pp->send(position, m.pp_stage + 1);
    out = Tensor::empty({B, T, m.cfg.vocab_size});
  }
  m.pp->broadcast(out, m.pp_stages - 1);
  return out;
}

namespace {

// Fusion-in-Decoder's memory: hidden (B * N, S, C), each example's N parts valid to lens, joined
// into (B, L, C) rows of their valid positions (L the longest join; joined_lens the lengths), by
// a row gather that passes gradients back to each part.
Tensor join_fused_parts(const Tensor& hidden, const Tensor& lens, std::int64_t parts, Tensor& joined_lens) {
  const std::int64_t rows = hidden.size(0), S = hidden.size(1), C = hidden.size(2);
  TFM_CHECK(rows % parts == 0, "model", "fused_parts ", parts, " does not divide the ", rows, " encoder rows");
  TFM_CHECK(!lens.defined() || lens.numel() == rows, "model", "valid_lens has ", lens.numel(), " entries for ", rows,
            " encoder rows");
  const std::int64_t B = rows / parts;
  const std::vector<std::int64_t> n = lens.defined() ? lens.to_ints() : std::vector<std::int64_t>(static_cast<std::size_t>(rows), S);
  std::vector<std::int64_t> total(static_cast<std::size_t>(B), 0);
  for (std::int64_t r = 0; r < rows; ++r) {
    TFM_CHECK(n[static_cast<std::size_t>(r)] >= 1 && n[static_cast<std::size_t>(r)] <= S, "model", "valid_lens[", r, "] = ",
              n[static_cast<std::size_t>(r)], " outside [1, ", S, "]");
    total[static_cast<std::size_t>(r / parts)] += n[static_cast<std::size_t>(r)];
  }
  const std::int64_t L = *std::max_element(total.begin(), total.end());
  Tensor index = Tensor::zeros({B, L}, DType::i64);  // row 0 where a join is shorter (masked by its length)
  joined_lens = Tensor::empty({B}, DType::i64);
  auto* ix = index.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t at = 0;
    for (std::int64_t p = 0; p < parts; ++p) {
      const std::int64_t r = b * parts + p;
      for (std::int64_t t = 0; t < n[static_cast<std::size_t>(r)]; ++t) ix[b * L + at++] = r * S + t;
    }
    joined_lens.data<std::int64_t>()[b] = at;
  }
  return embedding(index, reshape(contiguous(hidden), {rows * S, C}));
}

}  // namespace

ModelOutputs Model::forward(const ModelInputs& in) {
  impl_->check_converted("forward");
  CaptureGather gather(*impl_);
  ModelOutputs out;
  switch (impl_->cfg.architecture) {
    case Architecture::encoder_only:
      if (impl_->cfg.text_tower.enabled()) return contrastive_forward(in);
      out.hidden = encode(in);
      if (impl_->layout.dist_classifier.weight.defined()) {  // DeiT: both heads kept for distillation
        std::tie(out.cls_logits, out.distillation_logits) = distilled_heads(*impl_, out.hidden);
        out.logits = mul_scalar(add(out.cls_logits, out.distillation_logits), 0.5f);
      } else {
        out.logits = head(out.hidden, in.valid_lens, in.shard_logits);
      }
      break;
    case Architecture::decoder_only:
      if (impl_->pp_stages > 1) {
        out.logits = forward_pipelined(in);
        break;
      }
      out.hidden = decode(in, Tensor());
      out.logits = head(out.hidden, in.valid_lens, in.shard_logits);
      break;
    case Architecture::encoder_decoder:  // (on pipeline stages, encode and decode hand the activations on)
      out.encoder_hidden = encode(in);
      if (in.fused_parts > 0) {
        ModelInputs joined = in;
        out.encoder_hidden = join_fused_parts(out.encoder_hidden, in.valid_lens, in.fused_parts, joined.valid_lens);
        out.hidden = decode(joined, out.encoder_hidden);
      } else {
        out.hidden = decode(in, out.encoder_hidden);
      }
      out.logits = head(out.hidden, in.decoder_valid_lens, in.shard_logits);
      break;
  }
  gather.finish();
  return out;
}

}  // namespace tfm
