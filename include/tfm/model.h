// tfm::Model — any Transformer of the seeds, built from a ModelConfig.
//
//   ModelConfig cfg = load_model_config("config.json");
//   Model m = Model::create(cfg, /*seed=*/42);          // initialised as the family does
//   ModelInputs in;  in.input_ids = ids;  in.valid_lens = lens;   // (B, T) i64, (B)
//   ModelOutputs out = m.forward(in);                   // out.logits (B, T, V) for an LM
//   backward(cross_entropy(reshape(out.logits, {-1, V}), reshape(targets, {-1})));
//
// Parameters live in one name -> Tensor map whose names are the family's checkpoint names
// (Hugging Face's for gpt2/llama/bert/t5; docs/design.md for the engine's own), so
// model.safetensors files line up with that ecosystem.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tfm/attention_map.h"
#include "tfm/lora.h"
#include "tfm/model_config.h"
#include "tfm/peft.h"
#include "tfm/tensor.h"

namespace tfm {

class KVCache;

// A weight matrix the engine can hold in a compact type (docs/quantization.md): every
// linear layer's weight, the token embedding and the output head (LM head, MLM decoder).
struct WeightMatrix {
  enum class Role { linear, embedding, output } role = Role::linear;
  std::string name;       // parameter name
  std::int64_t rows = 0;  // out features (vocab for embeddings and heads)
  std::int64_t cols = 0;  // in features (d_model): the dimension blocks run along
  bool tied_output = false;   // the token embedding that is also the LM head
  std::int64_t layer = -1;    // index in its stack (-1: not in a layer)
  std::int64_t n_layers = 0;  // layers of that stack
};

struct ModelInputs {
  Tensor input_ids;           // (B, T) i64/i32: encoder input, or the decoder's for decoder-only
  Tensor valid_lens;          // (B) integer, optional: keys at t >= valid_lens[b] are padding
  Tensor token_type_ids;      // (B, T), optional: BERT segment ids
  Tensor decoder_input_ids;   // (B, T') for encoder-decoder models
  Tensor decoder_valid_lens;  // (B), optional: padding of decoder_input_ids
  Tensor pixel_values;        // (B, channels, H, W) f32: the encoder's input for image models (ViT)
  Tensor input_features;      // (B, num_mel_bins, frames) f32: the encoder's input for speech models (Whisper)
  std::int64_t position_offset = 0;  // first position of input_ids (decoder-only: tokens already seen)
  // RETRO (retrieval.chunk_size m): (B, L, k, r) integer, the k neighbours of r tokens of each
  // of the sequence's chunks, chunk i's read by the positions of chunk i + 1 (L >= ceil(T/m) - 1).
  // Absent: the model's retriever (Model::set_retriever) finds them.
  Tensor neighbours;
  // Fusion-in-Decoder (encoder-decoder models): input_ids and valid_lens hold fused_parts rows
  // per example, each (input, passage) text encoded alone; the decoder's row b reads the valid
  // positions of example b's parts joined in turn, as Translator::translate_fused decodes.
  // 0: one source row per example.
  std::int64_t fused_parts = 0;
  // Tensor parallelism: a vocabulary head returns this shard's columns of the logits
  // (Model::vocab_shard) for Model::logits_cross_entropy, instead of gathering the whole
  // vocabulary's on every shard. No effect on a whole model.
  bool shard_logits = false;
};

// Each layer's output, recorded while capture is on (Model::set_hidden_capture), with its
// autograd history: index 0 is the stack's input (the embeddings), index i the residual
// stream after layer i (1-based, as Hugging Face's hidden_states; the last is taken before
// the stack's final norm, if it has one).
struct HiddenStates {
  std::vector<Tensor> encoder;  // (B, S, C) each: encoder_only and encoder_decoder models
  std::vector<Tensor> decoder;  // (B, T, C) each: decoder_only and encoder_decoder models
};

struct ModelOutputs {
  Tensor logits;          // lm: (B, T, V); classifier: (B, num_labels); masked_lm: (B, T, V)
  Tensor hidden;          // last hidden states (B, T, C) of the stack that feeds the head
  Tensor encoder_hidden;  // encoder-decoder: the encoder output (B, S, C)
  // DeiT with its distillation head (distillation_head): each head's logits (B, num_labels);
  // logits is their mean. Undefined otherwise.
  Tensor cls_logits, distillation_logits;
  // CLIP (text_tower): the pictures' and texts' embeddings, each normalised to length 1
  // (B_images, P) and (B_texts, P); logits is then exp(logit_scale) times their cosine
  // similarities (B_images, B_texts), Hugging Face's logits_per_image, when both were given.
  Tensor image_embeds, text_embeds;
};

// Pipeline stages' first layers and the layer count (pipeline_layers, below the class); an
// encoder-decoder's: the encoder's, then the decoder's (stack_bounds).
using PipelineBounds = std::vector<std::int64_t>;

class Model {
 public:
  // Fresh parameters, initialised by the family's convention, reproducible from `seed`.
  static Model create(const ModelConfig& cfg, std::uint64_t seed);
  // Wrap existing parameters (names and shapes must match parameter_specs(cfg) exactly; the
  // error names the first missing, unexpected or mis-shaped tensor).
  // Weight matrices in a block-quantized type stay so (stored (out, in), even for GPT-2's
  // Conv1D weights); bf16/f16 ones too when keep_compact (GGUF files, tfm quantize's
  // directories), else every tensor becomes f32 (hub bf16 checkpoints compute in f32).
  static Model from_parameters(const ModelConfig& cfg, std::map<std::string, Tensor> params, bool keep_compact = false);
  // As from_parameters, but the tensors it would make f32 keep their stored type (and a mapped
  // file's pages) until convert_deferred_weights(): shard_pipeline and shard_tensor_parallel,
  // the only calls allowed in between, slice them as stored, so a rank of a split model reads
  // and converts its part of a bf16/f16 checkpoint only, never the whole model in f32.
  static Model from_parameters_deferred(const ModelConfig& cfg, std::map<std::string, Tensor> params,
                                        bool keep_compact = false);
  void convert_deferred_weights();  // (nothing to do for a model made otherwise)

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const ModelConfig& config() const;
  std::map<std::string, Tensor>& parameters();
  const std::map<std::string, Tensor>& parameters() const;
  std::int64_t parameter_count() const;

  // Training mode turns dropout on; each forward in training draws fresh dropout masks from
  // (seed, step) set here, so a run is reproducible and resumable.
  void set_training(bool on);
  bool training() const;
  void set_dropout_seed(std::uint64_t seed, std::uint64_t step);
  // The next forward passes see rows [first, first + count) of a batch of `total` rows (a
  // micro-batch split across ranks): their dropout masks are those rows' masks in the whole
  // batch under the same seed. total 0 (the default): the batch is whole.
  void set_dropout_rows(std::int64_t first, std::int64_t count, std::int64_t total);
  // Attention runs the fused kernel (default); false selects the plain path that materialises
  // the weights (the two agree to rounding; the tests compare them).
  void set_fused_attention(bool on);
  // Activation checkpointing: while on (and recording), each layer keeps only its input for
  // the backward pass and recomputes its forward there (autograd::checkpoint), so activation
  // memory grows with layers x one layer's input plus one layer's full activations. The
  // gradients are bit-identical to those without it.
  void set_checkpoint_activations(bool on);
  bool checkpoint_activations() const;
  // Inspection: while `sink` is set, every attention call runs the plain path and appends its
  // weights to *sink, in call order (encoder layers, then per decoder layer self and cross).
  // nullptr turns capture off. The outputs equal those with capture off (to rounding).
  void set_attention_capture(std::vector<AttentionMap>* sink);
  // While `sink` is set, every forward appends each stack's layer outputs to it (distillation
  // reads them; training keeps their gradients). nullptr turns capture off.
  void set_hidden_capture(HiddenStates* sink);

  // ---- LoRA (lora.h) ---------------------------------------------------------------------
  // Names of the linear modules ("decoder.layers.0.self_attn.q_proj"), the candidates for LoRA.
  std::vector<std::string> linear_modules() const;
  // Fresh factors on every targeted module: A Kaiming-uniform (PEFT's init, bound
  // 1/sqrt(in)), B zeros, so the model's output is unchanged until B is trained. They join
  // parameters() as "<module>.lora_A.weight" / ".lora_B.weight". Throws if nothing matches.
  void add_lora(const LoraConfig& cfg, std::uint64_t seed);
  // Loaded factors under those names (shapes checked against the modules and cfg.r).
  void attach_lora(const LoraConfig& cfg, const std::map<std::string, Tensor>& factors);
  bool has_lora() const;
  const LoraConfig& lora_config() const;  // valid when has_lora()
  std::map<std::string, Tensor> lora_parameters() const;
  // W += scale * B A into every base weight (transposed for in_out layouts), then drops the
  // factors: the plain model computes what the adapted one did.
  void merge_lora();

  // ---- compact weights (inference only; docs/quantization.md) ------------------------------
  // Every weight matrix that may be stored in bf16, f16 or a block-quantized type.
  std::vector<WeightMatrix> weight_matrices() const;
  // Converts the named weight matrices to the given types (f32 restores f32 from whatever is
  // held). A compact weight is always stored (out, in), GPT-2's Conv1D ones included. Fails
  // naming the tensor and its shape when a row does not fit the type's block size.
  void convert_weights(const std::map<std::string, DType>& types);
  // True when any parameter is held in a compact type (training and LoRA merges refuse).
  bool has_compact_weights() const;
  // ---- bottleneck adapters and prefix tuning (peft.h); one adapter kind at a time -----------
  // Fresh adapters on every layer the placement names (up-projections zero: the output is
  // unchanged until they train), as <layer>attention_adapter.* / <layer>output_adapter.*.
  void add_bottleneck(const BottleneckConfig& cfg, std::uint64_t seed);
  // Loaded ones under those names (every name and shape checked).
  void attach_bottleneck(const BottleneckConfig& cfg, const std::map<std::string, Tensor>& tensors);
  bool has_bottleneck() const;
  const BottleneckConfig& bottleneck_config() const;
  // A fresh prefix encoder: "prompt_encoder.embedding.weight" (P, W) N(0, 1), or with
  // prefix_projection (P, C) plus "prompt_encoder.transform.{0,2}.{weight,bias}".
  void add_prefix(const PrefixConfig& cfg, std::uint64_t seed);
  void attach_prefix(const PrefixConfig& cfg, const std::map<std::string, Tensor>& tensors);
  bool has_prefix() const;
  const PrefixConfig& prefix_config() const;
  std::int64_t prefix_length() const;  // num_virtual_tokens, 0 without a prefix
  // W = L * 2 * kv_heads * head_dim over the L self-attention layers (encoder's, then decoder's).
  std::int64_t prefix_width() const;
  // The final (P, W) prefix table (PEFT's "prompt_embeddings"), without autograd.
  Tensor prefix_table() const;
  // Every adapter tensor (LoRA factors, bottleneck adapters, prefix encoder) by name.
  std::map<std::string, Tensor> adapter_parameters() const;

  // ---- RETRO (retrieval in model_config.h) --------------------------------------------------
  // Finds the neighbours of chunks (N, m) of token ids: (N, k, r) integer. The loader sets it
  // from the model's chunk database (chunk_database.h); forward() asks it when the inputs carry
  // no neighbours, decode_cached() as each chunk completes.
  using Retriever = std::function<Tensor(const Tensor& chunks)>;
  void set_retriever(Retriever r);
  bool has_retriever() const;

  // ---- tensor parallelism (docs/distributed.md; inference) ---------------------------------
  // Makes this model rank `rank`'s shard of `ranks`, as Megatron-LM lays one out: each
  // attention keeps heads [rank H / ranks, (rank + 1) H / ranks) of its query and key/value
  // projections (GQA's KV heads likewise) and the matching input columns of its output
  // projection; each FFN keeps 1/ranks of its hidden units (the rows of gate and up, the
  // columns of down). The token embedding and a vocabulary head (language-model or masked-LM:
  // its weight rows and bias) keep a contiguous 1/ranks of the vocabulary each (the first
  // vocab_size % ranks shards one row more); position embeddings, norms and other heads stay
  // whole. The output and down projections then produce partial sums, as do the embedding
  // (this rank's rows looked up, zeros for the others') and the logits (its columns, zeros
  // elsewhere); `sum` must add them over the ranks in place, giving every rank the same
  // result (every rank runs the same inputs in lockstep). The config
  // becomes the shard's (n_heads / ranks, ...), so a KV cache made for it holds its heads only.
  // A pipeline stage (shard_pipeline first) splits the same way: its layers' heads and units.
  // Refused with LoRA, bottleneck adapters or a prefix attached, or when the heads, KV heads
  // or FFN width do not divide by `ranks`. Compact weights are sliced as stored (a block type
  // needs each rank's columns to be whole blocks); repack after sharding. The pages of
  // memory-mapped files it copies from are released as it goes (Storage::release_file_pages):
  // shard a model as loaded, not one whose mapped weights were changed in place.
  using PartialSum = std::function<void(Tensor&)>;
  void shard_tensor_parallel(int rank, int ranks, PartialSum sum);
  // (The shard's config is tensor_parallel_config(config(), ranks), below the class.)
  int tensor_parallel_rank() const;
  int tensor_parallel_ranks() const;  // 1: the whole model
  // Training a shard (docs/distributed.md): the same lockstep forward, and a backward pass that
  // sums, with `sum`, the gradient of every attention's and FFN's input over the ranks, so the
  // parameters that stay whole get the whole model's gradients on every rank. Attention and
  // FFN dropout draw the whole model's masks for this shard's heads and hidden units.
  // Whether parameter `name` is split across the ranks (its gradient is this rank's part):
  bool tensor_parallel_split(const std::string& name) const;
  // This rank's slice of `whole`, a tensor shaped like the whole model's parameter `name`
  // (its optimizer state); `whole` itself for a parameter that is not split.
  Tensor tensor_parallel_slice(const std::string& name, const Tensor& whole) const;
  // The whole tensor from every rank's slice of parameter `name` (f32; a collective: every
  // rank calls it for the same names in the same order); the slice itself when not split.
  Tensor tensor_parallel_gather(const std::string& name, const Tensor& slice) const;
  // The whole model, gathered (a collective, as above), and its config.
  Model tensor_parallel_whole() const;
  const ModelConfig& tensor_parallel_whole_config() const;
  // This shard's [first, last) of the vocabulary: its rows of the token embedding and its
  // columns of the logits; [0, vocab_size) for a whole model.
  std::pair<std::int64_t, std::int64_t> vocab_shard() const;
  // The mean cross-entropy of logits (..., V) against targets (...) (-100 ignored) with label
  // smoothing, as cross_entropy computes it; on a vocabulary-split shard the logits may be its
  // columns (ModelInputs::shard_logits), and the softmax's maximum and sums meet over the
  // ranks (Megatron-LM's vocab-parallel cross-entropy): no rank holds the whole logits.
  Tensor logits_cross_entropy(const Tensor& logits, const Tensor& targets, float label_smoothing = 0.0f) const;

  // ---- pipeline parallelism (docs/distributed.md; inference) -------------------------------
  // Makes this model (decoder-only LM or encoder-decoder) stage `stage` of `stages`: it keeps a contiguous run of the
  // decoder layers (pipeline_layers below: n_layers / stages each, the first stages one more
  // while they do not divide) and everything outside the layers; its config becomes that many
  // layers, so a KV cache made for it holds its layers only. Every stage then calls
  // decode_cached() with the same ids in lockstep: stage 0 embeds them, each stage runs its
  // layers on what the previous one sends and sends its output on, and the last stage's logits
  // come back from every stage's call (broadcast). forward() works the same way, without
  // gradients (evaluation): every stage calls it with the same inputs and gets the logits (no
  // hidden states). An encoder-decoder's stage also keeps a contiguous run of the encoder's
  // layers: encode() (and so encode_to_cache) runs the encoder through the stages the same way
  // and returns the memory on every stage, whose cross-attention layers read it; decode_cached
  // then works as above, and decode() and forward() (evaluation, no gradients) run the decoder
  // through the stages the same way, every stage getting the logits. An encoder-only
  // model's stage (BERT, ViT) keeps a run of its layers: forward() encodes through the stages
  // and every stage computes the heads on the broadcast output (no gradients). The other entry
  // points are refused on a stage. Refused for decoder-only models with another head than the
  // LM's, CLIP, RETRO, attached adapters, a tensor-parallel shard (shard the stage instead), or
  // more stages than layers.
  struct PipeComm {
    std::function<void(const Tensor& x, int to)> send;   // a contiguous f32 tensor
    std::function<void(Tensor& x, int from)> recv;       // into x, shaped as the sender's
    std::function<void(Tensor& x, int root)> broadcast;  // root's x into every stage's x
  };
  void shard_pipeline(int stage, int stages, PipeComm comm, const PipelineBounds& bounds = {});
  int pipeline_stage() const;
  int pipeline_stages() const;  // 1: the whole model
  // Training a stage of a decoder-only LM or an encoder (BERT, ViT; docs/distributed.md): one
  // micro-batch's part of the forward pass, with gradients; the caller moves tensors between
  // the stages. Stage 0 embeds in.input_ids (or in.pixel_values); a later stage starts from
  // `received`, the previous stage's output, shaped stage_hidden_shape(in) (make it require
  // grad to get its gradient). Returns the hidden states to send on, or on the last stage the
  // head's output (the LM's logits, the classifier's).
  // The dropout masks are one process's: the stream continues where the previous stage's
  // ended (`stream` holds that position on entry, ignored on stage 0, and this stage's end on
  // return), and stochastic depth uses the layers' places in the whole model.
  struct StreamPosition {
    std::uint64_t offset = 0, calls = 0;
    // Its bits as kFloats floats, to travel beside the activations.
    static constexpr int kFloats = 4;
    void to_floats(float* out) const;
    static StreamPosition from_floats(const float* in);
  };
  Tensor forward_stage(const ModelInputs& in, const Tensor& received, StreamPosition& stream);
  // (B, positions, d_model) between the stages (an encoder-decoder's decoder stages).
  Shape stage_hidden_shape(const ModelInputs& in) const;
  // An encoder-decoder's stage in training: encode_stage runs its encoder layers as
  // forward_stage does (stage 0 embeds the text or the audio frames; the last applies the
  // final norm and returns the memory, (B, stage_memory_shape(in))); decode_stage its decoder
  // layers, reading `memory` (the whole encoder's output; make it require grad to get its
  // gradient) through cross-attention, stage 0 embedding in.decoder_input_ids, the last
  // returning the logits. Their dropout streams are one process's encode() and decode().
  Tensor encode_stage(const ModelInputs& in, const Tensor& received, StreamPosition& stream);
  Tensor decode_stage(const ModelInputs& in, const Tensor& received, const Tensor& memory, StreamPosition& stream);
  Shape stage_memory_shape(const ModelInputs& in) const;
  // The whole model's name of one of this stage's parameters (its layers are renumbered from 0),
  // and the whole model's config.
  std::string pipeline_global_name(const std::string& local) const;
  // Whether a parameter lies outside the layers (every stage keeps it: embeddings, final norm, head).
  bool pipeline_shared(const std::string& local) const;
  const ModelConfig& pipeline_whole_config() const;

  // ---- contrastive image-text models (CLIP: text_tower in model_config.h) -----------------
  // Each picture's embedding in the shared space (B, projection_dim), not normalised (Hugging
  // Face's get_image_features): the vision tower's [CLS] state, normalised, projected.
  Tensor image_features(const Tensor& pixel_values);
  // Each text's (B, projection_dim), not normalised (get_text_features): the text tower's
  // state at the first end-of-text token (the largest id when eos_token_id is 2, as
  // transformers reads configs from before that key was right), projected. input_ids (B, T)
  // with T <= the text tower's max_positions; valid_lens marks padding.
  Tensor text_features(const Tensor& input_ids, const Tensor& valid_lens = Tensor());
  // exp(logit_scale): the factor of the cosine similarities (a number; inference).
  double logit_scale() const;

  ModelOutputs forward(const ModelInputs& in);
  // The pieces, for inference code: encoder stack output (B, S, C) ...
  Tensor encode(const ModelInputs& in);
  // ... and the decoder stack given the encoder output (encoder-decoder).
  Tensor decode(const ModelInputs& in, const Tensor& encoder_hidden);
  // Head on hidden states (shard_logits: as ModelInputs::shard_logits).
  Tensor head(const Tensor& hidden, const Tensor& valid_lens = Tensor(), bool shard_logits = false);

  // ---- incremental decoding with a KV cache (kv_cache.h; inference only, no autograd) ----
  // Encoder-decoder: run the encoder over one source src_ids (1, S) and store every decoder
  // layer's cross-attention keys/values as cache source `source`.
  void encode_to_cache(const Tensor& src_ids, KVCache& cache, std::int64_t source);
  // The same for any encoder input (a speech model's input_features, batch 1).
  void encode_to_cache(const ModelInputs& in, KVCache& cache, std::int64_t source);
  // Fusion-in-Decoder (Izacard & Grave 2021): each part (1, S_i) encoded alone, the encoder
  // outputs concatenated along the sequence into one cache source, so the decoder
  // cross-attends to all of them at once.
  void encode_parts_to_cache(const std::vector<Tensor>& parts, KVCache& cache, std::int64_t source);
  // An encoder output (1, S, C) from encode() projected into every decoder layer's cross K/V of
  // `source` (for callers that also read the encoder output: joint CTC decoding).
  void encoder_output_to_cache(const Tensor& enc, KVCache& cache, std::int64_t source);
  // Append ids (R, T) to the sequences held in cache slots `slots` (R of them; each row's
  // tokens take positions length(slot) .. length(slot)+T-1 and the slot grows by T). Returns
  // the logits of the last new token of each row (R, V), or of every new token (R, T, V)
  // when all_positions. Rows never mix: each row's result is what it would be alone.
  Tensor decode_cached(const Tensor& ids, const std::vector<std::int64_t>& slots, KVCache& cache,
                       bool all_positions = false);

  struct Impl;  // defined in src/models/model_impl.h

 private:
  // forward() of a CLIP model: the embeddings of the pictures and texts given, and their
  // similarities when both are (model_clip.cpp).
  ModelOutputs contrastive_forward(const ModelInputs& in);
  // forward() of a pipeline stage (see shard_pipeline).
  Tensor forward_pipelined(const ModelInputs& in);
  static Model build(const ModelConfig& cfg, std::map<std::string, Tensor> params, bool keep_compact, bool defer);
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The config of one rank's tensor-parallel shard of a model of config c: n_heads, n_kv_heads
// and d_ff divided by ranks, head_dim kept (memory plans, Model::shard_tensor_parallel).
ModelConfig tensor_parallel_config(const ModelConfig& c, int ranks);
// Pipeline stages: the layers [first, last) of one stack of `stage`, and the stage's config.
// Evenly (the first layers % stages stages one more), or by `bounds` when given: stage s holds
// layers [bounds[s], bounds[s + 1]) (stages + 1 entries from 0 to the layer count, each stage
// at least one); an encoder-decoder's bounds are the encoder's stages + 1 entries, then the
// decoder's (training balances them by memory: plan_pipeline_stages, plan_encoder_decoder_stages).
std::pair<std::int64_t, std::int64_t> pipeline_layers(std::int64_t layers, int stage, int stages,
                                                      const PipelineBounds& bounds = {});
// One stack's part of a model's bounds (the whole when not an encoder-decoder's; empty: even).
PipelineBounds stack_bounds(const PipelineBounds& bounds, int stages, bool decoder_of_encoder_decoder);
ModelConfig pipeline_config(const ModelConfig& c, int stage, int stages, const PipelineBounds& bounds = {});

}  // namespace tfm
