// sentence-transformers' modules.json pipeline: reading its folders and pooling as its
// Pooling, Dense and Normalize modules compute (sentence_transformers/models/*.py).
#include "tfm/sentence_embed.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::int64_t SentencePooling::modes() const {
  return int(cls) + int(max) + int(mean) + int(mean_sqrt_len) + int(weighted_mean) + int(last_token);
}

std::int64_t SentencePipeline::dimension() const {
  return dense.empty() ? pooling.modes() * pooling.word_dimension : dense.back().weight.size(0);
}

namespace {

Json read_json(const std::string& path) {
  try {
    return Json::parse(read_file(path));
  } catch (const Json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
}

template <class T>
T get(const Json& j, const char* key, const std::string& where, T fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const Json::exception&) {
    fail(where, "'", key, "' has the wrong type: ", j[key].dump());
  }
}

SentencePooling read_pooling(const std::string& path) {
  const Json j = read_json(path);
  TFM_CHECK(j.is_object(), path, "expected a JSON object");
  static const std::vector<std::string> known = {
      "word_embedding_dimension", "pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens",
      "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken",
      "include_prompt"};
  for (const auto& [k, v] : j.items())
    TFM_CHECK(std::find(known.begin(), known.end(), k) != known.end(), path, "unknown key '", k, "'");
  SentencePooling p;
  p.word_dimension = get<std::int64_t>(j, "word_embedding_dimension", path, 0);
  p.cls = get<bool>(j, "pooling_mode_cls_token", path, false);
  p.mean = get<bool>(j, "pooling_mode_mean_tokens", path, false);
  p.max = get<bool>(j, "pooling_mode_max_tokens", path, false);
  p.mean_sqrt_len = get<bool>(j, "pooling_mode_mean_sqrt_len_tokens", path, false);
  p.weighted_mean = get<bool>(j, "pooling_mode_weightedmean_tokens", path, false);
  p.last_token = get<bool>(j, "pooling_mode_lasttoken", path, false);
  p.include_prompt = get<bool>(j, "include_prompt", path, true);
  TFM_CHECK(p.modes() > 0, path, "no pooling mode is on");
  return p;
}

SentenceDense::Activation activation_named(const std::string& name, const std::string& where) {
  const std::string last = name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
  if (last == "Identity") return SentenceDense::Activation::identity;
  if (last == "Tanh") return SentenceDense::Activation::tanh;
  if (last == "ReLU") return SentenceDense::Activation::relu;
  if (last == "GELU") return SentenceDense::Activation::gelu;
  if (last == "Sigmoid") return SentenceDense::Activation::sigmoid;
  fail(where, "activation_function '", name, "' is not supported (Identity, Tanh, ReLU, GELU, Sigmoid)");
}

SentenceDense read_dense(const std::string& dir, std::int64_t in_expected) {
  const std::string cfg_path = (fs::path(dir) / "config.json").string();
  const Json j = read_json(cfg_path);
  const auto in = get<std::int64_t>(j, "in_features", cfg_path, 0), out = get<std::int64_t>(j, "out_features", cfg_path, 0);
  TFM_CHECK(in > 0 && out > 0, cfg_path, "in_features and out_features must be positive");
  TFM_CHECK(in == in_expected, cfg_path, "in_features ", in, " but the stage before gives ", in_expected);
  SentenceDense d;
  d.activation = activation_named(get<std::string>(j, "activation_function", cfg_path, "torch.nn.modules.linear.Identity"),
                                  cfg_path);
  const std::string w_path = (fs::path(dir) / "model.safetensors").string();
  TFM_CHECK(fs::exists(w_path), dir, fs::exists(fs::path(dir) / "pytorch_model.bin")
                                         ? "holds pytorch_model.bin (a pickle, which is not read): convert it to model.safetensors"
                                         : "has no model.safetensors");
  SafetensorsFile f = load_safetensors(w_path);
  auto take = [&](const char* name) -> Tensor {
    const auto it = f.tensors.find(name);
    return it == f.tensors.end() ? Tensor() : it->second.clone_as_f32();
  };
  d.weight = take("linear.weight");
  TFM_CHECK(d.weight.defined() && d.weight.dim() == 2 && d.weight.size(0) == out && d.weight.size(1) == in, w_path,
            "linear.weight must be (", out, ", ", in, ")");
  d.bias = take("linear.bias");
  if (get<bool>(j, "bias", cfg_path, true))
    TFM_CHECK(d.bias.defined() && d.bias.dim() == 1 && d.bias.size(0) == out, w_path, "linear.bias must be (", out, ")");
  return d;
}

float activate(SentenceDense::Activation a, double x) {
  switch (a) {
    case SentenceDense::Activation::identity: return static_cast<float>(x);
    case SentenceDense::Activation::tanh: return static_cast<float>(std::tanh(x));
    case SentenceDense::Activation::relu: return static_cast<float>(std::max(0.0, x));
    case SentenceDense::Activation::gelu: return static_cast<float>(0.5 * x * (1 + std::erf(x / std::sqrt(2.0))));
    case SentenceDense::Activation::sigmoid: return static_cast<float>(1 / (1 + std::exp(-x)));
  }
  return static_cast<float>(x);
}

void normalize_l2(std::vector<float>& v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  const double d = std::max(std::sqrt(n), 1e-12);  // F.normalize's eps
  for (float& x : v) x = static_cast<float>(x / d);
}

}  // namespace

std::optional<SentencePipeline> SentencePipeline::load(const std::string& dir, std::int64_t hidden_size) {
  const std::string modules_path = (fs::path(dir) / "modules.json").string();
  if (!fs::exists(modules_path)) return std::nullopt;
  const Json modules = read_json(modules_path);
  TFM_CHECK(modules.is_array() && !modules.empty(), modules_path, "expected a list of modules");
  SentencePipeline p;
  bool transformer = false, pooled = false;
  std::int64_t width = hidden_size;
  for (std::size_t i = 0; i < modules.size(); ++i) {
    const Json& m = modules[i];
    const std::string where = modules_path + " module " + std::to_string(i);
    TFM_CHECK(m.is_object(), where, "expected an object");
    const std::string type = get<std::string>(m, "type", where, "");
    const std::string path = get<std::string>(m, "path", where, "");
    const std::string sub = (fs::path(dir) / path).string();
    const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
    if (kind == "Transformer") {
      TFM_CHECK(i == 0 && path.empty(), where, "the Transformer must be the first module, at path \"\"");
      transformer = true;
      const std::string cfg = (fs::path(dir) / "sentence_bert_config.json").string();
      if (fs::exists(cfg)) {
        const Json j = read_json(cfg);
        p.max_seq_length = get<std::int64_t>(j, "max_seq_length", cfg, 0);
        p.do_lower_case = get<bool>(j, "do_lower_case", cfg, false);
        TFM_CHECK(p.max_seq_length >= 0, cfg, "max_seq_length must not be negative");
      }
    } else if (kind == "Pooling") {
      TFM_CHECK(transformer && !pooled, where, "Pooling must follow the Transformer, once");
      p.pooling = read_pooling((fs::path(sub) / "config.json").string());
      TFM_CHECK(p.pooling.word_dimension == hidden_size, (fs::path(sub) / "config.json").string(),
                "word_embedding_dimension ", p.pooling.word_dimension, " differs from the model's hidden size ",
                hidden_size);
      width = p.pooling.modes() * hidden_size;
      pooled = true;
    } else if (kind == "Dense") {
      TFM_CHECK(pooled && !p.normalize, where, "Dense must come after Pooling and before Normalize");
      p.dense.push_back(read_dense(sub, width));
      width = p.dense.back().weight.size(0);
    } else if (kind == "Normalize") {
      TFM_CHECK(pooled, where, "Normalize must come after Pooling");
      p.normalize = true;
    } else {
      fail(where, "module type '", type, "' is not supported (Transformer, Pooling, Dense, Normalize)");
    }
  }
  TFM_CHECK(transformer && pooled, modules_path, "needs a Transformer and a Pooling module");
  const std::string st = (fs::path(dir) / "config_sentence_transformers.json").string();
  if (fs::exists(st)) {
    const Json j = read_json(st);
    if (j.contains("prompts") && j["prompts"].is_object())
      for (const auto& [k, v] : j["prompts"].items()) {
        TFM_CHECK(v.is_string(), st, "prompts.", k, " must be a string");
        p.prompts[k] = v.get<std::string>();
      }
    p.default_prompt_name = get<std::string>(j, "default_prompt_name", st, "");
    p.similarity = get<std::string>(j, "similarity_fn_name", st, "cosine");
    TFM_CHECK(p.default_prompt_name.empty() || p.prompts.count(p.default_prompt_name), st, "default_prompt_name '",
              p.default_prompt_name, "' is not among the prompts");
  }
  return p;
}

std::vector<std::vector<float>> SentencePipeline::apply(const std::vector<float>& hidden, std::int64_t T,
                                                        std::int64_t C, const std::vector<std::int64_t>& lens,
                                                        const std::vector<std::int64_t>& skip) const {
  std::vector<std::vector<float>> out;
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const float* h = hidden.data() + static_cast<std::int64_t>(b) * T * C;
    const std::int64_t n = lens[b];
    // The tokens the mask keeps: Pooling zeroes the prompt's part of the attention mask.
    const std::int64_t from = pooling.include_prompt ? 0 : std::min(skip.empty() ? 0 : skip[b], n);
    const auto count = static_cast<double>(n - from);
    std::vector<float> v;
    auto push_scaled = [&](const std::vector<double>& acc, double div) {
      for (double x : acc) v.push_back(static_cast<float>(x / div));
    };
    auto weighted_sum = [&](auto weight) {
      std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
      for (std::int64_t t = from; t < n; ++t)
        for (std::int64_t k = 0; k < C; ++k) acc[static_cast<std::size_t>(k)] += weight(t) * h[t * C + k];
      return acc;
    };
    if (pooling.cls) v.insert(v.end(), h, h + C);
    if (pooling.max) {
      for (std::int64_t k = 0; k < C; ++k) {
        // Masked positions hold -1e9 in sentence-transformers: an all-masked row pools to it.
        float m = from < n ? -std::numeric_limits<float>::infinity() : -1e9f;
        for (std::int64_t t = from; t < n; ++t) m = std::max(m, h[t * C + k]);
        v.push_back(m);
      }
    }
    if (pooling.mean || pooling.mean_sqrt_len) {
      const std::vector<double> sum = weighted_sum([](std::int64_t) { return 1.0; });
      const double denom = std::max(count, 1e-9);
      if (pooling.mean) push_scaled(sum, denom);
      if (pooling.mean_sqrt_len) push_scaled(sum, std::sqrt(denom));
    }
    if (pooling.weighted_mean) {
      // Weights 1..T by position over the whole padded row, the masked ones dropped.
      const std::vector<double> sum = weighted_sum([](std::int64_t t) { return static_cast<double>(t + 1); });
      double w = 0;
      for (std::int64_t t = from; t < n; ++t) w += static_cast<double>(t + 1);
      push_scaled(sum, std::max(w, 1e-9));
    }
    if (pooling.last_token) {
      const std::int64_t t = std::max<std::int64_t>(n - 1, 0);
      v.insert(v.end(), h + t * C, h + (t + 1) * C);
    }
    for (const SentenceDense& d : dense) {
      const std::int64_t O = d.weight.size(0), I = d.weight.size(1);
      const float* w = d.weight.data<float>();
      const float* bias = d.bias.defined() ? d.bias.data<float>() : nullptr;
      std::vector<float> y(static_cast<std::size_t>(O));
      for (std::int64_t o = 0; o < O; ++o) {
        double s = bias ? bias[o] : 0.0;
        for (std::int64_t i = 0; i < I; ++i) s += static_cast<double>(w[o * I + i]) * v[static_cast<std::size_t>(i)];
        y[static_cast<std::size_t>(o)] = activate(d.activation, s);
      }
      v = std::move(y);
    }
    if (normalize) normalize_l2(v);
    out.push_back(std::move(v));
  }
  return out;
}

void normalize_embeddings(std::vector<std::vector<float>>& vecs) {
  for (auto& v : vecs) normalize_l2(v);
}

void truncate_embeddings(std::vector<std::vector<float>>& vecs, std::int64_t dimensions, bool renormalize) {
  if (dimensions <= 0) return;
  for (auto& v : vecs) {
    TFM_CHECK(dimensions <= static_cast<std::int64_t>(v.size()), "dimensions",
              dimensions, " is more than the model's ", v.size(), " dimensions");
    v.resize(static_cast<std::size_t>(dimensions));
    if (renormalize) normalize_l2(v);
  }
}

}  // namespace tfm
