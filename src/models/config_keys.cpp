// Key tables: the engine's own ("transformer") and Hugging Face's for gpt2, llama, bert, t5.
#include "models/config_keys.h"

#include <map>

#include "models/config_enums.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

std::int64_t read_int(const json& v, const std::string& key, const std::string& where, std::int64_t min) {
  TFM_CHECK(v.is_number_integer(), where, "key '", key, "' must be an integer, got ", v.dump());
  const auto x = v.get<std::int64_t>();
  TFM_CHECK(x >= min, where, "key '", key, "' must be >= ", min, ", got ", x);
  return x;
}
double read_double(const json& v, const std::string& key, const std::string& where, double lo, double hi) {
  TFM_CHECK(v.is_number(), where, "key '", key, "' must be a number, got ", v.dump());
  const double x = v.get<double>();
  TFM_CHECK(x >= lo && x <= hi, where, "key '", key, "' must be in [", lo, ", ", hi, "], got ", x);
  return x;
}
bool read_bool(const json& v, const std::string& key, const std::string& where) {
  TFM_CHECK(v.is_boolean(), where, "key '", key, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}
std::string read_string(const json& v, const std::string& key, const std::string& where) {
  TFM_CHECK(v.is_string(), where, "key '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

// Field bindings ------------------------------------------------------------------------
ConfigKey int_key(std::string name, std::int64_t ModelConfig::*f, std::int64_t min) {
  return {name, [f, name, min](ModelConfig& c, const json& v, const std::string& w) { c.*f = read_int(v, name, w, min); },
          [f](const ModelConfig& c) { return json(c.*f); }};
}
ConfigKey double_key(std::string name, double ModelConfig::*f, double lo, double hi) {
  return {name, [f, name, lo, hi](ModelConfig& c, const json& v, const std::string& w) { c.*f = read_double(v, name, w, lo, hi); },
          [f](const ModelConfig& c) { return json(c.*f); }};
}
ConfigKey bool_key(std::string name, bool ModelConfig::*f) {
  return {name, [f, name](ModelConfig& c, const json& v, const std::string& w) { c.*f = read_bool(v, name, w); },
          [f](const ModelConfig& c) { return json(c.*f); }};
}
template <class E>
ConfigKey enum_key(std::string name, E ModelConfig::*f) {
  return {name,
          [f, name](ModelConfig& c, const json& v, const std::string& w) { c.*f = parse_enum<E>(read_string(v, name, w), name, w); },
          [f](const ModelConfig& c) { return json(to_string(c.*f)); }};
}
// A key whose JSON value is a string from a family-specific table.
template <class E>
ConfigKey mapped_key(std::string name, E ModelConfig::*f, std::vector<std::pair<std::string, E>> table) {
  return {name,
          [f, name, table](ModelConfig& c, const json& v, const std::string& w) {
            const std::string s = read_string(v, name, w);
            std::string allowed;
            for (const auto& [text, e] : table) {
              if (s == text) {
                c.*f = e;
                return;
              }
              allowed += (allowed.empty() ? "" : ", ") + text;
            }
            fail(w, "key '", name, "': unknown value '", s, "' (allowed: ", allowed, ")");
          },
          [f, table](const ModelConfig& c) {
            for (const auto& [text, e] : table)
              if (e == c.*f) return json(text);
            return json(nullptr);
          }};
}

// Hugging Face's {"0": "neg", "1": "pos"}: label names by index. As in transformers, it sets
// num_labels too (a num_labels key is read after it, and validation checks they agree).
ConfigKey id2label_key() {
  return {"id2label",
          [](ModelConfig& c, const json& v, const std::string& w) {
            TFM_CHECK(v.is_object(), w, "key 'id2label' must be an object {\"0\": name, ...}, got ", v.dump());
            std::vector<std::string> names(v.size());
            for (auto it = v.begin(); it != v.end(); ++it) {
              std::size_t used = 0;
              long long i = -1;
              try {
                i = std::stoll(it.key(), &used);
              } catch (const std::exception&) {
              }
              TFM_CHECK(used == it.key().size() && i >= 0 && i < static_cast<long long>(names.size()), w,
                        "key 'id2label': keys must be the indices 0..", names.size() - 1, ", got '", it.key(), "'");
              names[static_cast<std::size_t>(i)] = read_string(it.value(), "id2label", w);
            }
            c.id2label = std::move(names);
            if (!c.id2label.empty()) c.num_labels = static_cast<std::int64_t>(c.id2label.size());
          },
          [](const ModelConfig& c) {
            if (c.id2label.empty()) return json(nullptr);  // not written
            json o = json::object();
            for (std::size_t i = 0; i < c.id2label.size(); ++i) o[std::to_string(i)] = c.id2label[i];
            return o;
          }};
}

// "architectures": the task class names the hub's file records. Each known name picks the
// head; any other is refused (its weights and outputs would not be what the engine runs).
ConfigKey architectures_key(std::vector<std::pair<std::string, HeadKind>> known) {
  return {"architectures", [known](ModelConfig& c, const json& v, const std::string& w) {
            TFM_CHECK(v.is_array(), w, "key 'architectures' must be an array");
            for (const auto& a : v) {
              const std::string name = read_string(a, "architectures", w);
              std::string allowed;
              bool ok = false;
              for (const auto& [n, head] : known) {
                if (n == name) c.head = head, ok = true;
                allowed += (allowed.empty() ? "" : ", ") + n;
              }
              TFM_CHECK(ok, w, "key 'architectures': unsupported value '", name, "' (allowed: ", allowed, ")");
            }
          }, nullptr};
}

// A key the engine accepts with one value only (a structural switch it does not implement).
ConfigKey fixed_key(std::string name, json value) {
  return {name, [name, value](ModelConfig&, const json& v, const std::string& w) {
            TFM_CHECK(v == value, w, "key '", name, "': only ", value.dump(), " is supported, got ", v.dump());
          }, nullptr};
}

// An id, or (Llama 3 and later files) a list of ids: the first is the model's EOS; the
// generation settings keep them all (generation_config.json).
ConfigKey eos_key() {
  return {"eos_token_id", [](ModelConfig& c, const json& v, const std::string& w) {
            const json& first = v.is_array() && !v.empty() ? v[0] : v;
            c.eos_token_id = first.is_null() ? -1 : read_int(first, "eos_token_id", w, -1);
          }, [](const ModelConfig& c) { return json(c.eos_token_id); }};
}

// "sparse_attention": {"window", "global_tokens", "global_first", "random_blocks",
// "block_size", "seed"} (include/tfm/model_config.h); null or absent: off.
ConfigKey sparse_attention_key() {
  return {"sparse_attention",
          [](ModelConfig& c, const json& v, const std::string& w) {
            SparseAttentionConfig s;
            if (v.is_null()) {
              c.sparse_attention = s;
              return;
            }
            TFM_CHECK(v.is_object(), w, "key 'sparse_attention' must be an object {\"window\": w, ...}, got ", v.dump());
            for (auto it = v.begin(); it != v.end(); ++it) {
              const std::string k = "sparse_attention." + it.key();
              const json& x = it.value();
              if (it.key() == "window") s.window = read_int(x, k, w, 1);
              else if (it.key() == "global_first") s.global_first = read_int(x, k, w, 0);
              else if (it.key() == "random_blocks") s.random_blocks = read_int(x, k, w, 0);
              else if (it.key() == "block_size") s.block_size = read_int(x, k, w, 1);
              else if (it.key() == "seed") s.seed = static_cast<std::uint64_t>(read_int(x, k, w, 0));
              else if (it.key() == "global_tokens") {
                TFM_CHECK(x.is_array(), w, "key '", k, "' must be an array of positions, got ", x.dump());
                for (const auto& e : x) s.global_tokens.push_back(read_int(e, k, w, 0));
              } else {
                fail(w, "key '", k, "' is unknown (allowed: window, global_tokens, global_first, random_blocks, "
                     "block_size, seed)");
              }
            }
            TFM_CHECK(s.window >= 1, w, "key 'sparse_attention.window' is required (>= 1)");
            c.sparse_attention = s;
          },
          [](const ModelConfig& c) {
            const SparseAttentionConfig& s = c.sparse_attention;
            if (!s.enabled()) return json(nullptr);  // not written
            return json{{"window", s.window}, {"global_tokens", s.global_tokens}, {"global_first", s.global_first},
                        {"random_blocks", s.random_blocks}, {"block_size", s.block_size}, {"seed", s.seed}};
          }};
}

// Keys every family accepts: the engine's extensions for heads and context.
std::vector<ConfigKey> common_keys() {
  return {enum_key("head", &ModelConfig::head), int_key("num_labels", &ModelConfig::num_labels, 1),
          enum_key("pooling", &ModelConfig::pooling),
          {"sliding_window", [](ModelConfig& c, const json& v, const std::string& w) {  // null: off (Mistral)
             c.sliding_window = v.is_null() ? 0 : read_int(v, "sliding_window", w, 0);
           }, [](const ModelConfig& c) { return json(c.sliding_window); }},
          double_key("stochastic_depth", &ModelConfig::stochastic_depth, 0, 0.999), id2label_key(),
          sparse_attention_key()};
}

// One dropout rate for residual branches and embeddings (BERT's hidden_dropout_prob, T5's
// dropout_rate).
ConfigKey shared_dropout_key(std::string name) {
  return {name, [name](ModelConfig& c, const json& v, const std::string& w) {
            c.dropout = c.embedding_dropout = read_double(v, name, w, 0, 0.999);
          }, [](const ModelConfig& c) { return json(c.dropout); }};
}

ConfigSchema transformer_schema() {
  ConfigSchema s{"transformer", {}, {}, ModelConfig{}, {}};
  s.keys = {enum_key("architecture", &ModelConfig::architecture),
            int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("n_heads", &ModelConfig::n_heads, 1), int_key("n_kv_heads", &ModelConfig::n_kv_heads, 0),
            int_key("head_dim", &ModelConfig::head_dim, 0), int_key("n_layers", &ModelConfig::n_layers, 1),
            int_key("n_decoder_layers", &ModelConfig::n_decoder_layers, 0), int_key("d_ff", &ModelConfig::d_ff, 1),
            int_key("max_positions", &ModelConfig::max_positions, 1),
            int_key("type_vocab_size", &ModelConfig::type_vocab_size, 0), enum_key("norm", &ModelConfig::norm),
            enum_key("norm_placement", &ModelConfig::norm_placement),
            double_key("norm_eps", &ModelConfig::norm_eps, 0, 1), bool_key("final_norm", &ModelConfig::final_norm),
            bool_key("embedding_norm", &ModelConfig::embedding_norm),
            enum_key("activation", &ModelConfig::activation), bool_key("bias", &ModelConfig::bias),
            bool_key("qkv_bias", &ModelConfig::qkv_bias),
            enum_key("sinusoid_pairing", &ModelConfig::sinusoid_pairing),
            bool_key("logits_bias", &ModelConfig::logits_bias),
            enum_key("position", &ModelConfig::position), bool_key("scale_embeddings", &ModelConfig::scale_embeddings),
            double_key("rope_base", &ModelConfig::rope_base, 1, 1e12),
            enum_key("rope_pairing", &ModelConfig::rope_pairing),
            int_key("relative_buckets", &ModelConfig::relative_buckets, 1),
            int_key("relative_max_distance", &ModelConfig::relative_max_distance, 1),
            bool_key("scale_attention_scores", &ModelConfig::scale_attention_scores),
            double_key("dropout", &ModelConfig::dropout, 0, 0.999),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("embedding_dropout", &ModelConfig::embedding_dropout, 0, 0.999),
            bool_key("tie_embeddings", &ModelConfig::tie_embeddings),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), int_key("bos_token_id", &ModelConfig::bos_token_id, -1),
            int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1),
            double_key("init_std", &ModelConfig::init_std, 0, 10)};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

ConfigSchema gpt2_schema() {
  ModelConfig b;
  b.model_type = "gpt2";
  b.architecture = Architecture::decoder_only;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::pre;
  b.position = PositionKind::learned;
  // GPT2Config's defaults (GPT-2 small); keys a config.json leaves out keep them.
  b.vocab_size = 50257; b.d_model = 768; b.n_layers = 12; b.n_heads = 12; b.max_positions = 1024;
  b.d_ff = 0;  // n_inner null: 4 * n_embd (resolved after parsing)
  b.activation = FfnActivation::gelu_tanh;  // "gelu_new"
  b.bos_token_id = b.eos_token_id = 50256;
  b.pad_token_id = -1;
  ConfigSchema s{"gpt2", {}, {}, b, {}};
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("n_embd", &ModelConfig::d_model, 1),
            int_key("n_layer", &ModelConfig::n_layers, 1), int_key("n_head", &ModelConfig::n_heads, 1),
            int_key("n_positions", &ModelConfig::max_positions, 1),
            {"n_inner", [](ModelConfig& c, const json& v, const std::string& w) {
               c.d_ff = v.is_null() ? 0 : read_int(v, "n_inner", w, 1);
             }, [](const ModelConfig& c) { return json(c.d_ff); }},
            double_key("layer_norm_epsilon", &ModelConfig::norm_eps, 0, 1),
            mapped_key<FfnActivation>("activation_function", &ModelConfig::activation,
                                      {{"gelu_new", FfnActivation::gelu_tanh}, {"gelu_pytorch_tanh", FfnActivation::gelu_tanh},
                                       {"gelu", FfnActivation::gelu}, {"relu", FfnActivation::relu}, {"silu", FfnActivation::silu}}),
            double_key("resid_pdrop", &ModelConfig::dropout, 0, 0.999),
            double_key("attn_pdrop", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("embd_pdrop", &ModelConfig::embedding_dropout, 0, 0.999),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            int_key("bos_token_id", &ModelConfig::bos_token_id, -1), int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            architectures_key({{"GPT2LMHeadModel", HeadKind::lm}, {"GPT2Model", HeadKind::none}}),
            fixed_key("scale_attn_weights", true), fixed_key("scale_attn_by_inverse_layer_idx", false)};
  s.ignored = {"n_ctx", "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
               "summary_use_proj", "task_specific_params", "torch_dtype", "transformers_version", "use_cache",
               "reorder_and_upcast_attn", "_name_or_path", "pad_token_id", "label2id", "_attn_implementation"};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

// LlamaForCausalLM and the families sharing its layout: mistral (sliding window), qwen2
// (q/k/v biases; its sliding window is off unless use_sliding_window, which is refused).
ConfigSchema llama_schema(const std::string& type) {
  ModelConfig b;
  b.model_type = type;
  b.architecture = Architecture::decoder_only;
  b.norm = NormKind::rms_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-6;
  b.position = PositionKind::rope;
  b.rope_pairing = RopePairing::halves;
  b.activation = FfnActivation::swiglu;
  b.bias = false;
  b.tie_embeddings = false;
  b.dropout = b.attention_dropout = b.embedding_dropout = 0.0;
  // LlamaConfig's defaults.
  b.vocab_size = 32000; b.d_model = 4096; b.d_ff = 11008; b.n_layers = 32; b.n_heads = 32;
  b.max_positions = 2048; b.bos_token_id = 1; b.eos_token_id = 2; b.pad_token_id = -1;
  std::string cls = "LlamaForCausalLM", base = "LlamaModel";
  if (type == "mistral") {  // MistralConfig's defaults (Mistral-7B-v0.1)
    b.d_ff = 14336; b.n_kv_heads = 8; b.max_positions = 4096 * 32; b.norm_eps = 1e-6; b.sliding_window = 4096;
    cls = "MistralForCausalLM", base = "MistralModel";
  }
  if (type == "qwen2") {  // Qwen2Config's defaults
    b.vocab_size = 151936; b.d_ff = 22016; b.n_kv_heads = 32; b.max_positions = 32768; b.qkv_bias = true;
    b.bos_token_id = b.eos_token_id = -1;
    cls = "Qwen2ForCausalLM", base = "Qwen2Model";
  }
  ConfigSchema s{type, {}, {}, b, {}};
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("hidden_size", &ModelConfig::d_model, 1),
            int_key("intermediate_size", &ModelConfig::d_ff, 1),
            int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
            int_key("num_attention_heads", &ModelConfig::n_heads, 1),
            {"num_key_value_heads", [](ModelConfig& c, const json& v, const std::string& w) {
               c.n_kv_heads = v.is_null() ? 0 : read_int(v, "num_key_value_heads", w, 0);
             }, [](const ModelConfig& c) { return json(c.n_kv_heads); }},
            {"head_dim", [](ModelConfig& c, const json& v, const std::string& w) {
               c.head_dim = v.is_null() ? 0 : read_int(v, "head_dim", w, 0);
             }, [](const ModelConfig& c) { return json(c.head_dim); }},
            int_key("max_position_embeddings", &ModelConfig::max_positions, 1),
            double_key("rms_norm_eps", &ModelConfig::norm_eps, 0, 1),
            double_key("rope_theta", &ModelConfig::rope_base, 1, 1e12),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            mapped_key<FfnActivation>("hidden_act", &ModelConfig::activation,
                                      {{"silu", FfnActivation::swiglu}, {"gelu", FfnActivation::geglu}, {"relu", FfnActivation::reglu}}),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            {"bos_token_id", [](ModelConfig& c, const json& v, const std::string& w) {
               c.bos_token_id = v.is_null() ? -1 : read_int(v, "bos_token_id", w, -1);
             }, [](const ModelConfig& c) { return json(c.bos_token_id); }},
            eos_key(),
            {"pad_token_id", [](ModelConfig& c, const json& v, const std::string& w) {
               c.pad_token_id = v.is_null() ? -1 : read_int(v, "pad_token_id", w, -1);
             }, [](const ModelConfig& c) { return json(c.pad_token_id); }},
            architectures_key({{cls, HeadKind::lm}, {base, HeadKind::none}}),
            fixed_key("mlp_bias", false)};
  if (type == "qwen2") {
    s.keys.push_back(fixed_key("use_sliding_window", false));
    // Qwen2 windows only layers >= max_window_layers, and only with use_sliding_window: both
    // keys are inert here (listed before the common sliding_window key, which they shadow).
    for (const char* k : {"sliding_window", "max_window_layers"})
      s.keys.push_back({k, [](ModelConfig&, const json&, const std::string&) {}, nullptr});
  } else {
    s.keys.push_back(bool_key("attention_bias", &ModelConfig::bias));
  }
  for (const char* k : {"torch_dtype", "transformers_version", "use_cache", "pretraining_tp", "_name_or_path",
                        "label2id", "_attn_implementation", "task_specific_params"})
    s.ignored.push_back(k);
  s.keys.push_back({"rope_scaling", [](ModelConfig&, const json& v, const std::string& w) {
                      TFM_CHECK(v.is_null(), w, "key 'rope_scaling': only null (no scaling) is supported, got ", v.dump());
                    }, nullptr});
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

ConfigSchema bert_schema() {
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
  ConfigSchema s{"bert", {}, {}, b, {}};
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("hidden_size", &ModelConfig::d_model, 1),
            int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
            int_key("num_attention_heads", &ModelConfig::n_heads, 1),
            int_key("intermediate_size", &ModelConfig::d_ff, 1),
            mapped_key<FfnActivation>("hidden_act", &ModelConfig::activation,
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
            {"position_embedding_type", [](ModelConfig&, const json& v, const std::string& w) {
               TFM_CHECK(v == "absolute", w, "key 'position_embedding_type': only \"absolute\" is supported, got ", v.dump());
             }, nullptr}};
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

ConfigSchema t5_schema() {
  ModelConfig b;
  b.model_type = "t5";
  b.architecture = Architecture::encoder_decoder;
  b.norm = NormKind::rms_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-6;
  b.position = PositionKind::t5_relative;
  b.activation = FfnActivation::relu;
  b.bias = false;
  b.scale_attention_scores = false;
  b.pad_token_id = 0;
  b.eos_token_id = 1;
  b.bos_token_id = -1;
  b.decoder_start_token_id = 0;
  b.init_std = 1.0;  // T5's initializer_factor
  // T5Config's defaults (t5-small).
  b.vocab_size = 32128; b.d_model = 512; b.head_dim = 64; b.d_ff = 2048; b.n_layers = 6; b.n_heads = 8;
  b.max_positions = 512;
  ConfigSchema s{"t5", {}, {}, b, {}};
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("d_kv", &ModelConfig::head_dim, 1), int_key("d_ff", &ModelConfig::d_ff, 1),
            int_key("num_layers", &ModelConfig::n_layers, 1),
            int_key("num_decoder_layers", &ModelConfig::n_decoder_layers, 0),
            int_key("num_heads", &ModelConfig::n_heads, 1),
            int_key("relative_attention_num_buckets", &ModelConfig::relative_buckets, 1),
            int_key("relative_attention_max_distance", &ModelConfig::relative_max_distance, 1),
            shared_dropout_key("dropout_rate"),
            double_key("layer_norm_epsilon", &ModelConfig::norm_eps, 0, 1),
            double_key("initializer_factor", &ModelConfig::init_std, 0, 10),
            mapped_key<FfnActivation>("feed_forward_proj", &ModelConfig::activation,
                                      {{"relu", FfnActivation::relu}, {"gated-gelu", FfnActivation::geglu},
                                       {"gated-relu", FfnActivation::reglu}, {"gated-silu", FfnActivation::swiglu}}),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1)};
  s.keys.push_back(architectures_key({{"T5ForConditionalGeneration", HeadKind::lm}}));
  s.ignored = {"n_positions", "output_past", "task_specific_params", "transformers_version", "torch_dtype",
               "use_cache", "is_encoder_decoder", "is_gated_act", "dense_act_fn", "_name_or_path",
               "classifier_dropout", "_attn_implementation"};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

// MarianMTModel (the OPUS-MT translators): BART's post-norm encoder-decoder with static
// sinusoidal positions in Marian's layout (sin | cos halves), scaled embeddings shared by
// both stacks and the tied head, and final_logits_bias.
ConfigSchema marian_schema() {
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
  ConfigSchema s{"marian", {}, {}, b, {}};
  const auto inert = [](const char* name) {  // shadows a common key (first wins): carries nothing here
    return ConfigKey{name, [](ModelConfig&, const json&, const std::string&) {}, nullptr};
  };
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("encoder_layers", &ModelConfig::n_layers, 1), int_key("decoder_layers", &ModelConfig::n_decoder_layers, 1),
            int_key("encoder_attention_heads", &ModelConfig::n_heads, 1), int_key("encoder_ffn_dim", &ModelConfig::d_ff, 1),
            int_key("max_position_embeddings", &ModelConfig::max_positions, 1),
            mapped_key<FfnActivation>("activation_function", &ModelConfig::activation,
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
            inert("id2label"), inert("num_labels"),
            // Checked against the encoder's in finish (one size serves both stacks here).
            inert("decoder_attention_heads"), inert("decoder_ffn_dim"), inert("decoder_vocab_size")};
  s.ignored = {"_name_or_path", "activation_dropout", "bad_words_ids", "classif_dropout", "classifier_dropout",
               "decoder_layerdrop", "encoder_layerdrop", "extra_pos_embeddings", "forced_eos_token_id", "label2id",
               "max_length", "num_beams", "num_hidden_layers", "transformers_version", "use_cache", "torch_dtype",
               "gradient_checkpointing", "is_encoder_decoder", "_attn_implementation", "output_past"};
  s.finish = [](ModelConfig& c, const json& j, const std::string& w) {
    const auto same = [&](const char* key, std::int64_t want, const char* as) {
      if (!j.contains(key)) return;
      TFM_CHECK(j[key].is_number_integer() && j[key].get<std::int64_t>() == want, w, "key '", key, "': ", j[key].dump(),
                " differs from ", as, " ", want, " (only equal sizes are supported)");
    };
    same("decoder_attention_heads", c.n_heads, "encoder_attention_heads");
    same("decoder_ffn_dim", c.d_ff, "encoder_ffn_dim");
    same("decoder_vocab_size", c.vocab_size, "vocab_size");
  };
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

}  // namespace

const ConfigSchema& config_schema(const std::string& model_type, const std::string& where) {
  static const std::map<std::string, ConfigSchema> schemas = {
      {"transformer", transformer_schema()}, {"gpt2", gpt2_schema()}, {"llama", llama_schema("llama")},
      {"mistral", llama_schema("mistral")}, {"qwen2", llama_schema("qwen2")},
      {"bert", bert_schema()}, {"t5", t5_schema()}, {"marian", marian_schema()}};
  auto it = schemas.find(model_type);
  TFM_CHECK(it != schemas.end(), where, "key 'model_type': unknown value '", model_type,
            "' (allowed: transformer, gpt2, llama, mistral, qwen2, bert, t5, marian)");
  return it->second;
}

}  // namespace tfm
