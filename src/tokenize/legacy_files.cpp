#include "tokenize/legacy_files.h"

#include <sstream>

#include "tfm/error.h"
#include "tokenize/spm_model.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm::tok {

using nlohmann::json;

namespace {

std::string cfg_token(const json& c, const char* key) {
  if (!c.is_object() || !c.contains(key) || c.at(key).is_null()) return "";
  const json& v = c.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return v.value("content", std::string());
  return "";
}

// BERT's names when the config gives none (a bare vocab.txt).
std::string default_token(const std::string& key, const json& vocab) {
  static const std::pair<const char*, const char*> bert[] = {
      {"pad_token", "[PAD]"}, {"unk_token", "[UNK]"}, {"cls_token", "[CLS]"}, {"sep_token", "[SEP]"}, {"mask_token", "[MASK]"}};
  for (const auto& [k, t] : bert)
    if (key == k && vocab.contains(t)) return t;
  return "";
}

// added_tokens_decoder of tokenizer_config.json, else the config's named special tokens
// that are in the vocabulary.
json added_tokens(const json& config, const json& vocab, std::initializer_list<const char*> fallback_names) {
  json out = json::array();
  if (config.is_object() && config.contains("added_tokens_decoder") && config.at("added_tokens_decoder").is_object()) {
    for (const auto& [id, t] : config.at("added_tokens_decoder").items()) {
      json a = t;
      a["id"] = std::stoll(id);
      out.push_back(a);
    }
    return out;
  }
  for (const char* key : fallback_names) {
    std::string tok = cfg_token(config, key);
    if (tok.empty()) tok = default_token(key, vocab);
    if (tok.empty() || !vocab.contains(tok)) continue;
    bool seen = false;
    for (const auto& a : out) seen |= a.at("content") == tok;
    if (seen) continue;
    out.push_back({{"id", vocab.at(tok)}, {"content", tok}, {"single_word", false}, {"lstrip", false},
                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  return out;
}

}  // namespace

json bpe_doc_from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt, const json& config) {
  json vocab;
  try {
    vocab = json::parse(read_file(vocab_json, "tokenizer"));
  } catch (const json::exception& e) {
    fail(vocab_json, "not valid JSON: ", e.what());
  }
  TFM_CHECK(vocab.is_object(), vocab_json, "expected a JSON object token -> id");
  json merges = json::array();
  std::istringstream in(read_file(merges_txt, "tokenizer"));
  std::string line;
  std::size_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (lineno == 1 && line.rfind("#version", 0) == 0)) continue;
    const auto sp = line.find(' ');
    TFM_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < line.size() && line.find(' ', sp + 1) == std::string::npos,
              merges_txt + ":" + std::to_string(lineno), "expected 'left right', got '", line, "'");
    merges.push_back(line);
  }
  const bool prefix = config.is_object() && config.value("add_prefix_space", false);
  const std::string cls = config.is_object() ? config.value("tokenizer_class", std::string()) : "";
  json doc;
  doc["version"] = "1.0";
  doc["added_tokens"] = added_tokens(config, vocab, {"bos_token", "eos_token", "unk_token", "pad_token", "mask_token"});
  doc["normalizer"] = nullptr;
  doc["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", true}, {"use_regex", true}};
  doc["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  if (cls.find("Roberta") != std::string::npos || cls.find("Bart") != std::string::npos) {
    const std::string bos = cfg_token(config, "bos_token").empty() ? "<s>" : cfg_token(config, "bos_token");
    const std::string eos = cfg_token(config, "eos_token").empty() ? "</s>" : cfg_token(config, "eos_token");
    TFM_CHECK(vocab.contains(bos) && vocab.contains(eos), vocab_json, "RoBERTa tokens '", bos, "'/'", eos,
              "' are not in the vocabulary");
    doc["post_processor"] = {{"type", "RobertaProcessing"}, {"sep", {eos, vocab.at(eos)}}, {"cls", {bos, vocab.at(bos)}},
                             {"trim_offsets", true}, {"add_prefix_space", prefix}};
  } else {
    doc["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  }
  doc["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                  {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                  {"merges", merges}};
  return doc;
}

json wordpiece_doc_from_vocab_txt(const std::string& vocab_txt, const json& config) {
  json vocab = json::object();
  std::istringstream in(read_file(vocab_txt, "tokenizer"));
  std::string line;
  std::int64_t id = 0;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    TFM_CHECK(!vocab.contains(line), vocab_txt + ":" + std::to_string(id + 1), "token '", line,
              "' appears twice (line ", vocab.contains(line) ? vocab.at(line).get<std::int64_t>() + 1 : 0, ")");
    vocab[line] = id++;
  }
  TFM_CHECK(id > 0, vocab_txt, "empty vocabulary");
  auto opt_bool = [&](const char* key, json dflt) {
    return config.is_object() && config.contains(key) && !config.at(key).is_null() ? config.at(key) : dflt;
  };
  const std::string unk = cfg_token(config, "unk_token").empty() ? "[UNK]" : cfg_token(config, "unk_token");
  const std::string cls = cfg_token(config, "cls_token").empty() ? "[CLS]" : cfg_token(config, "cls_token");
  const std::string sep = cfg_token(config, "sep_token").empty() ? "[SEP]" : cfg_token(config, "sep_token");
  TFM_CHECK(vocab.contains(unk), vocab_txt, "unk token '", unk, "' is not in the vocabulary");
  json doc;
  doc["version"] = "1.0";
  doc["added_tokens"] = added_tokens(config, vocab, {"pad_token", "unk_token", "cls_token", "sep_token", "mask_token"});
  doc["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", true},
                       {"handle_chinese_chars", opt_bool("tokenize_chinese_chars", true)},
                       {"strip_accents", opt_bool("strip_accents", nullptr)},
                       {"lowercase", opt_bool("do_lower_case", true)}};
  doc["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  if (vocab.contains(cls) && vocab.contains(sep)) {
    auto special = [&](const std::string& t, int type) { return json{{"SpecialToken", {{"id", t}, {"type_id", type}}}}; };
    auto seq = [&](const char* s, int type) { return json{{"Sequence", {{"id", s}, {"type_id", type}}}}; };
    doc["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {special(cls, 0), seq("A", 0), special(sep, 0)}},
        {"pair", {special(cls, 0), seq("A", 0), special(sep, 0), seq("B", 1), special(sep, 1)}},
        {"special_tokens",
         {{cls, {{"id", cls}, {"ids", {vocab.at(cls)}}, {"tokens", {cls}}}},
          {sep, {{"id", sep}, {"ids", {vocab.at(sep)}}, {"tokens", {sep}}}}}}};
  } else {
    doc["post_processor"] = nullptr;
  }
  doc["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  doc["model"] = {{"type", "WordPiece"}, {"unk_token", unk}, {"continuing_subword_prefix", "##"},
                  {"max_input_chars_per_word", 100}, {"vocab", vocab}};
  return doc;
}

Tokenizer load_sentencepiece(const std::string& path, const TokenizerConfig& config) {
  Tokenizer::Impl impl;
  impl.kind = TokenizerKind::sentencepiece;
  auto spm = std::make_shared<SpmModel>(read_file(path, "tokenizer"), path);
  for (std::int32_t id = 0; id < spm->size(); ++id) {
    impl.tokens.push_back(spm->piece(id));
    if (spm->is_control(id)) impl.added.push_back({impl.tokens.back(), id, true});
  }
  impl.spm = spm;
  impl.config = config;
  impl.finalize(path.c_str());
  return make_tokenizer(std::move(impl));
}

}  // namespace tfm::tok
