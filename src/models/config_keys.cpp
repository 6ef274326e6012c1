// The kinds of config.json key that the families' schemas are built from.
#include "models/config_keys.h"

#include "tfm/error.h"

namespace tfm {

using json = nlohmann::json;

namespace {

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

}  // namespace

// "retrieval": RETRO's block (include/tfm/model_config.h); null or absent: off.
ConfigKey retrieval_key() {
  return {"retrieval",
          [](ModelConfig& c, const json& v, const std::string& w) {
            RetrievalConfig r;
            if (v.is_null()) {
              c.retrieval = r;
              return;
            }
            TFM_CHECK(v.is_object(), w, "key 'retrieval' must be an object {\"chunk_size\": m, ...}, got ", v.dump());
            for (auto it = v.begin(); it != v.end(); ++it) {
              const std::string k = "retrieval." + it.key();
              const json& x = it.value();
              if (it.key() == "chunk_size") r.chunk_size = read_int(x, k, w, 1);
              else if (it.key() == "neighbours") r.neighbours = read_int(x, k, w, 1);
              else if (it.key() == "neighbour_length") r.neighbour_length = read_int(x, k, w, 1);
              else if (it.key() == "encoder_layers") r.encoder_layers = read_int(x, k, w, 1);
              else if (it.key() == "embedding_dim") r.embedding_dim = read_int(x, k, w, 8);
              else if (it.key() == "max_ngram") r.max_ngram = read_int(x, k, w, 1);
              else if (it.key() == "layers") {
                TFM_CHECK(x.is_array() && !x.empty(), w, "key '", k, "' must be a non-empty array of decoder layers, got ", x.dump());
                for (const auto& e : x) r.layers.push_back(read_int(e, k, w, 0));
              } else {
                fail(w, "key '", k, "' is unknown (allowed: chunk_size, neighbours, neighbour_length, layers, "
                     "encoder_layers, embedding_dim, max_ngram)");
              }
            }
            TFM_CHECK(r.chunk_size >= 1, w, "key 'retrieval.chunk_size' is required (>= 1)");
            TFM_CHECK(!r.layers.empty(), w, "key 'retrieval.layers' is required (the decoder layers that read neighbours)");
            c.retrieval = r;
          },
          [](const ModelConfig& c) {
            const RetrievalConfig& r = c.retrieval;
            if (!r.enabled()) return json(nullptr);  // not written
            return json{{"chunk_size", r.chunk_size}, {"neighbours", r.neighbours}, {"neighbour_length", r.length()},
                        {"layers", r.layers}, {"encoder_layers", r.encoder_layers}, {"embedding_dim", r.embedding_dim},
                        {"max_ngram", r.max_ngram}};
          }};
}

bool RetrievalConfig::has_layer(std::int64_t i) const {
  for (std::int64_t l : layers)
    if (l == i) return true;
  return false;
}

std::int64_t read_int(const json& v, const std::string& key, const std::string& where, std::int64_t min) {
  TFM_CHECK(v.is_number_integer(), where, "key '", key, "' must be an integer, got ", v.dump());
  const auto x = v.get<std::int64_t>();
  TFM_CHECK(x >= min, where, "key '", key, "' must be >= ", min, ", got ", x);
  return x;
}
std::string read_string(const json& v, const std::string& key, const std::string& where) {
  TFM_CHECK(v.is_string(), where, "key '", key, "' must be a string, got ", v.dump());
  return v.get<std::string>();
}

ConfigKey int_key(std::string name, std::int64_t ModelConfig::*f, std::int64_t min) {
  return {name, [f, name, min](ModelConfig& c, const json& v, const std::string& w) { c.*f = read_int(v, name, w, min); },
          [f](const ModelConfig& c) { return json(c.*f); }};
}
ConfigKey nullable_int_key(std::string name, std::int64_t ModelConfig::*f, std::int64_t null_value, std::int64_t min) {
  return {name,
          [f, name, null_value, min](ModelConfig& c, const json& v, const std::string& w) {
            c.*f = v.is_null() ? null_value : read_int(v, name, w, min);
          },
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
namespace {

template <class E>
ConfigKey mapped_enum_key(std::string name, E ModelConfig::*f, std::vector<std::pair<std::string, E>> table) {
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

}  // namespace

ConfigKey mapped_key(std::string name, FfnActivation ModelConfig::*f,
                     std::vector<std::pair<std::string, FfnActivation>> table) {
  return mapped_enum_key(std::move(name), f, std::move(table));
}
ConfigKey mapped_key(std::string name, PositionKind ModelConfig::*f,
                     std::vector<std::pair<std::string, PositionKind>> table) {
  return mapped_enum_key(std::move(name), f, std::move(table));
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

ConfigKey inert_key(std::string name) {
  return {std::move(name), [](ModelConfig&, const json&, const std::string&) {}, nullptr};
}

// An id, or (Llama 3 and later files) a list of ids: the first is the model's EOS; the
// generation settings keep them all (generation_config.json).
ConfigKey eos_key() {
  return {"eos_token_id", [](ModelConfig& c, const json& v, const std::string& w) {
            const json& first = v.is_array() && !v.empty() ? v[0] : v;
            c.eos_token_id = first.is_null() ? -1 : read_int(first, "eos_token_id", w, -1);
          }, [](const ModelConfig& c) { return json(c.eos_token_id); }};
}

// Keys every family accepts: the engine's extensions for heads and context.
std::vector<ConfigKey> common_keys() {
  return {enum_key("head", &ModelConfig::head), int_key("num_labels", &ModelConfig::num_labels, 1),
          enum_key("pooling", &ModelConfig::pooling),
          nullable_int_key("sliding_window", &ModelConfig::sliding_window, 0, 0),  // null: off (Mistral)
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


}  // namespace tfm
