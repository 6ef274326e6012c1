// tokenizer.json -> Pipeline: the model with its vocabulary, the added tokens, the
// components (pipeline_load.cpp), truncation and padding.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tfm/error.h"
#include "tokenize/components.h"
#include "tokenize/pipeline_json.h"

namespace tfm::tok {

using nlohmann::json;

namespace {

constexpr const char* kWhere = "tokenizer.json";

// The score HF holds for a number in the file. serde_json (as `tokenizers` builds it, without
// float_roundtrip) reads "d.ddd" as the digits' integer converted to f64, then divided by a
// power of ten: off by an ulp now and then. Unigram ties are decided at that precision
// (a Viterbi tie flips on it), so the same rounding is reproduced from the shortest decimal
// form of the correctly parsed value (the form serde/ryu and Python write).
double serde_json_f64(double v) {
  if (v == 0.0 || !std::isfinite(v)) return v;
  static const std::vector<double> pow10 = [] {
    std::vector<double> t;
    for (int k = 0; k <= 308; ++k) t.push_back(std::strtod(("1e" + std::to_string(k)).c_str(), nullptr));
    return t;
  }();
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  const std::string s(buf, r.ptr);
  const auto epos = s.find('e');
  std::uint64_t sig = 0;
  int frac = 0;
  bool after_point = false;
  for (std::size_t i = 0; i < epos; ++i) {
    if (s[i] == '.') {
      after_point = true;
      continue;
    }
    sig = sig * 10 + static_cast<std::uint64_t>(s[i] - '0');
    frac += after_point;
  }
  int exponent = std::stoi(s.substr(epos + 1)) - frac;
  double f = static_cast<double>(sig);
  for (;;) {
    const int a = exponent < 0 ? -exponent : exponent;
    if (a <= 308) {
      f = exponent >= 0 ? f * pow10[static_cast<std::size_t>(a)] : f / pow10[static_cast<std::size_t>(a)];
      break;
    }
    f /= 1e308;
    exponent += 308;
  }
  return v < 0 ? -f : f;
}

// vocab object token -> id as an id-indexed vector ("" for ids no token has).
std::vector<std::string> vocab_vector(const json& v) {
  TFM_CHECK(v.is_object(), kWhere, "model.vocab is not an object");
  // Ids are dense in real files; a few gaps are allowed, an id far past the token count is not
  // (a hostile {"a": 2000000000} would otherwise allocate gigabytes: found by fuzz_tokenizer_json).
  constexpr std::int64_t kMaxUnusedIds = 1 << 16;
  std::int64_t max_id = -1;
  for (const auto& [t, id] : v.items()) {
    TFM_CHECK(id.is_number_integer(), kWhere, "model.vocab: id of '", t, "' is not an integer");
    const auto i = id.get<std::int64_t>();
    TFM_CHECK(i >= 0 && i < (1ll << 31), kWhere, "model.vocab: token '", t, "' has invalid id ", i);
    TFM_CHECK(i < static_cast<std::int64_t>(v.size()) + kMaxUnusedIds, kWhere, "model.vocab: token '", t, "' has id ", i,
              ", more than ", kMaxUnusedIds, " past the ", v.size(), " tokens");
    max_id = std::max(max_id, i);
  }
  std::vector<std::string> out(static_cast<std::size_t>(max_id + 1));
  for (const auto& [t, id] : v.items()) {
    const auto i = id.get<std::int64_t>();
    TFM_CHECK(out[static_cast<std::size_t>(i)].empty(), kWhere, "model.vocab: duplicate id ", i, ": '",
              out[static_cast<std::size_t>(i)], "' and '", t, "'");
    out[static_cast<std::size_t>(i)] = t;
  }
  return out;
}

std::string model_type(const json& m) {
  if (m.contains("type") && m.at("type").is_string()) return m.at("type").get<std::string>();
  if (m.contains("merges")) return "BPE";
  if (m.contains("vocab") && m.at("vocab").is_array()) return "Unigram";
  if (m.contains("max_input_chars_per_word")) return "WordPiece";
  return "WordLevel";
}

std::unique_ptr<Model> model_from_json(const json& m) {
  TFM_CHECK(m.is_object(), kWhere, "\"model\" is not an object");
  const std::string t = model_type(m);
  auto opt_str = [&](const char* key) {
    return m.contains(key) && !m.at(key).is_null() ? m.at(key).get<std::string>() : std::string();
  };
  if (t == "BPE") {
    BpeOptions o;
    o.has_unk = m.contains("unk_token") && !m.at("unk_token").is_null();
    o.unk_token = opt_str("unk_token");
    o.continuing_subword_prefix = opt_str("continuing_subword_prefix");
    o.end_of_word_suffix = opt_str("end_of_word_suffix");
    o.fuse_unk = m.value("fuse_unk", false);
    o.byte_fallback = m.value("byte_fallback", false);
    o.ignore_merges = m.value("ignore_merges", false);
    if (m.contains("dropout") && !m.at("dropout").is_null())
      TFM_CHECK(m.at("dropout").get<double>() == 0.0, kWhere, "BPE dropout is not supported (encoding is deterministic)");
    std::vector<std::pair<std::string, std::string>> merges;
    const json& ms = m.at("merges");
    TFM_CHECK(ms.is_array(), kWhere, "model.merges is not an array");
    merges.reserve(ms.size());
    for (const auto& e : ms) {
      if (e.is_string()) {
        const auto s = e.get<std::string>();
        const auto sp = s.find(' ');
        TFM_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, kWhere, "merge '", s,
                  "' is not 'left right'");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        TFM_CHECK(e.is_array() && e.size() == 2, kWhere, "merge ", e.dump(), " is not a pair");
        merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
      }
    }
    return make_bpe(vocab_vector(m.at("vocab")), merges, o, kWhere);
  }
  if (t == "WordPiece")
    return make_wordpiece(vocab_vector(m.at("vocab")), m.value("unk_token", std::string("[UNK]")),
                          m.value("continuing_subword_prefix", std::string("##")),
                          m.value("max_input_chars_per_word", std::size_t{100}), kWhere);
  if (t == "WordLevel") return make_wordlevel(vocab_vector(m.at("vocab")), opt_str("unk_token"), kWhere);
  if (t == "Unigram") {
    const json& v = m.at("vocab");
    TFM_CHECK(v.is_array(), kWhere, "Unigram vocab is not an array of [piece, score]");
    std::vector<std::string> pieces;
    std::vector<double> scores;
    for (const auto& e : v) {
      TFM_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number(), kWhere, "Unigram vocab entry ",
                e.dump().substr(0, 100), " is not [piece, score]");
      pieces.push_back(e[0].get<std::string>());
      scores.push_back(serde_json_f64(e[1].get<double>()));
    }
    const std::int32_t unk = m.contains("unk_id") && !m.at("unk_id").is_null() ? static_cast<std::int32_t>(json_int(m.at("unk_id"), "Unigram unk_id", 0, INT32_MAX)) : -1;
    return make_unigram(std::move(pieces), std::move(scores), unk, m.value("byte_fallback", false), kWhere);
  }
  fail(kWhere, "unknown model type '", t, "' (supported: BPE, WordPiece, WordLevel, Unigram)");
}

}  // namespace

std::shared_ptr<const Pipeline> pipeline_from_document(const json& j) {
  TFM_CHECK(j.is_object(), kWhere, "top level is not an object");
  TFM_CHECK(j.contains("model"), kWhere, "no \"model\" section");
  auto pl = std::make_shared<Pipeline>();
  pl->model = model_from_json(j.at("model"));
  pl->normalizer = normalizer_from_json(j.value("normalizer", json()));
  pl->pre_tokenizer = pre_tokenizer_from_json(j.value("pre_tokenizer", json()));
  pl->decoder = decoder_from_json(j.value("decoder", json()));

  // id -> token over the model's vocabulary and the added tokens: no holes, no id twice.
  std::vector<AddedTokenSpec> added;
  pl->id_to_token = pl->model->vocab();
  if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
    // Ids must end up dense (holes are refused below): none can be past vocabulary + added
    // tokens, and checking that first keeps a hostile id from allocating gigabytes.
    const auto dense_end = static_cast<std::int64_t>(pl->id_to_token.size() + j.at("added_tokens").size());
    for (const auto& a : j.at("added_tokens")) {
      AddedTokenSpec s;
      s.content = a.at("content").get<std::string>();
      const auto id = json_int(a.at("id"), "added token id");
      TFM_CHECK(id >= 0 && id < (1ll << 31), kWhere, "added token '", s.content, "' has invalid id ", id);
      TFM_CHECK(id < dense_end, kWhere, "added token '", s.content, "' has id ", id, ", past the ", dense_end,
                " ids of the vocabulary and added tokens (ids must have no holes)");
      TFM_CHECK(!s.content.empty(), kWhere, "added token id ", id, " is empty");
      s.id = static_cast<std::int32_t>(id);
      s.single_word = a.value("single_word", false);
      s.lstrip = a.value("lstrip", false);
      s.rstrip = a.value("rstrip", false);
      s.special = a.value("special", false);
      s.normalized = a.value("normalized", !s.special);
      auto& slot = pl->id_to_token;
      if (static_cast<std::size_t>(id) >= slot.size()) slot.resize(static_cast<std::size_t>(id) + 1);
      TFM_CHECK(slot[static_cast<std::size_t>(id)].empty() || slot[static_cast<std::size_t>(id)] == s.content, kWhere,
                "duplicate id ", id, ": '", slot[static_cast<std::size_t>(id)], "' and added token '", s.content, "'");
      slot[static_cast<std::size_t>(id)] = s.content;
      added.push_back(std::move(s));
    }
  }
  for (std::size_t id = 0; id < pl->id_to_token.size(); ++id)
    TFM_CHECK(!pl->id_to_token[id].empty(), kWhere, "vocabulary hole: no token has id ", id, " (of ",
              pl->id_to_token.size(), ")");
  pl->special.assign(pl->id_to_token.size(), false);
  for (const auto& a : added) pl->special[static_cast<std::size_t>(a.id)] = a.special;
  pl->added.build(std::move(added), pl->normalizer.get());
  pl->post_processor = post_processor_from_json(j.value("post_processor", json()), pl->id_to_token);

  const json tr = j.value("truncation", json());
  if (!tr.is_null()) {
    TruncationParams t;
    t.max_length = static_cast<std::size_t>(json_int_or(tr, "max_length", 512, "truncation max_length", 0));
    t.stride = static_cast<std::size_t>(json_int_or(tr, "stride", 0, "truncation stride", 0));
    t.strategy = tr.value("strategy", std::string("LongestFirst"));
    t.strategy = t.strategy == "OnlyFirst" ? "only_first" : t.strategy == "OnlySecond" ? "only_second" : "longest_first";
    t.direction = tr.value("direction", std::string("Right")) == "Left" ? "left" : "right";
    pl->truncation = t;
  }
  const json pd = j.value("padding", json());
  if (!pd.is_null()) {
    PaddingParams p;
    const json& strat = pd.value("strategy", json("BatchLongest"));
    if (strat.is_object() && strat.contains("Fixed")) {
      p.fixed = true;
      p.length = static_cast<std::size_t>(json_int(strat.at("Fixed"), "padding Fixed length", 0));
    }
    p.direction = pd.value("direction", std::string("Right")) == "Left" ? "left" : "right";
    if (pd.contains("pad_to_multiple_of") && !pd.at("pad_to_multiple_of").is_null())
      p.multiple_of = static_cast<std::size_t>(json_int(pd.at("pad_to_multiple_of"), "pad_to_multiple_of", 0));
    p.pad_id = static_cast<std::int32_t>(json_int_or(pd, "pad_id", 0, "padding pad_id", 0, INT32_MAX));
    p.pad_type_id = static_cast<std::int32_t>(json_int_or(pd, "pad_type_id", 0, "padding pad_type_id", 0, 255));
    p.pad_token = pd.value("pad_token", std::string("[PAD]"));
    pl->padding = p;
  }
  return pl;
}

std::shared_ptr<const Pipeline> pipeline_from_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(kWhere, "not valid JSON: ", e.what());
  }
  try {
    return pipeline_from_document(j);
  } catch (const json::exception& e) {
    fail(kWhere, "unexpected structure: ", e.what());
  }
}

std::string decode_base64(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
  };
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=' || c == '\n' || c == '\r') continue;
    const int v = val(c);
    TFM_CHECK(v >= 0, kWhere, "precompiled_charsmap is not base64 (byte '", c, "')");
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return out;
}

}  // namespace tfm::tok
