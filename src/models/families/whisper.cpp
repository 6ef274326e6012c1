// Whisper (Radford et al. 2022; Hugging Face's WhisperForConditionalGeneration): a speech
// encoder-decoder. The encoder reads a log-mel spectrogram through two width-3 convolutions
// with GELU (the second of stride 2: 3000 frames of 10 ms become 1500 tokens), adds a fixed
// sinusoidal table stored as embed_positions, and runs pre-LayerNorm blocks with a final
// LayerNorm; the decoder is GPT-2-like (learned positions, pre-LN, final LayerNorm) with
// cross-attention, and its head is the token embedding. The key projections have no bias.
// What decoding needs (forced and suppressed tokens, timestamps) lives in
// generation_config.json and src/infer/transcribe.cpp, not here.
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "whisper";
  b.architecture = Architecture::encoder_decoder;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-5;
  b.final_norm = true;
  b.position = PositionKind::learned;  // the decoder's; the encoder's table is source_pos_emb
  b.activation = FfnActivation::gelu;
  b.scale_embeddings = false;
  b.tie_embeddings = true;
  b.dropout = b.embedding_dropout = b.attention_dropout = 0.0;
  // WhisperConfig's defaults (whisper-tiny's sizes, the multilingual vocabulary).
  b.vocab_size = 51865; b.num_mel_bins = 80; b.d_model = 384; b.n_layers = b.n_decoder_layers = 4;
  b.n_heads = 6; b.d_ff = 1536; b.max_source_positions = 1500; b.max_positions = 448;
  b.pad_token_id = 50257; b.bos_token_id = 50257; b.eos_token_id = 50257; b.decoder_start_token_id = 50257;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("num_mel_bins", &ModelConfig::num_mel_bins, 1),
            int_key("d_model", &ModelConfig::d_model, 1), int_key("encoder_layers", &ModelConfig::n_layers, 1),
            int_key("decoder_layers", &ModelConfig::n_decoder_layers, 1),
            int_key("encoder_attention_heads", &ModelConfig::n_heads, 1), int_key("encoder_ffn_dim", &ModelConfig::d_ff, 1),
            int_key("max_source_positions", &ModelConfig::max_source_positions, 1),
            int_key("max_target_positions", &ModelConfig::max_positions, 1),
            mapped_key("activation_function", &ModelConfig::activation,
                       {{"gelu", FfnActivation::gelu}, {"relu", FfnActivation::relu}, {"gelu_new", FfnActivation::gelu_tanh},
                        {"silu", FfnActivation::silu}, {"swish", FfnActivation::silu}}),
            bool_key("scale_embedding", &ModelConfig::scale_embeddings), shared_dropout_key("dropout"),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("init_std", &ModelConfig::init_std, 0, 10),
            fixed_key("tie_word_embeddings", true),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), eos_key(),
            int_key("bos_token_id", &ModelConfig::bos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1),
            architectures_key({{"WhisperForConditionalGeneration", HeadKind::lm}}),
            fixed_key("use_weighted_layer_sum", false),
            // Checked against the encoder's in finish (one size serves both stacks here).
            inert_key("decoder_attention_heads"), inert_key("decoder_ffn_dim"),
            // Decoding settings older files keep here; the transcriber reads them
            // (generation_config.json first).
            inert_key("suppress_tokens"), inert_key("begin_suppress_tokens"), inert_key("forced_decoder_ids"),
            inert_key("max_length")};
  // Training-time switches (SpecAugment inside the model, layer drop, the audio classifier's
  // projection) and alignment settings that change nothing the model computes here.
  s.ignored = {"_name_or_path", "activation_dropout", "apply_spec_augment", "classifier_proj_size", "decoder_layerdrop",
               "encoder_layerdrop", "is_encoder_decoder", "mask_feature_length", "mask_feature_min_masks",
               "mask_feature_prob", "mask_time_length", "mask_time_min_masks", "mask_time_prob", "median_filter_width",
               "num_hidden_layers", "torch_dtype", "transformers_version", "use_cache", "gradient_checkpointing",
               "_attn_implementation", "bad_words_ids", "return_dict", "output_hidden_states"};
  s.finish = [](ModelConfig& c, const json& j, const std::string& w) {
    check_decoder_sizes_equal(c, j, w);
    TFM_CHECK(c.d_model % 2 == 0, w, "d_model ", c.d_model, " must be even (the encoder's sin | cos positions)");
  };
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model, q = c.n_heads * c.dim_head();
  std::vector<ParamSpec> s{{"model.encoder.conv1.weight", {C, c.num_mel_bins, 3}},
                           {"model.encoder.conv1.bias", {C}},
                           {"model.encoder.conv2.weight", {C, C, 3}},
                           {"model.encoder.conv2.bias", {C}},
                           {"model.encoder.embed_positions.weight", {c.max_source_positions, C}}};
  const auto attention = [&](const std::string& p) {
    add_linear_spec(s, p + "k_proj", q, C, false);  // Whisper's keys carry no bias
    add_linear_spec(s, p + "v_proj", q, C, true);
    add_linear_spec(s, p + "q_proj", q, C, true);
    add_linear_spec(s, p + "out_proj", C, q, true);
  };
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("model.encoder.layers", i);
    attention(p + "self_attn.");
    add_norm_spec(s, p + "self_attn_layer_norm", c);
    add_linear_spec(s, p + "fc1", c.d_ff, C, true);
    add_linear_spec(s, p + "fc2", C, c.d_ff, true);
    add_norm_spec(s, p + "final_layer_norm", c);
  }
  add_norm_spec(s, "model.encoder.layer_norm", c);
  s.push_back({"model.decoder.embed_tokens.weight", {c.vocab_size, C}});
  s.push_back({"model.decoder.embed_positions.weight", {c.max_positions, C}});
  for (std::int64_t i = 0; i < c.decoder_layers(); ++i) {
    const std::string p = layer_prefix("model.decoder.layers", i);
    attention(p + "self_attn.");
    add_norm_spec(s, p + "self_attn_layer_norm", c);
    attention(p + "encoder_attn.");
    add_norm_spec(s, p + "encoder_attn_layer_norm", c);
    add_linear_spec(s, p + "fc1", c.d_ff, C, true);
    add_linear_spec(s, p + "fc2", C, c.d_ff, true);
    add_norm_spec(s, p + "final_layer_norm", c);
  }
  add_norm_spec(s, "model.decoder.layer_norm", c);
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  TFM_CHECK(c.reads_audio() && c.max_source_positions > 0, "model", "a whisper model needs num_mel_bins and max_source_positions");
  l.conv1_weight = P.need("model.encoder.conv1.weight");
  l.conv1_bias = P.need("model.encoder.conv1.bias");
  l.conv2_weight = P.need("model.encoder.conv2.weight");
  l.conv2_bias = P.need("model.encoder.conv2.bias");
  l.source_pos_emb = P.need("model.encoder.embed_positions.weight");
  l.tok_emb = P.need("model.decoder.embed_tokens.weight");
  l.pos_emb = P.need("model.decoder.embed_positions.weight");
  wire_bart_layers(l, c, P);  // BART's names, pre-norm here (the config's placement)
  for (Stack* st : {&l.encoder, &l.decoder}) st->has_final_norm = true;
  l.encoder.final_norm = P.norm("model.encoder.layer_norm", c);
  l.decoder.final_norm = P.norm("model.decoder.layer_norm", c);
  l.lm_head = l.tok_emb;
}

// The tied head's copy, which some exports store.
bool hub_drops(const ModelConfig&, const std::string& n) { return n == "proj_out.weight" || n == "model.proj_out.weight"; }

// Whisper's encoder positions: sin over the first half of the channels, cos over the second,
// at timescales 10000^(-i / (C/2 - 1)) (whisper's sinusoids(), which Hugging Face copies in).
Tensor source_positions(const ModelConfig& c, const ParamSpec& p) {
  if (p.name != "model.encoder.embed_positions.weight") return Tensor();
  const std::int64_t P = c.max_source_positions, half = c.d_model / 2;
  const double step = std::log(10000.0) / static_cast<double>(std::max<std::int64_t>(half - 1, 1));
  std::vector<float> t(static_cast<std::size_t>(P * c.d_model));
  for (std::int64_t pos = 0; pos < P; ++pos)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * std::exp(-step * static_cast<double>(i));
      t[static_cast<std::size_t>(pos * c.d_model + i)] = static_cast<float>(std::sin(a));
      t[static_cast<std::size_t>(pos * c.d_model + half + i)] = static_cast<float>(std::cos(a));
    }
  return Tensor::from_floats(t, {P, c.d_model});
}

ModelConfig preset(const ModelConfig& base, std::int64_t d, std::int64_t layers, std::int64_t heads) {
  ModelConfig c = base;
  c.d_model = d;
  c.n_layers = c.n_decoder_layers = layers;
  c.n_heads = heads;
  c.d_ff = 4 * d;
  return c;
}

}  // namespace

Family whisper_family() {
  Family f;
  f.model_type = "whisper";
  f.schema = schema();
  f.presets = {{"whisper-tiny", preset(f.schema.base, 384, 4, 6)}, {"whisper-base", preset(f.schema.base, 512, 6, 8)},
               {"whisper-small", preset(f.schema.base, 768, 12, 12)}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "model.";
  f.hub_drops = hub_drops;
  f.fixed_init = source_positions;
  return f;
}

}  // namespace tfm
