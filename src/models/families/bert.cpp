// BERT (BertForSequenceClassification, BertForMaskedLM, BertModel): a post-LayerNorm encoder
// with learned positions, token types, an embedding LayerNorm, the pooler and the heads.
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "bert";
  b.architecture = Architecture::encoder_only;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::post;
  b.norm_eps = 1e-12;
  b.final_norm = false;
  b.embedding_norm = true;
  b.position = PositionKind::learned;
  b.activation = FfnActivation::gelu;
  b.head = HeadKind::classifier;
  // BertConfig's defaults (bert-base-uncased).
  b.vocab_size = 30522; b.d_model = 768; b.n_layers = 12; b.n_heads = 12; b.d_ff = 3072;
  b.max_positions = 512; b.type_vocab_size = 2; b.pad_token_id = 0;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("hidden_size", &ModelConfig::d_model, 1),
            int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
            int_key("num_attention_heads", &ModelConfig::n_heads, 1),
            int_key("intermediate_size", &ModelConfig::d_ff, 1),
            mapped_key("hidden_act", &ModelConfig::activation,
                                      {{"gelu", FfnActivation::gelu}, {"relu", FfnActivation::relu},
                                       {"gelu_new", FfnActivation::gelu_tanh}, {"silu", FfnActivation::silu}}),
            shared_dropout_key("hidden_dropout_prob"),
            double_key("attention_probs_dropout_prob", &ModelConfig::attention_dropout, 0, 0.999),
            int_key("max_position_embeddings", &ModelConfig::max_positions, 1),
            int_key("type_vocab_size", &ModelConfig::type_vocab_size, 0),
            double_key("layer_norm_eps", &ModelConfig::norm_eps, 0, 1),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), architectures_key({{"BertForSequenceClassification", HeadKind::classifier},
                               {"BertForMaskedLM", HeadKind::masked_lm}, {"BertForPreTraining", HeadKind::masked_lm},
                               {"BertModel", HeadKind::none}}),
            fixed_key("position_embedding_type", "absolute")};
  s.ignored = {"torch_dtype", "transformers_version", "use_cache", "classifier_dropout", "gradient_checkpointing",
               "_name_or_path", "id2label", "label2id", "finetuning_task", "_attn_implementation",
               "directionality", "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
               "pooler_size_per_head", "pooler_type"};
  // Only single-label classification's softmax is what tfm classify reports.
  s.keys.push_back({"problem_type", [](ModelConfig&, const json& v, const std::string& w) {
                      TFM_CHECK(v.is_null() || v == "single_label_classification", w,
                                "key 'problem_type': only \"single_label_classification\" is supported, got ", v.dump());
                    }, nullptr});
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  std::vector<ParamSpec> s{{"bert.embeddings.word_embeddings.weight", {c.vocab_size, C}},
                           {"bert.embeddings.position_embeddings.weight", {c.max_positions, C}}};
  if (c.type_vocab_size > 0) s.push_back({"bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, C}});
  add_norm_spec(s, "bert.embeddings.LayerNorm", c);
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("bert.encoder.layer", i);
    add_linear_spec(s, p + "attention.self.query", C, C, true);
    add_linear_spec(s, p + "attention.self.key", C, C, true);
    add_linear_spec(s, p + "attention.self.value", C, C, true);
    add_linear_spec(s, p + "attention.output.dense", C, C, true);
    add_norm_spec(s, p + "attention.output.LayerNorm", c);
    add_linear_spec(s, p + "intermediate.dense", c.d_ff, C, true);
    add_linear_spec(s, p + "output.dense", C, c.d_ff, true);
    add_norm_spec(s, p + "output.LayerNorm", c);
  }
  if (c.head == HeadKind::classifier) {
    add_linear_spec(s, "bert.pooler.dense", C, C, true);
    add_linear_spec(s, "classifier", c.num_labels, C, true);
  } else if (c.head == HeadKind::masked_lm) {
    add_linear_spec(s, "cls.predictions.transform.dense", C, C, true);
    add_norm_spec(s, "cls.predictions.transform.LayerNorm", c);
    s.push_back({"cls.predictions.bias", {c.vocab_size}});
  }
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("bert.embeddings.word_embeddings.weight");
  l.pos_emb = P.need("bert.embeddings.position_embeddings.weight");
  l.type_emb = P.maybe("bert.embeddings.token_type_embeddings.weight");
  l.has_embed_norm = true;
  l.embed_norm = P.norm("bert.embeddings.LayerNorm", c);
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("bert.encoder.layer", i);
    Layer L;
    L.name = p;
    L.self_attn = wire_attention(P, c, p + "attention.", {"self.query", "self.key", "self.value", "output.dense"});
    L.self_norm = P.norm(p + "attention.output.LayerNorm", c);
    L.ffn = ffn_shape(c);
    L.ffn.up = P.linear(p + "intermediate.dense");
    L.ffn.down = P.linear(p + "output.dense");
    L.ffn_norm = P.norm(p + "output.LayerNorm", c);
    l.encoder.layers.push_back(L);
  }
  if (c.head == HeadKind::classifier) {
    l.pooler = P.linear("bert.pooler.dense");
    l.classifier = P.linear("classifier");
  } else if (c.head == HeadKind::masked_lm) {
    l.mlm_dense = P.linear("cls.predictions.transform.dense");
    l.mlm_norm = P.norm("cls.predictions.transform.LayerNorm", c);
    l.mlm_decoder = l.tok_emb;
    l.mlm_bias = P.need("cls.predictions.bias");
  }
}

// The MLM decoder is tied (= the word embeddings, its bias = cls.predictions.bias); the
// next-sentence head of BertForPreTraining, and the pooler or MLM head when the model's head
// is the other one, are not used.
bool hub_drops(const ModelConfig& c, const std::string& n) {
  if (n == "cls.predictions.decoder.weight" || n == "cls.predictions.decoder.bias") return true;
  if (starts_with(n, "cls.seq_relationship.")) return true;
  if (c.head != HeadKind::masked_lm && starts_with(n, "cls.predictions.")) return true;
  if (c.head != HeadKind::classifier && starts_with(n, "bert.pooler.")) return true;
  return false;
}

}  // namespace

Family bert_family() {
  Family f;
  f.model_type = "bert";
  f.schema = schema();
  f.presets = {{"bert", schema().base}};  // bert-base-uncased
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "bert.";
  f.hub_drops = hub_drops;
  f.padded_embedding = "bert.embeddings.word_embeddings.weight";
  return f;
}

}  // namespace tfm
