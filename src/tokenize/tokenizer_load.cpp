// load_tokenizer: a model directory or a file of any supported format. The older formats
// become a tokenizer.json document first (as transformers' converters build them), so one
// pipeline runs them all; SentencePiece .model files run in libsentencepiece.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/tokenizer_json.h"
#include "tokenize/legacy_files.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// tokenizer_config.json (+ chat_template.jinja, which newer hub directories use) in dir.
TokenizerConfig read_config(const fs::path& dir, json* raw) {
  TokenizerConfig c;
  const fs::path p = dir / "tokenizer_config.json";
  if (is_file(p)) {
    const std::string text = tok::read_file(p.string(), "tokenizer_config.json");
    c = parse_tokenizer_config(text, p.string());
    if (raw) *raw = json::parse(text);
  }
  const fs::path jinja = dir / "chat_template.jinja";
  if (c.chat_template.empty() && is_file(jinja)) {
    c.chat_template = tok::read_file(jinja.string(), "chat_template.jinja");
    c.present = true;
  }
  return c;
}

Tokenizer from_doc(const json& doc, const TokenizerConfig& c) { return tokenizer_from_json(doc, c); }

Tokenizer load_file(const fs::path& file) {
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  json raw_config;
  const TokenizerConfig config = read_config(dir, &raw_config);
  const std::string name = file.filename().string();
  const std::string ext = file.extension().string();
  if (ext == ".model" || ext == ".spm") return tok::load_sentencepiece(file.string(), config);
  if (ext == ".txt") return from_doc(tok::wordpiece_doc_from_vocab_txt(file.string(), raw_config), config);
  const std::string text = tok::read_file(file.string(), "tokenizer");
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    fail(file.string(), "not valid JSON: ", e.what());
  }
  if (doc.is_object() && doc.contains("model") && doc.at("model").is_object())
    return tok::tokenizer_from_json_text(doc, config, text);
  // vocab.json of the GPT-2/RoBERTa hub layout (token -> id): merges.txt beside it
  const fs::path merges = dir / "merges.txt";
  TFM_CHECK(doc.is_object() && is_file(merges), "tokenizer", file.string(),
            " is neither a tokenizer.json (no \"model\" object) nor a vocab.json with merges.txt beside it");
  return from_doc(tok::bpe_doc_from_vocab_merges(file.string(), merges.string(), raw_config), config);
}

}  // namespace

Tokenizer load_tokenizer(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    TFM_CHECK(fs::exists(path, ec), "tokenizer", "no such file or directory: ", path);
    return load_file(fs::path(path));
  }
  const fs::path dir(path);
  if (is_file(dir / "tokenizer.json")) return load_file(dir / "tokenizer.json");
  if (is_file(dir / "vocab.json") && is_file(dir / "merges.txt")) return load_file(dir / "vocab.json");
  if (is_file(dir / "encoder.json") && is_file(dir / "vocab.bpe"))
    return Tokenizer::from_gpt2_files((dir / "encoder.json").string(), (dir / "vocab.bpe").string());
  if (is_file(dir / "vocab.txt")) return load_file(dir / "vocab.txt");
  for (const char* n : {"tokenizer.model", "spiece.model", "sentencepiece.bpe.model", "source.spm"})
    if (is_file(dir / n)) return load_file(dir / n);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".model") return load_file(e.path());
  fail("tokenizer", "directory ", path,
       " holds no tokenizer file (tokenizer.json, vocab.json + merges.txt, encoder.json + vocab.bpe, vocab.txt, *.model)");
}

}  // namespace tfm
