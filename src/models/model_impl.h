// Model::Impl and the pieces of the forward pass that the KV-cache path (model_cached.cpp)
// shares with the full forward (model.cpp). Private to src/models.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/layout.h"
#include "nn/modules.h"
#include "nn/vocab_parallel.h"
#include "tfm/model.h"

namespace tfm {

struct Model::Impl {
  ModelConfig cfg;
  std::map<std::string, Tensor> params;
  Layout layout;
  Tensor alibi;  // (H) slopes when position == alibi
  bool training = false;
  bool fused_attention = true;
  bool checkpoint_activations = false;
  std::uint64_t dropout_seed = 0, dropout_step = 0;
  std::uint64_t forward_calls = 0;
  nn::DropoutRows dropout_rows;  // set_dropout_rows
  std::vector<AttentionMap>* attention_sink = nullptr;  // set_attention_capture
  bool capturing_call = false;  // a forward()/encode() is gathering what a split model captured
  HiddenStates* hidden_sink = nullptr;                  // set_hidden_capture
  std::optional<LoraConfig> lora;  // set while params holds LoRA factors (model_lora.cpp)
  std::optional<BottleneckConfig> bottleneck;  // set while params holds bottleneck adapters (model_peft.cpp)
  std::optional<PrefixConfig> prefix;          // set while params holds a prefix encoder (model_peft.cpp)
  Model::Retriever retriever;                  // RETRO's neighbours (set_retriever)
  // Tensor parallelism (tensor_parallel.cpp): this shard's rank of tp_ranks, and the sum over
  // the ranks that its row-parallel layers call; tp_ranks 1: the whole model.
  int tp_rank = 0, tp_ranks = 1;
  std::shared_ptr<const std::function<void(Tensor&)>> tp_sum;
  // What the shard took of each split parameter: the dim (of its stored 2-D shape, or 0 for a
  // vector), this rank's ranges of it, and the whole shape; and the whole model's config.
  struct TpSlice {
    int dim = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;
    Shape whole;
  };
  std::map<std::string, TpSlice> tp_slices;
  ModelConfig tp_whole_cfg;
  nn::VocabShard tp_vocab;  // this shard's rows of the token embedding and vocabulary head (ranks 1: whole)
  // Pipeline parallelism (pipeline_parallel.cpp): this stage of pp_stages, holding the decoder
  // layers from pp_first on (renamed from 0), and how it hands activations on.
  int pp_stage = 0, pp_stages = 1;
  std::int64_t pp_first = 0, pp_enc_first = 0;  // the first decoder (and encoder) layer held
  ModelConfig pp_whole_cfg;                            // the whole model's (n_layers of all stages)
  std::map<std::string, std::string> pp_global_names;  // this stage's parameter names -> the whole model's
  std::set<std::string> pp_shared;                     // those outside the layers (every stage keeps them)
  std::shared_ptr<const Model::PipeComm> pp;
  // Parameters still in their stored type (from_parameters_deferred), stored as the f32 layout
  // (GPT-2's Conv1D: (in, out)); the forward passes refuse to run while any is left.
  std::set<std::string> deferred;
  void check_converted(const char* what) const;

  // Re-wires the modules after params gained or lost tensors (LoRA factors, a merge).
  void rewire() {
    LoraWiring w = lora ? LoraWiring{lora->scale(), lora->dropout} : LoraWiring{};
    if (bottleneck) w.bottleneck = bottleneck->non_linearity;
    layout = wire_layout(cfg, params, w);
    if (tp_ranks > 1) mark_tensor_parallel(layout, tp_rank, tp_ranks, tp_sum);
    for (Layer& L : layout.decoder.layers)  // a stage's layers keep their place in the whole model
      L.self_attn.layer = L.cross_attn.layer = L.cca.layer = L.self_attn.layer + pp_first;
    for (Layer& L : layout.encoder.layers) L.self_attn.layer += pp_enc_first;
  }
  // Prefix tuning: the (1, Hkv, P, Dh) keys and values of every self-attention layer, encoder
  // layers first then decoder layers; empty without a prefix. Differentiable (training runs
  // the reparameterisation MLP here when prefix_projection).
  std::vector<std::pair<Tensor, Tensor>> prefix_kv() const;

  nn::DropoutStream stream() {
    // A fresh stream per forward: (seed, step, call) fixes every mask of the step.
    const std::uint64_t s = dropout_seed * 0x9E3779B97F4A7C15ull + dropout_step * 0xD1B54A32D192ED03ull + forward_calls++;
    return nn::DropoutStream(training, s, dropout_rows, nn::DropoutShard{tp_rank, tp_ranks});
  }
};

namespace model_detail {

// What the shards and stages of a split model captured since maps[from], put together on every
// rank as one process captures it (attention_gather.cpp).
void gather_captured_attention(const Model::Impl& m, std::vector<AttentionMap>& maps, std::size_t from);
// Around forward() and encode(): at the outermost call on a split model with capture on,
// gathers what the call captured.
class CaptureGather {
 public:
  explicit CaptureGather(Model::Impl& m)
      : m_(m), outer_(!m.capturing_call), from_(m.attention_sink != nullptr ? m.attention_sink->size() : 0) {
    m.capturing_call = true;
  }
  ~CaptureGather() {
    if (outer_) m_.capturing_call = false;
  }
  CaptureGather(const CaptureGather&) = delete;
  CaptureGather& operator=(const CaptureGather&) = delete;
  void finish() {
    if (outer_ && m_.attention_sink != nullptr && (m_.tp_ranks > 1 || m_.pp_stages > 1))
      gather_captured_attention(m_, *m_.attention_sink, from_);
  }

 private:
  Model::Impl& m_;
  bool outer_;
  std::size_t from_;
};

// The weight matrices of a parameter map (Model::weight_matrices), wired as cfg's family
// wires them; in_out marks GPT-2 Conv1D weights (stored (in, out) when f32).
struct WeightSlot : WeightMatrix {
  bool in_out = false;
};
std::vector<WeightSlot> weight_matrices_of(const ModelConfig& cfg, const std::map<std::string, Tensor>& params);

void check_ids(const Tensor& ids, const char* what);
// Token (+ position, type) embeddings of ids (B, T) whose first position is `offset`.
Tensor embed(const Model::Impl& m, const Tensor& ids, const Tensor& types, std::int64_t offset, nn::DropoutStream& rng);
// Self-attention setup for one stack over T positions starting at `offset`.
nn::AttentionSetup self_setup(const Model::Impl& m, const Stack& s, bool causal, std::int64_t T, std::int64_t offset,
                              const Tensor& valid_lens);
nn::AttentionSetup cross_setup(const Model::Impl& m, const Tensor& src_valid_lens);
// A stack's layers (and final norm) over x: the full forward's loop, for the model_*.cpp files.
Tensor run_self_stack(const Model::Impl& m, const Stack& s, const Tensor& x, const nn::AttentionSetup& self,
                      nn::DropoutStream& rng);
// An image model's input tokens (B, prefix + patches, C) from pixel_values (B, ch, H, W),
// positions included (model_image.cpp).
Tensor embed_patches(const Model::Impl& m, const Tensor& pixels, nn::DropoutStream& rng);
// A speech model's input tokens (B, frames / 2, C) from input_features (B, mels, frames):
// the convolution stem and the positions (model_audio.cpp).
Tensor embed_audio(const Model::Impl& m, const Tensor& features, nn::DropoutStream& rng);
// RETRO: neighbours (N, r) through the retrieval encoder -> (N, r, C).
Tensor encode_neighbours(const Model::Impl& m, const Tensor& ids, nn::DropoutStream& rng);
// RETRO: the neighbours' ids (N, k, r) the retriever finds for chunks (N, m), checked.
Tensor retrieve(const Model::Impl& m, const Tensor& chunks);

}  // namespace model_detail
}  // namespace tfm
