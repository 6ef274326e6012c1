// The tokenizer of a GGUF file as tokenizer.json text (read), and a byte-level BPE
// Tokenizer as tokenizer.ggml.* metadata (write). Key names and token types follow
// llama.cpp's gguf-py constants (tokenizer.ggml.model/pre/tokens/token_type/scores/merges,
// token types 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte).
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "infer/gguf_tokenizer.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"

namespace tfm {
namespace {

using ojson = nlohmann::ordered_json;

constexpr int kTypeNormal = 1, kTypeControl = 3, kTypeUserDefined = 4;

// The Split regexes Hugging Face's tokenizer.json files use for these llama.cpp pre names.
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

ojson byte_level(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

ojson split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}};
}

ojson pre_tokenizer_for(const std::string& pre, const std::string& where) {
  if (pre == "gpt-2") return byte_level(true);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3")
    return {{"type", "Sequence"}, {"pretokenizers", {split(kLlama3Regex), byte_level(false)}}};
  if (pre == "qwen2") return {{"type", "Sequence"}, {"pretokenizers", {split(kQwen2Regex), byte_level(false)}}};
  if (pre == "smollm")
    return {{"type", "Sequence"},
            {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
  fail(where, "key 'tokenizer.ggml.pre': '", pre,
       "' has no tokenizer.json equivalent here (supported: gpt-2, llama-bpe, qwen2, smollm)");
}

// Vocabulary as an ordered JSON object, appended directly (ordered_json's operator[] is a
// linear search: quadratic for 50k tokens).
ojson vocab_object(const std::vector<std::string>& tokens) {
  ojson vocab = ojson::object();
  auto& entries = static_cast<std::vector<std::pair<const std::string, ojson>>&>(vocab.get_ref<ojson::object_t&>());
  entries.reserve(tokens.size());
  std::unordered_map<std::string, bool> seen;
  for (std::size_t id = 0; id < tokens.size(); ++id)
    if (seen.emplace(tokens[id], true).second) entries.emplace_back(tokens[id], id);  // first id wins, as in llama.cpp
  return vocab;
}

// The "single" template adding BOS and/or EOS around a sequence.
ojson template_processor(const std::vector<std::string>& tokens, std::int64_t bos, std::int64_t eos) {
  ojson single = ojson::array(), pair = ojson::array(), specials = ojson::object();
  auto special = [&](std::int64_t id, int type_id) {
    const std::string& name = tokens[static_cast<std::size_t>(id)];
    specials[name] = ojson{{"id", name}, {"ids", {id}}, {"tokens", {name}}};
    return ojson{{"SpecialToken", {{"id", name}, {"type_id", type_id}}}};
  };
  if (bos >= 0) single.push_back(special(bos, 0));
  single.push_back(ojson{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos >= 0) single.push_back(special(eos, 0));
  if (bos >= 0) pair.push_back(special(bos, 0));
  pair.push_back(ojson{{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos >= 0) pair.push_back(special(eos, 0));
  pair.push_back(ojson{{"Sequence", {{"id", "B"}, {"type_id", 1}}}});
  if (eos >= 0) pair.push_back(special(eos, 1));
  return ojson{{"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", specials}};
}

// Merges equivalent to SentencePiece BPE's rule "join the adjacent pair whose result has
// the highest score": every split of every token into two vocabulary pieces, ranked by the
// joined token's score (higher first), then by its id.
std::vector<std::string> merges_from_scores(const std::vector<std::string>& tokens, const std::vector<double>& scores,
                                            const std::vector<std::int64_t>& types) {
  std::unordered_map<std::string, std::size_t> id_of;
  for (std::size_t i = 0; i < tokens.size(); ++i) id_of.emplace(tokens[i], i);
  struct Merge {
    double score;
    std::size_t id, left, right;
  };
  std::vector<Merge> merges;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!types.empty() && types[id] != kTypeNormal) continue;
    const std::string& t = tokens[id];
    for (std::size_t cut = 1; cut < t.size(); ++cut) {
      if ((static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 sequence
      auto l = id_of.find(t.substr(0, cut)), r = id_of.find(t.substr(cut));
      if (l != id_of.end() && r != id_of.end()) merges.push_back({scores[id], id, l->second, r->second});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.id != b.id) return a.id < b.id;
    return a.left < b.left;
  });
  std::vector<std::string> out;
  out.reserve(merges.size());
  for (const auto& m : merges) out.push_back(tokens[m.left] + " " + tokens[m.right]);
  return out;
}

}  // namespace

std::string gguf_tokenizer_json(const GgufFile& f) {
  const std::string& where = f.path;
  const std::string model = f.get_string("tokenizer.ggml.model");
  const GgufValue* tv = f.find("tokenizer.ggml.tokens");
  TFM_CHECK(tv != nullptr && tv->type == GgufValueType::array && tv->array_type == GgufValueType::string, where,
            "key 'tokenizer.ggml.tokens' must be an array of strings");
  const std::vector<std::string>& tokens = tv->strings;
  TFM_CHECK(!tokens.empty(), where, "key 'tokenizer.ggml.tokens' is empty");
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<std::int64_t> types;
  if (const GgufValue* t = f.find("tokenizer.ggml.token_type")) {
    TFM_CHECK(t->type == GgufValueType::array && t->ints.size() == tokens.size(), where,
              "key 'tokenizer.ggml.token_type' must be an integer array of ", n, " entries");
    types = t->ints;
  }
  auto special_id = [&](const char* key) {
    const std::int64_t id = f.get_int(std::string("tokenizer.ggml.") + key, -1);
    TFM_CHECK(id >= -1 && id < n, where, "key 'tokenizer.ggml.", key, "' = ", id, " is outside the ", n,
              "-token vocabulary");
    return id;
  };
  const std::int64_t bos = special_id("bos_token_id"), eos = special_id("eos_token_id"),
                     unk = special_id("unknown_token_id");
  special_id("padding_token_id");

  ojson j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  ojson added = ojson::array();
  for (std::int64_t id = 0; id < n; ++id) {
    const std::int64_t ty = types.empty() ? kTypeNormal : types[static_cast<std::size_t>(id)];
    if (ty == kTypeControl || ty == kTypeUserDefined)
      added.push_back({{"id", id}, {"content", tokens[static_cast<std::size_t>(id)]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false}, {"special", ty == kTypeControl}});
  }
  j["added_tokens"] = added;
  const bool add_bos = f.get_bool("tokenizer.ggml.add_bos_token", model == "llama");
  const bool add_eos = f.get_bool("tokenizer.ggml.add_eos_token", false);
  ojson model_json;
  if (model == "gpt2") {
    const GgufValue* mv = f.find("tokenizer.ggml.merges");
    TFM_CHECK(mv != nullptr && mv->type == GgufValueType::array && mv->array_type == GgufValueType::string, where,
              "key 'tokenizer.ggml.merges' must be an array of strings (byte-level BPE needs its merges)");
    std::string pre = f.get_string("tokenizer.ggml.pre", "");
    if (pre.empty() && f.get_string("general.architecture", "") == "gpt2") pre = "gpt-2";
    TFM_CHECK(!pre.empty(), where, "key 'tokenizer.ggml.pre' is missing (needed to know the pre-tokenizer)");
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = pre_tokenizer_for(pre, where);
    j["post_processor"] = (add_bos && bos >= 0) || (add_eos && eos >= 0)
                              ? template_processor(tokens, add_bos ? bos : -1, add_eos ? eos : -1)
                              : byte_level(true);
    j["decoder"] = byte_level(true);
    model_json = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false},
                  {"vocab", vocab_object(tokens)}, {"merges", mv->strings}};
  } else if (model == "llama") {
    const GgufValue* sv = f.find("tokenizer.ggml.scores");
    TFM_CHECK(sv != nullptr && sv->type == GgufValueType::array && sv->floats.size() == tokens.size(), where,
              "key 'tokenizer.ggml.scores' must be a float array of ", n, " entries (SentencePiece needs its scores)");
    const bool prefix_space = f.get_bool("tokenizer.ggml.add_space_prefix", true);
    ojson normalizers = ojson::array();
    if (prefix_space) normalizers.push_back({{"type", "Prepend"}, {"prepend", "\xe2\x96\x81"}});
    normalizers.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xe2\x96\x81"}});
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    j["pre_tokenizer"] = nullptr;
    j["post_processor"] = (add_bos && bos >= 0) || (add_eos && eos >= 0)
                              ? template_processor(tokens, add_bos ? bos : -1, add_eos ? eos : -1)
                              : ojson(nullptr);
    ojson decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\xe2\x96\x81"}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}}};
    if (prefix_space) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    j["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    model_json = {{"type", "BPE"}, {"dropout", nullptr},
                  {"unk_token", unk >= 0 ? ojson(tokens[static_cast<std::size_t>(unk)]) : ojson(nullptr)},
                  {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr}, {"fuse_unk", true},
                  {"byte_fallback", true}, {"vocab", vocab_object(tokens)},
                  {"merges", merges_from_scores(tokens, sv->floats, types)}};
  } else {
    fail(where, "key 'tokenizer.ggml.model': '", model, "' is not supported (gpt2, llama)");
  }
  j["model"] = model_json;
  try {
    return j.dump();
  } catch (const ojson::exception& e) {
    fail(where, "tokenizer metadata holds invalid UTF-8: ", e.what());
  }
}

void tokenizer_to_gguf(const Tokenizer& tok, std::vector<std::pair<std::string, GgufValue>>& meta, std::int64_t vocab_size) {
  const ojson j = ojson::parse(tok.to_json());
  const ojson& model = j.at("model");
  const auto type_of = [](const ojson& part) { return part.is_object() ? part.value("type", std::string()) : std::string(); };
  TFM_CHECK(type_of(model) == "BPE" && j.contains("pre_tokenizer") && type_of(j.at("pre_tokenizer")) == "ByteLevel",
            "gguf", "only byte-level BPE tokenizers (GPT-2 style, no CJK split) can be written to GGUF; this one is ",
            tokenizer_kind_name(tok.kind()));
  std::vector<std::string> tokens(static_cast<std::size_t>(tok.vocab_size()));
  std::vector<std::int64_t> types(tokens.size(), kTypeNormal);
  for (std::int32_t id = 0; id < static_cast<std::int32_t>(tokens.size()); ++id) {
    tokens[static_cast<std::size_t>(id)] = tok.id_to_token(id);
    if (tok.is_special(id)) types[static_cast<std::size_t>(id)] = kTypeControl;
  }
  // A model with more embedding rows than tokenizer tokens: llama.cpp needs one token per row,
  // so the rest are "[PAD<id>]" tokens of type UNUSED (5), as convert_hf_to_gguf.py pads.
  for (auto id = static_cast<std::int64_t>(tokens.size()); id < vocab_size; ++id) {
    tokens.push_back("[PAD" + std::to_string(id) + "]");
    types.push_back(5);
  }
  std::vector<std::string> merges;
  for (const auto& m : model.at("merges")) merges.push_back(m.is_string() ? m.get<std::string>()
                                                                         : m[0].get<std::string>() + " " + m[1].get<std::string>());
  meta.emplace_back("tokenizer.ggml.model", GgufValue::string("gpt2"));
  meta.emplace_back("tokenizer.ggml.pre", GgufValue::string("gpt-2"));
  meta.emplace_back("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
  meta.emplace_back("tokenizer.ggml.token_type", GgufValue::i32_array(std::move(types)));
  meta.emplace_back("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));
  auto id = [&](const char* key, std::int32_t v) {
    if (v >= 0) meta.emplace_back(std::string("tokenizer.ggml.") + key, GgufValue::u32(static_cast<std::uint32_t>(v)));
  };
  id("bos_token_id", tok.bos_id());
  id("eos_token_id", tok.eos_id());
  id("unknown_token_id", tok.unk_id());
  id("padding_token_id", tok.pad_id());
  meta.emplace_back("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  meta.emplace_back("tokenizer.ggml.add_eos_token", GgufValue::boolean(false));
}

}  // namespace tfm
