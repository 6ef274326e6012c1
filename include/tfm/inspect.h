// Read-outs of one forward pass over texts, for `tfm classify`, `tfm embed` and
// `tfm attention`. Texts become ids the way training fed them (src/train/task.cpp):
//   encoder_only     <bos> + tokens            (the classifier data)
//   decoder_only     tokens                    (the LM stream)
//   encoder_decoder  tokens + <eos> for the encoder; <bos> + target tokens for the decoder
// Each call runs its texts as ONE padded batch with valid_lens masks, so a batch gives the
// same results as its texts one by one (to rounding; the tests check 1e-5).
//
//   LoadedModel m = load_model_dir("runs/sms");
//   for (const auto& c : classify(m, {"win a prize now", "see you at 5"})) ... c.name, c.probability
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/model_dir.h"
#include "tfm/plot.h"

namespace tfm {

// The ids of `text` as the model's input (encoder, or the decoder of a decoder-only model),
// truncated to max_positions.
std::vector<std::int32_t> input_ids_for(const LoadedModel& m, std::string_view text);
// Encoder-decoder: the decoder's input for target text (<bos> + tokens, as training's teacher forcing).
std::vector<std::int32_t> decoder_ids_for(const LoadedModel& m, std::string_view text);

// Classifier heads: the most probable label of each text.
struct Classification {
  std::int64_t label = 0;
  std::string name;                 // config.json id2label, or the index when it has none
  float probability = 0;
  std::vector<float> probabilities;  // (num_labels)
};
std::vector<Classification> classify(LoadedModel& m, const std::vector<std::string>& texts);
// Image classifiers: the images through the directory's preprocessor_config.json, one batch.
std::vector<Classification> classify_images(LoadedModel& m, const std::vector<Image>& images);
// (B, 3, H, W) pixel_values of images as the model's preprocessor makes them.
Tensor pixel_values_for(const LoadedModel& m, const std::vector<Image>& images);
// config.json's id2label name of a class, or its number.
std::string label_name(const ModelConfig& c, std::int64_t label);

// Pooled last hidden states (the encoder's for encoder-decoder models).
// automatic: a sentence-transformers directory's own pipeline (modules.json: its pooling,
// Dense and Normalize stages, max_seq_length, the tokenizer's special tokens; see
// sentence_embed.h); otherwise the config's pooling for encoders, else mean.
enum class EmbedPooling { automatic, mean, first, last };
EmbedPooling embed_pooling_from_name(const std::string& name);  // "auto" | "mean" | "first" | "last"
struct EmbedOptions {
  EmbedPooling pooling = EmbedPooling::automatic;
  bool normalize = false;        // unit L2 norm (a pipeline with Normalize has it anyway)
  std::int64_t dimensions = 0;   // > 0: Matryoshka truncation to the first N, renormalised when normalised
  std::string prompt;            // text put before each input (sentence-transformers' prompt)
  std::string prompt_name;       // one of config_sentence_transformers.json's prompts ("": its default)
};
std::vector<std::vector<float>> embed(LoadedModel& m, const std::vector<std::string>& texts, const EmbedOptions& o);
std::vector<std::vector<float>> embed(LoadedModel& m, const std::vector<std::string>& texts,
                                      EmbedPooling pooling = EmbedPooling::automatic, bool normalize = false);
// Image models: the last hidden states pooled the same way, except that mean averages the
// patches only (not [CLS] or DeiT's distillation token).
std::vector<std::vector<float>> embed_images(LoadedModel& m, const std::vector<Image>& images,
                                             EmbedPooling pooling = EmbedPooling::automatic, bool normalize = false);

// A cross-encoder (a classifier head over a text pair) scoring documents for a query, as
// sentence-transformers' CrossEncoder.predict: each pair through the tokenizer's pair template
// ([CLS] query [SEP] document [SEP] with segment ids), the document cut from its end to fit
// max_positions; relevance = sigmoid(logit) with one label, else the softmax probability of
// the last label. Best first.
struct RerankResult {
  std::int64_t index = 0;  // the document's position in the request
  float relevance = 0, logit = 0;
};
std::vector<RerankResult> rerank(LoadedModel& m, const std::string& query, const std::vector<std::string>& documents);

// Attention heat maps of one layer: one map per head (or the one head asked for).
struct AttentionQuery {
  std::string prompt;            // the encoder's text, or the decoder-only model's
  std::string target;            // encoder-decoder: the decoder's text
  std::string stack, kind;       // "encoder"|"decoder", "self"|"cross"; "": the model's default
  std::int64_t layer = -1;       // -1: the last
  std::int64_t head = -1;        // -1: every head
};
struct AttentionFigure {
  std::string stack, kind;
  std::int64_t layer = 0, head = -1;
  std::vector<HeatMap> maps;     // rows: query tokens, columns: key tokens (visible_token labels)
  HeatMapStyle style;            // its title names stack, kind, layer (and head)
};
// Defaults: decoder-only -> decoder self; encoder-only -> encoder self; encoder-decoder ->
// cross (needs target). Errors name the valid layer/head range.
AttentionFigure attention_figure(LoadedModel& m, const AttentionQuery& q);

// Attention rollout (Abnar & Zuidema 2020) of an image model: for each image of pixel_values
// (B, 3, H, W), the share of the [CLS] token's last state that flows from each patch through
// every layer (heads averaged, each layer mixed half-and-half with the identity for the
// residual path, rows renormalised), patches in row-major order.
std::vector<std::vector<float>> attention_rollout(Model& model, const Tensor& pixel_values);
struct ImageAttention {
  std::int64_t grid = 0;       // patches per side
  std::vector<float> rollout;  // grid x grid, row-major
  Image seen;                  // the image as the model saw it (after resize and crop)
};
// One image through the directory's preprocessor.
ImageAttention attention_rollout(LoadedModel& m, const Image& img);
// The image the model saw, enlarged so its shorter side is at least min_side, with the map
// (scaled to its maximum, bilinear between patch centres) laid over it in a heat colour ramp.
Image attention_overlay(const ImageAttention& a, std::int64_t min_side = 224);

}  // namespace tfm
