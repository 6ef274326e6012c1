// tokenizer.json (Hugging Face `tokenizers` format).
//   bpe  : model BPE + ByteLevel pre-tokenizer/decoder (GPT-2 style); merges as "a b"
//          strings (written) or ["a", "b"] pairs (also read). With isolate_cjk the
//          pre-tokenizer is a Sequence: Split(CJK ideographs, Isolated), then ByteLevel.
//   word : model WordLevel + WhitespaceSplit pre-tokenizer (decode joins with spaces).
//   char : model WordLevel + Split on the regex "[\s\S]" (one piece per code point) + Fuse
//          decoder, which is how that format spells a character vocabulary.
// add_special's template is a TemplateProcessing post-processor.
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tokenize/bpe_build.h"
#include "tokenize/pipeline_json.h"
#include "tokenize/pretokenizer.h"

namespace tfm::tok {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

static constexpr const char* kCharPattern = "[\\s\\S]";  // one code point, newlines too (Oniguruma/HF syntax)
static constexpr const char* kOldCharPattern = "(?s).";    // what tfm wrote before; still read
static constexpr const char* kWhere = "tokenizer.json";

static std::string type_of(const json& j) {
  if (j.is_null()) return "";
  TFM_CHECK(j.is_object(), kWhere, "expected an object, got ", j.dump());
  return j.value("type", std::string());
}

// prefix/suffix ids from a TemplateProcessing "single" template.
static void read_template(const json& pp, Tokenizer::Impl& impl) {
  bool seen_a = false;
  impl.prefix.clear();
  impl.suffix.clear();
  for (const auto& item : pp.at("single")) {
    if (item.contains("Sequence")) {
      seen_a = true;
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    const json& st = pp.at("special_tokens").at(name);
    for (const auto& id : st.at("ids")) {
      const auto v = json_int(id, "template token '" + name + "' id");
      TFM_CHECK(v >= 0 && v < static_cast<std::int64_t>(impl.tokens.size()), kWhere, "template token '", name, "' id ",
                v, " out of range");
      (seen_a ? impl.suffix : impl.prefix).push_back(static_cast<std::int32_t>(v));
    }
  }
  impl.template_from_file = true;
}

static Tokenizer::Impl parse(const json& j) {
  TFM_CHECK(j.is_object(), kWhere, "top level is not an object");
  const json& model = j.at("model");
  TFM_CHECK(model.is_object(), kWhere, "\"model\" is not an object");
  std::string mtype = model.value("type", std::string());
  if (mtype.empty()) mtype = model.contains("merges") ? "BPE" : "WordLevel";

  std::vector<std::pair<std::string, std::int64_t>> entries;
  const json& vocab = model.at("vocab");
  TFM_CHECK(vocab.is_object(), kWhere, "model.vocab is not an object");
  for (const auto& [t, id] : vocab.items()) {
    TFM_CHECK(id.is_number_integer(), kWhere, "id of '", t, "' is not an integer");
    entries.emplace_back(t, id.get<std::int64_t>());
  }
  std::vector<AddedToken> added;
  if (j.contains("added_tokens") && !j.at("added_tokens").is_null()) {
    for (const auto& a : j.at("added_tokens")) {
      added.push_back({a.at("content").get<std::string>(), static_cast<std::int32_t>(json_int(a.at("id"), "added token id", 0, INT32_MAX)),
                       a.value("special", false)});
    }
  }
  Tokenizer::Impl impl;
  fill_vocab(impl, entries, added, kWhere);

  const std::string pre = type_of(j.value("pre_tokenizer", json()));
  if (mtype == "BPE") {
    const json* ptp = &j.at("pre_tokenizer");
    if (pre == "Sequence") {  // only [Split(CJK ideographs, Isolated), ByteLevel]
      const json& seq = ptp->at("pretokenizers");
      TFM_CHECK(seq.is_array() && seq.size() == 2 && type_of(seq[0]) == "Split", kWhere,
                "a BPE pre-tokenizer Sequence must be [Split(CJK ideographs), ByteLevel], got ", ptp->dump());
      const json& split = seq[0];
      TFM_CHECK(split.at("pattern").value("Regex", std::string()) == kCjkPattern &&
                    split.value("behavior", std::string()) == "Isolated" && !split.value("invert", false),
                kWhere, "Split pre-tokenizer ", split.dump(), " is not supported before ByteLevel (only ", kCjkPattern,
                ", Isolated)");
      impl.isolate_cjk = true;
      ptp = &seq[1];
    }
    TFM_CHECK(type_of(*ptp) == "ByteLevel", kWhere, "BPE needs the ByteLevel pre-tokenizer, got '", type_of(*ptp), "'");
    const json& pt = *ptp;
    TFM_CHECK(!pt.value("add_prefix_space", false), kWhere, "ByteLevel add_prefix_space=true is not supported");
    TFM_CHECK(pt.value("use_regex", true), kWhere, "ByteLevel use_regex=false is not supported");
    std::vector<std::pair<std::string, std::string>> merges;
    for (const auto& m : model.at("merges")) {
      if (m.is_string()) {
        const auto s = m.get<std::string>();
        const auto sp = s.find(' ');
        TFM_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, kWhere, "merge '", s,
                  "' is not 'left right'");
        merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      } else {
        TFM_CHECK(m.is_array() && m.size() == 2, kWhere, "merge ", m.dump(), " is not a pair");
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      }
    }
    build_bpe(impl, merges, kWhere);
  } else if (mtype == "WordLevel") {
    if (pre == "Split") {
      const json& pat = j.at("pre_tokenizer").at("pattern");
      TFM_CHECK(pat.value("Regex", std::string()) == kCharPattern || pat.value("Regex", std::string()) == kOldCharPattern, kWhere, "Split pre-tokenizer pattern ", pat.dump(),
                " is not supported (only the char-level ", kCharPattern, ")");
      impl.kind = TokenizerKind::char_level;
    } else {
      TFM_CHECK(pre == "WhitespaceSplit" || pre == "Whitespace", kWhere, "WordLevel pre-tokenizer '", pre,
                "' is not supported (WhitespaceSplit or char-level Split)");
      impl.kind = TokenizerKind::word_level;
    }
  } else {
    fail(kWhere, "model type '", mtype, "' is not supported (BPE, WordLevel)");
  }
  const json pp = j.value("post_processor", json());
  if (type_of(pp) == "TemplateProcessing") read_template(pp, impl);
  impl.finalize(kWhere);
  if (mtype == "WordLevel") {
    // null is what to_json writes for a vocabulary without one (found by fuzz/tokenizer_json).
    const json unk_json = model.value("unk_token", json());
    TFM_CHECK(unk_json.is_null() || unk_json.is_string(), kWhere, "model.unk_token must be a string or null, got ",
              unk_json.dump());
    const std::string unk = unk_json.is_string() ? unk_json.get<std::string>() : std::string();
    if (!unk.empty()) {
      auto it = impl.token_ids.find(unk);
      TFM_CHECK(it != impl.token_ids.end(), kWhere, "unk_token '", unk, "' is not in the vocabulary");
      impl.unk = it->second;
    }
  }
  return impl;
}

// True when the file is of a shape the hand-written paths above run exactly as HF does
// (the files this engine writes, GPT-2's): then they encode it, faster than the general
// pipeline. Anything else goes to the pipeline (pipeline_build.cpp).
bool has_legacy_shape(const json& j) {
  if (!j.is_object() || !j.contains("model") || !j.at("model").is_object()) return false;
  if (!j.value("normalizer", json()).is_null()) return false;
  if (!j.value("truncation", json()).is_null() || !j.value("padding", json()).is_null()) return false;
  int normalized = 0, raw = 0;
  for (const auto& a : j.value("added_tokens", json::array())) {
    if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) return false;
    (a.value("normalized", !a.value("special", false)) ? normalized : raw)++;
  }
  if (normalized && raw) return false;  // HF matches the two sets in two passes
  const json& m = j.at("model");
  const json pre = j.value("pre_tokenizer", json());
  const json post = j.value("post_processor", json());
  const json dec = j.value("decoder", json());
  auto is_null_or = [&](const json& o, const char* key, const json& v) {
    return !o.contains(key) || o.at(key).is_null() || o.at(key) == v;
  };
  const std::string pp = post.is_null() ? "" : post.value("type", "");
  if (!(pp.empty() || pp == "TemplateProcessing" || pp == "ByteLevel")) return false;
  const std::string mtype = m.value("type", m.contains("merges") ? "BPE" : "WordLevel");
  if (mtype == "BPE") {
    if (!is_null_or(m, "unk_token", json()) || !is_null_or(m, "continuing_subword_prefix", "") ||
        !is_null_or(m, "end_of_word_suffix", "") || m.value("byte_fallback", false) || m.value("ignore_merges", false) ||
        !is_null_or(m, "dropout", json()))
      return false;
    if (dec.is_null() || dec.value("type", "") != "ByteLevel") return false;
    const json* bl = &pre;
    if (pre.is_object() && pre.value("type", "") == "Sequence") {
      const json& seq = pre.at("pretokenizers");
      if (!seq.is_array() || seq.size() != 2 || seq[0].value("type", "") != "Split") return false;
      const json& sp = seq[0];
      if (!sp.contains("pattern") || sp.at("pattern").value("Regex", std::string()) != kCjkPattern ||
          sp.value("behavior", "") != "Isolated" || sp.value("invert", false))
        return false;
      bl = &seq[1];
    }
    return bl->is_object() && bl->value("type", "") == "ByteLevel" && !bl->value("add_prefix_space", true) &&
           bl->value("use_regex", true);
  }
  if (mtype != "WordLevel" || !pre.is_object()) return false;
  const std::string pt = pre.value("type", "");
  if (pt == "WhitespaceSplit") return dec.is_null();
  const std::string char_pattern = pre.contains("pattern") ? pre.at("pattern").value("Regex", std::string()) : "";
  return pt == "Split" && (char_pattern == kCharPattern || char_pattern == kOldCharPattern) &&
         pre.value("behavior", "") == "Isolated" && !pre.value("invert", false) && !dec.is_null() &&
         dec.value("type", "") == "Fuse";
}

Tokenizer::Impl impl_from_document(const json& j) {
  try {
    return parse(j);
  } catch (const json::exception& e) {
    fail(kWhere, "unexpected structure: ", e.what());
  }
}

Tokenizer::Impl impl_from_json(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(kWhere, "not valid JSON: ", e.what());
  }
  try {
    return parse(j);
  } catch (const json::exception& e) {
    fail(kWhere, "unexpected structure: ", e.what());
  }
}

static ojson template_json(const Tokenizer::Impl& impl) {
  ojson single = ojson::array(), pair = ojson::array(), specials = ojson::object();
  auto special = [&](std::int32_t id, int type_id) {
    const std::string& name = impl.tokens[id];
    specials[name] = ojson{{"id", name}, {"ids", {id}}, {"tokens", {name}}};
    return ojson{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  for (auto id : impl.prefix) single.push_back(special(id, 0));
  single.push_back(ojson{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (auto id : impl.suffix) single.push_back(special(id, 0));
  for (auto id : impl.prefix) pair.push_back(special(id, 0));
  pair.push_back(ojson{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  for (auto id : impl.suffix) pair.push_back(special(id, 0));
  pair.push_back(ojson{{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  for (auto id : impl.suffix) pair.push_back(special(id, 1));
  return ojson{{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

std::string impl_to_json(const Tokenizer::Impl& impl) {
  const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  ojson added = ojson::array();
  std::vector<AddedToken> by_id = impl.added;
  std::sort(by_id.begin(), by_id.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  for (const auto& a : by_id)
    added.push_back({{"id", a.id}, {"content", a.content}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", a.special}});
  j["added_tokens"] = added;
  j["normalizer"] = nullptr;
  const bool bpe = impl.kind == TokenizerKind::bpe;
  if (bpe && impl.isolate_cjk)
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", kCjkPattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                            byte_level}}};
  else if (bpe)
    j["pre_tokenizer"] = byte_level;
  else if (impl.kind == TokenizerKind::word_level)
    j["pre_tokenizer"] = {{"type", "WhitespaceSplit"}};
  else
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", kCharPattern}}}, {"behavior", "Isolated"}, {"invert", false}};
  if (!impl.prefix.empty() || !impl.suffix.empty())
    j["post_processor"] = template_json(impl);
  else
    j["post_processor"] = bpe ? byte_level : ojson(nullptr);
  if (bpe)
    j["decoder"] = byte_level;
  else if (impl.kind == TokenizerKind::char_level)
    j["decoder"] = {{"type", "Fuse"}};
  else
    j["decoder"] = nullptr;
  // ordered_json's operator[] searches linearly; tokens are known unique (finalize), so
  // append to the underlying vector directly (O(n) instead of O(n^2) for 50k tokens).
  ojson vocab = ojson::object();
  auto& entries = static_cast<std::vector<std::pair<const std::string, ojson>>&>(vocab.get_ref<ojson::object_t&>());
  entries.reserve(impl.tokens.size());
  for (std::size_t id = 0; id < impl.tokens.size(); ++id) entries.emplace_back(impl.tokens[id], id);
  ojson model;
  if (bpe) {
    ojson merges = ojson::array();
    for (const auto& [a, b] : impl.bpe.merge_list) merges.push_back(impl.tokens[a] + " " + impl.tokens[b]);
    model = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
             {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
             {"vocab", vocab}, {"merges", merges}};
  } else {
    model = {{"type", "WordLevel"}, {"vocab", vocab},
             {"unk_token", impl.unk >= 0 ? ojson(impl.tokens[impl.unk]) : ojson(nullptr)}};
  }
  j["model"] = model;
  try {
    return j.dump(2) + "\n";
  } catch (const ojson::exception& e) {
    fail("tokenizer save", e.what());
  }
}

}  // namespace tfm::tok
