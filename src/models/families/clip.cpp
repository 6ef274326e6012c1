// CLIP (Radford et al. 2021; Hugging Face's CLIPModel): two towers trained so that a picture
// and the texts that describe it land close together. The vision tower is a ViT whose patch
// convolution has no bias, whose [CLS] token ("class_embedding", (C)) and positions
// ("position_embedding", an nn.Embedding (T, C)) enter a LayerNorm before the layers
// ("pre_layrnorm", as Hugging Face spells it), with no final norm on the stack: the [CLS]
// state alone is normalised ("post_layernorm"). The text tower is GPT-2-like, causal with
// learned positions and a final LayerNorm, and its embedding is the state at the
// end-of-text token. Each tower's embedding goes through a projection without bias into the
// shared space; exp(logit_scale) scales the cosine similarities. Layers are pre-LayerNorm with
// quick_gelu (x·sigmoid(1.702x)) as OpenAI trained them. Model::image_features and
// Model::text_features run the towers (model_clip.cpp); docs/vision.md, "CLIP".
//
// config.json nests each tower's sizes ("vision_config", "text_config"); the vision tower's
// become the ModelConfig's own fields, the text tower's its text_tower (model_config.h).
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

// The attributes transformers' PretrainedConfig writes into every nested config (older
// releases wrote all of them): generation settings and bookkeeping, nothing a tower computes.
const std::vector<std::string> kPretrainedConfigKeys = {
    "_name_or_path", "add_cross_attention", "architectures", "bad_words_ids", "begin_suppress_tokens",
    "chunk_size_feed_forward", "cross_attention_hidden_size", "decoder_start_token_id", "diversity_penalty",
    "do_sample", "early_stopping", "encoder_no_repeat_ngram_size", "exponential_decay_length_penalty",
    "finetuning_task", "forced_bos_token_id", "forced_eos_token_id", "gradient_checkpointing", "id2label",
    "is_decoder", "is_encoder_decoder", "label2id", "length_penalty", "max_length", "min_length",
    "no_repeat_ngram_size", "num_beam_groups", "num_beams", "num_return_sequences", "output_attentions",
    "output_hidden_states", "output_scores", "prefix", "problem_type", "pruned_heads", "remove_invalid_values",
    "repetition_penalty", "return_dict", "return_dict_in_generate", "sep_token_id", "suppress_tokens",
    "task_specific_params", "temperature", "tf_legacy_loss", "tie_encoder_decoder", "tie_word_embeddings",
    "tokenizer_class", "top_k", "top_p", "torch_dtype", "torchscript", "transformers_version", "typical_p",
    "use_bfloat16", "_attn_implementation", "initializer_factor",
    // CLIP's own keys that carry nothing here: the top level's projection_dim counts, and the
    // towers have no hidden dropout (CLIPMLP has none; "dropout" is unused by modeling_clip).
    "projection_dim", "dropout"};

ConfigKey activation_key() {
  return mapped_key("hidden_act", &ModelConfig::activation,
                    {{"quick_gelu", FfnActivation::quick_gelu}, {"gelu", FfnActivation::gelu},
                     {"gelu_new", FfnActivation::gelu_tanh}, {"gelu_pytorch_tanh", FfnActivation::gelu_tanh},
                     {"relu", FfnActivation::relu}, {"silu", FfnActivation::silu}});
}

// The keys of each nested config, read onto a ModelConfig's own fields.
std::vector<ConfigKey> tower_keys(const char* model_type) {
  return {fixed_key("model_type", model_type),
          int_key("hidden_size", &ModelConfig::d_model, 1),
          int_key("intermediate_size", &ModelConfig::d_ff, 1),
          int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
          int_key("num_attention_heads", &ModelConfig::n_heads, 1),
          activation_key(),
          double_key("layer_norm_eps", &ModelConfig::norm_eps, 0, 1),
          double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
          double_key("initializer_range", &ModelConfig::init_std, 0, 10)};
}

std::vector<ConfigKey> vision_keys() {
  std::vector<ConfigKey> k = tower_keys("clip_vision_model");
  k.push_back(int_key("image_size", &ModelConfig::image_size, 1));
  k.push_back(int_key("patch_size", &ModelConfig::patch_size, 1));
  k.push_back(int_key("num_channels", &ModelConfig::num_channels, 1));
  return k;
}

std::vector<ConfigKey> text_keys() {
  std::vector<ConfigKey> k = tower_keys("clip_text_model");
  k.push_back(int_key("vocab_size", &ModelConfig::vocab_size, 1));
  k.push_back(int_key("max_position_embeddings", &ModelConfig::max_positions, 1));
  k.push_back(int_key("pad_token_id", &ModelConfig::pad_token_id, -1));
  k.push_back(int_key("bos_token_id", &ModelConfig::bos_token_id, -1));
  k.push_back(eos_key());
  return k;
}

json write_keys(const std::vector<ConfigKey>& keys, const ModelConfig& c, const char* model_type) {
  json o = json::object();
  o["model_type"] = model_type;
  for (const auto& k : keys)
    if (k.write) o[k.name] = k.write(c);
  return o;
}

// "vision_config": onto the ModelConfig itself.
ConfigKey vision_config_key() {
  return {"vision_config",
          [](ModelConfig& c, const json& v, const std::string& w) {
            if (v.is_null()) return;  // CLIPVisionConfig's defaults
            TFM_CHECK(v.is_object(), w, "key 'vision_config' must be an object, got ", v.dump());
            read_config_keys(c, v, vision_keys(), kPretrainedConfigKeys, "CLIP's vision_config", w + " vision_config");
          },
          [](const ModelConfig& c) { return write_keys(vision_keys(), c, "clip_vision_model"); }};
}

// "text_config": onto text_tower, through a ModelConfig that holds the tower's sizes.
ConfigKey text_config_key(const std::string& name) {
  return {name,
          [name](ModelConfig& c, const json& v, const std::string& w) {
            if (v.is_null()) return;  // CLIPTextConfig's defaults
            TFM_CHECK(v.is_object(), w, "key '", name, "' must be an object, got ", v.dump());
            ModelConfig t = text_tower_config(c);
            read_config_keys(t, v, text_keys(), kPretrainedConfigKeys, "CLIP's " + name, w + " " + name);
            TextTowerConfig& x = c.text_tower;
            x.vocab_size = t.vocab_size; x.d_model = t.d_model; x.n_layers = t.n_layers; x.n_heads = t.n_heads;
            x.d_ff = t.d_ff; x.max_positions = t.max_positions; x.activation = t.activation; x.norm_eps = t.norm_eps;
            x.pad_token_id = t.pad_token_id; x.bos_token_id = t.bos_token_id; x.eos_token_id = t.eos_token_id;
            x.attention_dropout = t.attention_dropout;
          },
          name == "text_config" ? std::function<json(const ModelConfig&)>(
                                      [](const ModelConfig& c) { return write_keys(text_keys(), text_tower_config(c), "clip_text_model"); })
                                : nullptr};
}

ConfigKey text_tower_int(const char* name, std::int64_t TextTowerConfig::*f, std::int64_t min) {
  return {name, [name, f, min](ModelConfig& c, const json& v, const std::string& w) { c.text_tower.*f = read_int(v, name, w, min); },
          [f](const ModelConfig& c) { return json(c.text_tower.*f); }};
}

ConfigKey text_tower_double(const char* name, double TextTowerConfig::*f) {
  return {name,
          [name, f](ModelConfig& c, const json& v, const std::string& w) {
            TFM_CHECK(v.is_number(), w, "key '", name, "' must be a number, got ", v.dump());
            c.text_tower.*f = v.get<double>();
            TFM_CHECK(std::isfinite(c.text_tower.*f), w, "key '", name, "' must be finite");
          },
          [f](const ModelConfig& c) { return json(c.text_tower.*f); }};
}

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "clip";
  b.architecture = Architecture::encoder_only;  // the vision tower; the text tower is the decoder stack
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-5;
  b.final_norm = false;     // post_layernorm normalises the [CLS] state only
  b.embedding_norm = true;  // pre_layrnorm
  b.position = PositionKind::learned;
  b.activation = FfnActivation::quick_gelu;
  b.head = HeadKind::none;
  b.pooling = Pooling::first;
  b.tie_embeddings = false;
  b.dropout = b.embedding_dropout = b.attention_dropout = 0.0;
  // CLIPVisionConfig's defaults (ViT-B/32 at 224 x 224).
  b.d_model = 768; b.n_layers = 12; b.n_heads = 12; b.d_ff = 3072;
  b.image_size = 224; b.patch_size = 32; b.num_channels = 3;
  b.vocab_size = 1;  // the pictures' tokens are patches; the text tower has its own vocabulary
  b.pad_token_id = b.bos_token_id = b.eos_token_id = b.decoder_start_token_id = -1;
  b.text_tower.vocab_size = 49408;
  ConfigSchema s;
  s.base = b;
  s.keys = {architectures_key({{"CLIPModel", HeadKind::none}}), vision_config_key(), text_config_key("text_config"),
            // transformers before 4.22 wrote the towers' settings as *_config_dict too.
            text_config_key("text_config_dict"),
            {"vision_config_dict",
             [](ModelConfig& c, const json& v, const std::string& w) { vision_config_key().read(c, v, w); }, nullptr},
            text_tower_int("projection_dim", &TextTowerConfig::projection_dim, 1),
            text_tower_double("logit_scale_init_value", &TextTowerConfig::logit_scale_init),
            text_tower_double("initializer_factor", &TextTowerConfig::init_factor)};
  s.ignored = {"torch_dtype", "transformers_version", "_name_or_path", "_commit_hash", "_attn_implementation"};
  s.finish = [](ModelConfig& c, const json& file, const std::string& w) {
    const TextTowerConfig& t = c.text_tower;
    TFM_CHECK(t.d_model % t.n_heads == 0, w, "text_config: hidden_size ", t.d_model, " is not a multiple of ",
              "num_attention_heads ", t.n_heads);
    TFM_CHECK(t.attention_dropout == c.attention_dropout, w, "text_config: attention_dropout ", t.attention_dropout,
              " differs from the vision tower's ", c.attention_dropout, " (the engine runs both towers with one rate)");
    TFM_CHECK(t.eos_token_id >= 0 && t.eos_token_id < t.vocab_size, w, "text_config: eos_token_id ", t.eos_token_id,
              " is not a token of the ", t.vocab_size, "-token vocabulary (the text embedding is read at it)");
    finish_image_config(c, file, w);
  };
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  const TextTowerConfig& t = c.text_tower;
  std::vector<ParamSpec> s;
  const auto layers = [&s](const std::string& root, std::int64_t n, std::int64_t width, std::int64_t ffn,
                           const ModelConfig& cfg) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string p = layer_prefix(root + "encoder.layers", i);
      for (const char* m : {"k_proj", "v_proj", "q_proj", "out_proj"}) add_linear_spec(s, p + "self_attn." + m, width, width, true);
      add_norm_spec(s, p + "layer_norm1", cfg);
      add_linear_spec(s, p + "mlp.fc1", ffn, width, true);
      add_linear_spec(s, p + "mlp.fc2", width, ffn, true);
      add_norm_spec(s, p + "layer_norm2", cfg);
    }
  };
  const ModelConfig text = text_tower_config(c);
  s.push_back({"text_model.embeddings.token_embedding.weight", {t.vocab_size, t.d_model}});
  s.push_back({"text_model.embeddings.position_embedding.weight", {t.max_positions, t.d_model}});
  layers("text_model.", t.n_layers, t.d_model, t.d_ff, text);
  add_norm_spec(s, "text_model.final_layer_norm", text);
  s.push_back({"vision_model.embeddings.class_embedding", {C}});
  s.push_back({"vision_model.embeddings.patch_embedding.weight", {C, c.num_channels, c.patch_size, c.patch_size}});
  s.push_back({"vision_model.embeddings.position_embedding.weight", {c.image_tokens(), C}});
  add_norm_spec(s, "vision_model.pre_layrnorm", c);
  layers("vision_model.", c.n_layers, C, c.d_ff, c);
  add_norm_spec(s, "vision_model.post_layernorm", c);
  add_linear_spec(s, "visual_projection", t.projection_dim, C, false);
  add_linear_spec(s, "text_projection", t.projection_dim, t.d_model, false);
  s.push_back({"logit_scale", {}});
  return s;
}

// One tower's layers as a stack (the config gives its heads, activation and norm epsilon).
void wire_tower(Stack& stack, const std::string& root, std::int64_t n, const ModelConfig& cfg, const WireParams& P) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string p = layer_prefix(root + "encoder.layers", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "layer_norm1", cfg);
    L.self_attn = wire_attention(P, cfg, p + "self_attn.", {"q_proj", "k_proj", "v_proj", "out_proj"});
    L.ffn_norm = P.norm(p + "layer_norm2", cfg);
    L.ffn = ffn_shape(cfg);
    L.ffn.up = P.linear(p + "mlp.fc1");
    L.ffn.down = P.linear(p + "mlp.fc2");
    stack.layers.push_back(L);
  }
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  TFM_CHECK(c.reads_images() && c.text_tower.enabled(), "model", "a clip model needs image_size, patch_size and a text tower");
  // The vision tower as the image encoder: its (C) class embedding and (T, C) position table
  // as stored (embed_patches reads them in ViT's (1, 1, C) and (1, T, C) shapes).
  l.cls_token = P.need("vision_model.embeddings.class_embedding");
  l.patch_weight = P.need("vision_model.embeddings.patch_embedding.weight");
  l.pos_emb = P.need("vision_model.embeddings.position_embedding.weight");
  l.embed_norm = P.norm("vision_model.pre_layrnorm", c);
  l.has_embed_norm = true;
  wire_tower(l.encoder, "vision_model.", c.n_layers, c, P);
  l.pooled_norm = P.norm("vision_model.post_layernorm", c);
  // The text tower as the decoder stack (causal self-attention, no cross-attention).
  const ModelConfig text = text_tower_config(c);
  l.tok_emb = P.need("text_model.embeddings.token_embedding.weight");
  l.text_pos_emb = P.need("text_model.embeddings.position_embedding.weight");
  wire_tower(l.decoder, "text_model.", text.n_layers, text, P);
  l.decoder.has_final_norm = true;
  l.decoder.final_norm = P.norm("text_model.final_layer_norm", text);
  l.image_projection = P.linear("visual_projection");
  l.text_projection = P.linear("text_projection");
  l.logit_scale = P.need("logit_scale");
}

// CLIPPreTrainedModel._init_weights: embeddings N(0, 0.02 f); attention inputs
// N(0, C^-0.5 (2 L)^-0.5 f), outputs N(0, C^-0.5 f); fc1 N(0, (2C)^-0.5 f), fc2 as the
// attention inputs; the class embedding and projections N(0, C^-0.5 f) (f: initializer_factor).
double init_std(const ModelConfig& c, const std::string& n) {
  const bool text = starts_with(n, "text_model.");
  const double f = c.text_tower.init_factor;
  const double C = static_cast<double>(text ? c.text_tower.d_model : c.d_model);
  const double L = static_cast<double>(text ? c.text_tower.n_layers : c.n_layers);
  if (text && n.find("embedding.weight") != std::string::npos) return 0.02 * f;
  if (n.find("_embedding.weight") != std::string::npos) return c.init_std * f;  // the vision tower's patches and positions
  if (n == "vision_model.embeddings.class_embedding") return std::pow(C, -0.5) * f;
  if (n == "visual_projection.weight") return std::pow(static_cast<double>(c.d_model), -0.5) * f;
  if (n == "text_projection.weight") return std::pow(static_cast<double>(c.text_tower.d_model), -0.5) * f;
  if (ends_with(n, "out_proj.weight")) return std::pow(C, -0.5) * f;
  if (ends_with(n, "mlp.fc1.weight")) return std::pow(2.0 * C, -0.5) * f;
  return std::pow(C, -0.5) * std::pow(2.0 * L, -0.5) * f;  // q/k/v_proj, fc2
}

Tensor fixed_init(const ModelConfig& c, const ParamSpec& p) {
  if (p.name != "logit_scale") return Tensor();
  return Tensor::full({}, static_cast<float>(c.text_tower.logit_scale_init));
}

}  // namespace

ModelConfig text_tower_config(const ModelConfig& c) {
  const TextTowerConfig& t = c.text_tower;
  ModelConfig x = c;
  x.architecture = Architecture::decoder_only;
  x.image_size = x.patch_size = 0;
  x.vocab_size = t.vocab_size;
  x.d_model = t.d_model; x.n_layers = t.n_layers; x.n_heads = t.n_heads; x.d_ff = t.d_ff;
  x.n_kv_heads = x.head_dim = 0;
  x.max_positions = t.max_positions; x.activation = t.activation; x.norm_eps = t.norm_eps;
  x.pad_token_id = t.pad_token_id; x.bos_token_id = t.bos_token_id; x.eos_token_id = t.eos_token_id;
  x.attention_dropout = t.attention_dropout;
  x.embedding_norm = false;
  x.final_norm = true;
  return x;
}

Family clip_family() {
  Family f;
  f.model_type = "clip";
  f.schema = schema();
  ModelConfig b32 = f.schema.base;  // openai/clip-vit-base-patch32
  b32.max_positions = b32.image_tokens();
  f.presets = {{"clip-vit-b32", b32}};
  f.parameters = parameters;
  f.wire = wire;
  f.init_std = init_std;
  f.fixed_init = fixed_init;
  return f;
}

}  // namespace tfm
