// A model's modules, wired to the parameters of its name -> Tensor map by its family's names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "nn/modules.h"
#include "tfm/model_config.h"

namespace tfm {

struct Layer {
  std::string name;  // the family's parameter prefix of the layer ("decoder.layers.0.", "transformer.h.0.")
  nn::Norm self_norm, cross_norm, ffn_norm;
  nn::Attention self_attn, cross_attn;
  nn::FeedForward ffn;
  // Bottleneck adapters (peft.h) on the self-attention and FFN outputs; identity when absent.
  // Parameters: <name>attention_adapter.* and <name>output_adapter.* (AdapterHub's mh_adapter
  // and output_adapter), each adapter_down.{weight,bias} and adapter_up.{weight,bias}.
  nn::Bottleneck attn_adapter, ffn_adapter;
  // RETRO's chunked cross-attention (<name>cca_norm, <name>cca.*) in the layers
  // retrieval.layers names; absent elsewhere.
  bool has_cca = false;
  nn::Norm cca_norm;
  nn::Attention cca;
};

struct Stack {
  std::vector<Layer> layers;
  nn::Norm final_norm;
  bool has_final_norm = false;
  Tensor relative_bias;  // (buckets, H): T5 relative position bias table, shared by all layers
  bool dropout_after_final_norm = false;  // T5 drops the stack's output after its final norm too
};

struct Layout {
  Tensor tok_emb;   // (V, C)
  Tensor pos_emb;   // (P, C) learned positions, or undefined
  Tensor type_emb;  // (types, C), or undefined
  // Image models: the patch embedding, a convolution with stride = kernel as stored (C, ch, p, p)
  // + (C), the [CLS] and DeiT's distillation tokens (1, 1, C) or undefined; pos_emb is then
  // (1, prefix tokens + patches, C) for image_size pictures, interpolated for other sizes.
  Tensor patch_weight, patch_bias, cls_token, dist_token;
  // Speech models: the two convolutions over the log-mel frames as stored, (C, mels, 3) and
  // (C, C, 3) + (C) each, and the encoder's position table (max_source_positions, C); pos_emb
  // is then the decoder's.
  Tensor conv1_weight, conv1_bias, conv2_weight, conv2_bias, source_pos_emb;
  nn::Norm embed_norm;
  bool has_embed_norm = false;
  Stack encoder, decoder;
  Stack retriever;  // RETRO: the bidirectional encoder of retrieved neighbours (retriever.*)
  // CLIP (text_tower in model_config.h): the encoder is the vision tower (embed_norm its
  // pre-LayerNorm, cls_token and pos_emb its class and position embeddings as stored, (C) and
  // (T, C)); the decoder stack is the text tower (causal, tok_emb its tokens,
  // text_pos_emb (positions, C) its positions, final_norm its final LayerNorm). pooled_norm
  // normalises the [CLS] state; the projections (no bias) map each tower into the shared
  // space; logit_scale is the log of the similarities' scale, a scalar.
  Tensor text_pos_emb;
  nn::Norm pooled_norm;
  nn::Linear image_projection, text_projection;
  Tensor logit_scale;
  Tensor lm_head;        // (V, C): the token embedding itself when tied
  double lm_scale = 1.0;  // T5 rescales tied outputs by d_model^-1/2
  Tensor logits_bias;    // (1, V) added to the LM logits (Marian's final_logits_bias), or undefined
  nn::Linear pooler;     // BERT's pooler (weight undefined elsewhere)
  nn::Linear classifier;
  nn::Linear dist_classifier;  // DeiT's head on the distillation token (weight undefined elsewhere)
  nn::Linear mlm_dense;
  nn::Norm mlm_norm;
  Tensor mlm_decoder, mlm_bias;  // (V, C), (V)
  // Every module wired as an nn::Linear, by name, with its weight's layout (true: in_out).
  std::map<std::string, bool> linear_modules;
};

// LoRA factors present in the map as <module>.lora_A.weight and <module>.lora_B.weight are
// attached to that module's Linear with this scale (alpha / r) and dropout; bottleneck
// adapters present as <layer>{attention,output}_adapter.* use this activation.
struct LoraWiring {
  double scale = 0.0, dropout = 0.0;
  BottleneckActivation bottleneck = BottleneckActivation::relu;
};

// Tensor parallelism (tensor_parallel.cpp): every attention output projection and FFN down
// projection of the layout sums its partial product with `sum`, every attention and FFN sums
// its input's gradient with it, and each attention knows which of the model's heads it holds.
void mark_tensor_parallel(Layout& l, int rank, int ranks, const nn::RankSum& sum);

// Throws naming the first parameter the family needs that the map lacks.
Layout wire_layout(const ModelConfig& cfg, const std::map<std::string, Tensor>& params, const LoraWiring& lora = {});

}  // namespace tfm
