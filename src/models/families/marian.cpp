// MarianMTModel (the OPUS-MT translators): BART's post-norm encoder-decoder with static
// sinusoidal positions in Marian's layout (sin | cos halves), scaled embeddings shared by
// both stacks and the tied head, and final_logits_bias.
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "marian";
  b.architecture = Architecture::encoder_decoder;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::post;
  b.norm_eps = 1e-5;  // nn.LayerNorm's default
  b.final_norm = false;
  b.position = PositionKind::sinusoidal;
  b.sinusoid_pairing = RopePairing::halves;
  b.activation = FfnActivation::silu;  // "swish"
  b.scale_embeddings = true;
  b.logits_bias = true;
  b.dropout = b.embedding_dropout = 0.1;
  b.attention_dropout = 0.0;
  // MarianConfig's defaults.
  b.vocab_size = 58101; b.d_model = 1024; b.n_layers = b.n_decoder_layers = 12; b.n_heads = 16; b.d_ff = 4096;
  b.max_positions = 1024; b.pad_token_id = b.decoder_start_token_id = 58100; b.eos_token_id = 0; b.bos_token_id = 0;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("encoder_layers", &ModelConfig::n_layers, 1), int_key("decoder_layers", &ModelConfig::n_decoder_layers, 1),
            int_key("encoder_attention_heads", &ModelConfig::n_heads, 1), int_key("encoder_ffn_dim", &ModelConfig::d_ff, 1),
            int_key("max_position_embeddings", &ModelConfig::max_positions, 1),
            mapped_key("activation_function", &ModelConfig::activation,
                                      {{"swish", FfnActivation::silu}, {"silu", FfnActivation::silu}, {"gelu", FfnActivation::gelu},
                                       {"relu", FfnActivation::relu}, {"gelu_new", FfnActivation::gelu_tanh}}),
            bool_key("scale_embedding", &ModelConfig::scale_embeddings), shared_dropout_key("dropout"),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("init_std", &ModelConfig::init_std, 0, 10),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            int_key("bos_token_id", &ModelConfig::bos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1),
            architectures_key({{"MarianMTModel", HeadKind::lm}}),
            fixed_key("normalize_before", false), fixed_key("normalize_embedding", false),
            fixed_key("add_final_layer_norm", false), fixed_key("static_position_embeddings", true),
            fixed_key("add_bias_logits", false), fixed_key("share_encoder_decoder_embeddings", true),
            // BART's legacy classification labels: no meaning for a translator.
            inert_key("id2label"), inert_key("num_labels"),
            // Checked against the encoder's in finish (one size serves both stacks here).
            inert_key("decoder_attention_heads"), inert_key("decoder_ffn_dim"), inert_key("decoder_vocab_size")};
  s.ignored = {"_name_or_path", "activation_dropout", "bad_words_ids", "classif_dropout", "classifier_dropout",
               "decoder_layerdrop", "encoder_layerdrop", "extra_pos_embeddings", "forced_eos_token_id", "label2id",
               "max_length", "num_beams", "num_hidden_layers", "transformers_version", "use_cache", "torch_dtype",
               "gradient_checkpointing", "is_encoder_decoder", "_attn_implementation", "output_past"};
  s.finish = [](ModelConfig& c, const json& j, const std::string& w) {
    check_decoder_sizes_equal(c, j, w);
    TFM_CHECK(!j.contains("decoder_vocab_size") ||
                  (j["decoder_vocab_size"].is_number_integer() && j["decoder_vocab_size"].get<std::int64_t>() == c.vocab_size),
              w, "key 'decoder_vocab_size': ", j.value("decoder_vocab_size", nlohmann::json()).dump(), " differs from vocab_size ",
              c.vocab_size, " (only equal sizes are supported)");
  };
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model, q = c.n_heads * c.dim_head();
  std::vector<ParamSpec> s{{"model.shared.weight", {c.vocab_size, C}}};
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    for (std::int64_t i = 0; i < (dec ? c.decoder_layers() : c.n_layers); ++i) {
      const std::string p = layer_prefix("model." + std::string(side) + ".layers", i);
      for (const char* a : {"self_attn", "encoder_attn"}) {
        if (!dec && std::string(a) == "encoder_attn") continue;
        for (const char* m : {"k_proj", "v_proj", "q_proj"}) add_linear_spec(s, p + a + "." + m, q, C, true);
        add_linear_spec(s, p + a + ".out_proj", C, q, true);
        add_norm_spec(s, p + a + "_layer_norm", c);
      }
      add_linear_spec(s, p + "fc1", c.d_ff, C, true);
      add_linear_spec(s, p + "fc2", C, c.d_ff, true);
      add_norm_spec(s, p + "final_layer_norm", c);
    }
  }
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, C}});
  s.push_back({"final_logits_bias", {1, c.vocab_size}});
  return s;
}

}  // namespace

void check_decoder_sizes_equal(const ModelConfig& c, const nlohmann::json& j, const std::string& w) {
  const auto same = [&](const char* key, std::int64_t want, const char* as) {
    if (!j.contains(key)) return;
    TFM_CHECK(j[key].is_number_integer() && j[key].get<std::int64_t>() == want, w, "key '", key, "': ", j[key].dump(),
              " differs from ", as, " ", want, " (only equal sizes are supported)");
  };
  same("decoder_attention_heads", c.n_heads, "encoder_attention_heads");
  same("decoder_ffn_dim", c.d_ff, "encoder_ffn_dim");
}

void wire_bart_layers(Layout& l, const ModelConfig& c, const WireParams& P) {
  constexpr std::array<const char*, 4> names{"q_proj", "k_proj", "v_proj", "out_proj"};
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    Stack& s = dec ? l.decoder : l.encoder;
    const std::int64_t n = dec ? c.decoder_layers() : c.n_layers;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string p = layer_prefix("model." + std::string(side) + ".layers", i);
      Layer L;
      L.name = p;
      L.self_attn = wire_attention(P, c, p + "self_attn.", names);
      L.self_norm = P.norm(p + "self_attn_layer_norm", c);
      if (dec) {
        L.cross_attn = wire_attention(P, c, p + "encoder_attn.", names);
        L.cross_norm = P.norm(p + "encoder_attn_layer_norm", c);
      }
      L.ffn = ffn_shape(c);
      L.ffn.up = P.linear(p + "fc1");
      L.ffn.down = P.linear(p + "fc2");
      L.ffn_norm = P.norm(p + "final_layer_norm", c);
      s.layers.push_back(L);
    }
  }
}

namespace {

// BART's layout: post-norm layers, fc1/fc2, no final norms, the shared embedding for both
// stacks and the tied head, plus final_logits_bias.
void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("model.shared.weight");
  wire_bart_layers(l, c, P);
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
  l.logits_bias = P.need("final_logits_bias");
}

// The static sinusoidal table is a buffer (recomputed from the config); the stacks' copies of
// the shared embedding are tied.
bool hub_drops(const ModelConfig&, const std::string& n) {
  return ends_with(n, "embed_positions.weight") || n == "model.encoder.embed_tokens.weight" ||
         n == "model.decoder.embed_tokens.weight";
}

}  // namespace

Family marian_family() {
  Family f;
  f.model_type = "marian";
  f.schema = schema();
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "model.";
  f.hub_drops = hub_drops;
  return f;
}

}  // namespace tfm
