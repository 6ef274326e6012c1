// ModelConfig — one typed description of any Transformer the engine builds.
//
// Parsed once, at the edge, from a config.json; model code reads only this struct. The file
// names its family with "model_type":
//   "transformer"  the engine's own keys (any combination of components; docs/design.md)
//   "gpt2", "llama", "mistral", "qwen2", "bert", "t5"  Hugging Face's keys for those
//                  models, so their config.json files (and checkpoints, see parameter_specs)
//                  line up; mistral and qwen2 share llama's layout (sliding window; q/k/v biases).
// A "preset" key starts from a named preset (vaswani, gpt2, llama, bert, t5, vit-b16, deit-b16-distilled, whisper-tiny/base/small) and the
// remaining keys override it. Unknown keys and bad values are errors that name the key and
// the allowed values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfm/ops/position.h"
#include "tfm/tensor.h"

namespace tfm {

enum class Architecture { encoder_only, decoder_only, encoder_decoder };
enum class NormKind { layer_norm, rms_norm, scale_norm };
enum class NormPlacement { post, pre };  // post: x = norm(x + f(x)) (Vaswani, d2l AddNorm); pre: x + f(norm(x))
enum class FfnActivation { relu, gelu, gelu_tanh, quick_gelu, silu, swiglu, geglu, reglu };
// sincos_2d: image models' fixed 2-D table (MAE's get_2d_sincos_pos_embed), computed for each grid.
enum class PositionKind { none, sinusoidal, learned, rope, alibi, t5_relative, sincos_2d };
enum class HeadKind { none, lm, classifier, masked_lm };
enum class Pooling { first, mean };

// "sparse_attention": {"window": w, "global_tokens": [0], "global_first": g, "random_blocks": r,
// "block_size": b, "seed": s} — Longformer / BigBird self-attention in every layer: a window
// of width w, global positions (the listed ones and 0..g-1) that see and are seen by every
// token, and r random key blocks of b tokens per query block of b tokens, drawn per layer and
// head from the seed. Cross-attention stays dense. docs/sparse_attention.md.
struct SparseAttentionConfig {
  std::int64_t window = 0;                  // >= 1 when the pattern is on (0: off)
  std::vector<std::int64_t> global_tokens;  // positions (those past a sequence's end are ignored)
  std::int64_t global_first = 0;            // the first g positions are global too
  std::int64_t random_blocks = 0;
  std::int64_t block_size = 64;
  std::uint64_t seed = 0;
  bool enabled() const { return window > 0; }
};

// RETRO (Borgeaud et al. 2022), model_type "retro": "retrieval": {"chunk_size": m,
// "neighbours": k, "neighbour_length": r, "layers": [...], "encoder_layers": n,
// "embedding_dim": D, "max_ngram": g}. The decoder's sequence is cut into chunks of m tokens;
// the k neighbours of chunk i (r tokens each: a database chunk and its continuation), found by a
// frozen lexical encoder (hashed token n-grams up to g, D numbers) and encoded by a small
// bidirectional retrieval encoder of n layers over the shared token embedding, are read by
// chunked cross-attention in the listed decoder layers: the positions of chunk i + 1 attend to
// the neighbours of chunk i, so causality holds. docs/retrieval.md.
struct RetrievalConfig {
  std::int64_t chunk_size = 0;       // m; 0: off
  std::int64_t neighbours = 2;       // k
  std::int64_t neighbour_length = 0; // r; 0: 2 m (the chunk and its continuation)
  std::vector<std::int64_t> layers;  // decoder layers with chunked cross-attention
  std::int64_t encoder_layers = 2;
  std::int64_t embedding_dim = 256;
  std::int64_t max_ngram = 3;
  bool enabled() const { return chunk_size > 0 && !layers.empty(); }
  std::int64_t length() const { return neighbour_length > 0 ? neighbour_length : 2 * chunk_size; }
  bool has_layer(std::int64_t i) const;
};

// CLIP (Radford et al. 2021), model_type "clip": a text tower beside the image encoder, both
// projected into one space of projection_dim numbers where a picture and the texts that describe
// it lie close (contrastive image-text models). The ModelConfig's own fields describe the vision
// tower (an image encoder); this holds the text tower: a causal pre-LayerNorm Transformer over
// max_positions learned positions whose state at the end-of-text token is its embedding.
// docs/vision.md, "CLIP".
struct TextTowerConfig {
  std::int64_t vocab_size = 0;  // 0: no text tower
  std::int64_t d_model = 512, n_layers = 12, n_heads = 8, d_ff = 2048, max_positions = 77;
  FfnActivation activation = FfnActivation::quick_gelu;
  double norm_eps = 1e-5, attention_dropout = 0.0;
  std::int64_t pad_token_id = 1, bos_token_id = 49406, eos_token_id = 49407;
  std::int64_t projection_dim = 512;
  double logit_scale_init = 2.6592;  // ln(1 / 0.07): CLIP's initial temperature
  double init_factor = 1.0;          // CLIP's initializer_factor (scales every init std)
  bool enabled() const { return vocab_size > 0; }
};

struct ModelConfig {
  std::string model_type = "transformer";  // which key set config.json uses
  Architecture architecture = Architecture::decoder_only;

  // ---- sizes --------------------------------------------------------------------------
  std::int64_t vocab_size = 256;
  std::int64_t d_model = 128;
  std::int64_t n_heads = 4;
  std::int64_t n_kv_heads = 0;          // 0: same as n_heads; 1: multi-query; else grouped-query
  std::int64_t head_dim = 0;            // 0: d_model / n_heads
  std::int64_t n_layers = 2;            // encoder layers, or the decoder's for decoder-only
  std::int64_t n_decoder_layers = 0;    // encoder-decoder: 0 means n_layers
  std::int64_t d_ff = 512;
  std::int64_t max_positions = 512;     // learned tables and the default context size
  std::int64_t type_vocab_size = 0;     // BERT token types (0: none)
  // Image models (ViT): the encoder reads pixel_values (B, num_channels, H, W) cut into
  // patch_size x patch_size patches, one token each, after a [CLS] token (when cls_token) and
  // DeiT's distillation token (when distillation_token). image_size is the side the position
  // table was learnt for; other sizes interpolate it. 0: text.
  std::int64_t image_size = 0, patch_size = 0, num_channels = 3;
  bool cls_token = true, distillation_token = false;
  // Speech models (Whisper): the encoder reads input_features (B, num_mel_bins, frames), a
  // log-mel spectrogram, through two convolutions (the second of stride 2) and a table of
  // max_source_positions positions (1500: 30 s of 10 ms frames halved). 0: not audio.
  std::int64_t num_mel_bins = 0, max_source_positions = 0;
  // DeiT with its teacher's head: a second classifier on the distillation token; the logits are
  // the two heads' mean (ModelOutputs has each), the distillation head learns the teacher's labels.
  bool distillation_head = false;

  // ---- normalisation ------------------------------------------------------------------
  NormKind norm = NormKind::layer_norm;
  NormPlacement norm_placement = NormPlacement::pre;
  double norm_eps = 1e-5;
  bool final_norm = true;               // a norm after the last layer of each stack
  bool embedding_norm = false;          // BERT: LayerNorm right after the embeddings

  // ---- feed-forward -------------------------------------------------------------------
  FfnActivation activation = FfnActivation::gelu;
  bool bias = true;                     // biases in attention and FFN linears
  bool qkv_bias = false;                // q/k/v projections carry biases even when bias is false (Qwen2)

  // ---- positions ----------------------------------------------------------------------
  PositionKind position = PositionKind::learned;
  bool scale_embeddings = false;        // multiply token embeddings by sqrt(d_model) (Vaswani, d2l)
  RopePairing sinusoid_pairing = RopePairing::adjacent;  // sinusoidal (sin, cos) columns: (2i, 2i+1) or (i, D/2+i) (Marian)
  double rope_base = 10000.0;
  RopePairing rope_pairing = RopePairing::halves;
  std::int64_t relative_buckets = 32;   // T5
  std::int64_t relative_max_distance = 128;
  std::int64_t sliding_window = 0;      // 0: full attention; w: each query sees the last w keys
  bool scale_attention_scores = true;   // divide QK^T by sqrt(head_dim) (T5 folds it into init)
  SparseAttentionConfig sparse_attention;  // off unless "sparse_attention" is given
  RetrievalConfig retrieval;               // RETRO; off unless "retrieval" is given (model_type "retro")
  TextTowerConfig text_tower;              // CLIP; off unless the family has one (model_type "clip")

  // ---- regularisation -----------------------------------------------------------------
  double dropout = 0.1;                 // residual branches and FFN
  double attention_dropout = 0.1;
  double embedding_dropout = 0.1;
  // Stochastic depth: in training, layer i of n skips each residual branch (attention, cross,
  // FFN) for a whole sequence with rate stochastic_depth * i / (n - 1); 0 turns it off.
  double stochastic_depth = 0.0;

  // ---- embeddings and heads -----------------------------------------------------------
  bool tie_embeddings = true;           // output projection shares the token embedding
  bool logits_bias = false;             // a learned (1, V) bias added to the LM logits (Marian's final_logits_bias)
  HeadKind head = HeadKind::lm;
  std::int64_t num_labels = 2;          // classifier head
  std::vector<std::string> id2label;    // classifier label names (config.json "id2label"); may be empty
  Pooling pooling = Pooling::first;

  // ---- special tokens and init --------------------------------------------------------
  std::int64_t pad_token_id = 0;
  std::int64_t bos_token_id = 1;
  std::int64_t eos_token_id = 2;
  std::int64_t decoder_start_token_id = 1;
  double init_std = 0.02;

  // Derived -----------------------------------------------------------------------------
  std::int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  std::int64_t dim_head() const { return head_dim > 0 ? head_dim : d_model / n_heads; }
  std::int64_t decoder_layers() const { return n_decoder_layers > 0 ? n_decoder_layers : n_layers; }
  bool reads_images() const { return patch_size > 0; }
  bool reads_audio() const { return num_mel_bins > 0; }
  std::int64_t num_patches() const { return reads_images() ? (image_size / patch_size) * (image_size / patch_size) : 0; }
  // The tokens before the patches ([CLS], distillation) and all of an image_size picture's.
  std::int64_t prefix_tokens() const { return reads_images() ? std::int64_t{cls_token} + std::int64_t{distillation_token} : 0; }
  std::int64_t image_tokens() const { return num_patches() + prefix_tokens(); }
  bool gated_ffn() const {
    return activation == FfnActivation::swiglu || activation == FfnActivation::geglu ||
           activation == FfnActivation::reglu;
  }
};

// A CLIP model's text tower as a config of its own (a decoder-only stack of its sizes), for
// code that sizes or wires it.
ModelConfig text_tower_config(const ModelConfig& c);

// Parse config.json text (`where` names the source in errors); validates everything.
ModelConfig parse_model_config(const std::string& json_text, const std::string& where);
ModelConfig load_model_config(const std::string& path);
// A named preset: vaswani, gpt2, llama, bert, t5, vit-b16, deit-b16-distilled, whisper-tiny/base/small (the sizes of the published base models).
ModelConfig model_preset(const std::string& name);
std::vector<std::string> model_preset_names();
// config.json text in the key set of cfg.model_type (round-trips through parse_model_config).
std::string model_config_to_json(const ModelConfig& cfg);
// Throws tfm::Error naming the field when the combination is inconsistent.
void validate_model_config(const ModelConfig& cfg, const std::string& where);

// Every parameter tensor the model owns, with its checkpoint name and shape; names follow
// the Hugging Face model of cfg.model_type (docs/design.md gives the engine's own scheme).
struct ParamSpec {
  std::string name;
  Shape shape;
};
std::vector<ParamSpec> parameter_specs(const ModelConfig& cfg);
// A Hugging Face hub checkpoint's tensors under parameter_specs' names: the base-model prefix
// (transformer., model., bert.) is added where the file omits it; known buffers (attn.bias,
// attn.masked_bias, rotary_emb.inv_freq, position_ids, Marian's sinusoidal table), tied
// copies and tensors of heads the model lacks are dropped. Anything else is kept as stored,
// for Model::from_parameters to refuse. docs/formats.md lists the rules.
std::map<std::string, Tensor> hub_checkpoint_names(const ModelConfig& cfg, std::map<std::string, Tensor> tensors);

// Readable strings of the enums (the values config.json accepts).
const char* to_string(Architecture v);
const char* to_string(NormKind v);
const char* to_string(NormPlacement v);
const char* to_string(FfnActivation v);
const char* to_string(PositionKind v);
const char* to_string(RopePairing v);
const char* to_string(HeadKind v);
const char* to_string(Pooling v);

}  // namespace tfm
