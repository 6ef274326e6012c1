// The files before tokenizer.json, loaded through load_tokenizer: SentencePiece .model files
// against python3-sentencepiece (tools/reference/sentencepiece/gen_reference.py, fixture
// spm_reference), vocab.txt against HF's encodings of the same WordPiece vocabulary, and
// GPT-2's vocab.json + merges.txt against tiktoken.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference_env.h"
#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = reference_env(name);
  return v ? v : "";
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> f;
  std::string cur;
  std::istringstream in(line);
  while (std::getline(in, cur, '\t')) f.push_back(cur);
  if (!line.empty() && line.back() == '\t') f.push_back("");
  return f;
}

std::vector<std::int32_t> ints(const std::string& s) {
  std::vector<std::int32_t> v;
  std::istringstream in(s);
  std::int32_t x;
  while (in >> x) v.push_back(x);
  return v;
}

void check_spm(const std::string& kind) {
  const std::string dir = env("TFM_SPM_REFERENCE_DIR");
  ASSERT_FALSE(dir.empty()) << "set TFM_SPM_REFERENCE_DIR (ctest does)";
  const tfm::Tokenizer tok = tfm::load_tokenizer(dir + "/" + kind + ".model");
  EXPECT_EQ(tok.kind(), tfm::TokenizerKind::sentencepiece);
  std::ifstream in(dir + "/" + kind + ".tsv");
  std::string line;
  std::size_t rows = 0, bad_ids = 0, bad_decode = 0;
  while (std::getline(in, line)) {
    const auto f = fields(line);
    ASSERT_EQ(f.size(), 3u);
    const std::string input = unhex(f[0]);
    const auto want = ints(f[1]);
    const auto got = tok.encode(input);
    if (got != want && ++bad_ids <= 5) ADD_FAILURE() << kind << " ids differ for '" << input << "'";
    if (tok.decode(want) != unhex(f[2]) && ++bad_decode <= 5) ADD_FAILURE() << kind << " decode differs for '" << input << "'";
    ++rows;
  }
  EXPECT_GT(rows, 1000u);
  EXPECT_EQ(bad_ids + bad_decode, 0u) << kind << ": of " << rows;
  // add_special: SentencePiece's <s> before (LlamaTokenizer's default), no </s> after.
  const auto with = tok.encode("hello", true);
  ASSERT_FALSE(with.empty());
  EXPECT_EQ(with.front(), tok.bos_id());
}

TEST(SentencePieceParity, UnigramModel) { check_spm("unigram"); }
TEST(SentencePieceParity, BpeModelWithByteFallback) { check_spm("bpe"); }

TEST(SentencePieceFiles, TruncatedModelIsAOneLineError) {
  const std::string dir = env("TFM_SPM_REFERENCE_DIR");
  ASSERT_FALSE(dir.empty());
  std::ifstream in(dir + "/unigram.model", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path tmp = fs::temp_directory_path() / "tfm_truncated_spm";
  fs::create_directories(tmp);
  std::ofstream(tmp / "tokenizer.model", std::ios::binary) << bytes.substr(0, bytes.size() / 3);
  try {
    tfm::load_tokenizer(tmp.string());
    ADD_FAILURE() << "no error";
  } catch (const tfm::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("not a valid SentencePiece model"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  fs::remove_all(tmp);
}

// vocab.txt + tokenizer_config.json (do_lower_case) -> the same encodings HF gives for the
// trained BERT WordPiece tokenizer.json with that vocabulary.
TEST(LegacyFiles, VocabTxtMatchesHfWordPiece) {
  const std::string ref = env("TFM_HF_REFERENCE_DIR");
  ASSERT_FALSE(ref.empty());
  std::ifstream jin(ref + "/bert-wordpiece.tokenizer.json");
  const auto doc = nlohmann::json::parse(jin);
  std::vector<std::string> vocab(doc["model"]["vocab"].size());
  for (const auto& [t, id] : doc["model"]["vocab"].items()) vocab.at(id.get<std::size_t>()) = t;
  const fs::path dir = fs::temp_directory_path() / "tfm_vocab_txt";
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "vocab.txt");
    for (const auto& t : vocab) out << t << "\n";
    std::ofstream(dir / "tokenizer_config.json") << R"({"do_lower_case": true, "tokenizer_class": "BertTokenizer"})";
  }
  const tfm::Tokenizer tok = tfm::load_tokenizer(dir.string());
  std::ifstream in(ref + "/bert-wordpiece.tsv");
  std::string line;
  std::size_t rows = 0, bad = 0;
  while (std::getline(in, line)) {
    const auto f = fields(line);
    if (f.size() != 7) continue;
    const std::string input = unhex(f[0]);
    if (tok.encode(input, true) != ints(f[2]) && ++bad <= 5) ADD_FAILURE() << "ids differ for '" << input << "'";
    if (tok.decode(ints(f[2]), true) != unhex(f[6]) && ++bad <= 5) ADD_FAILURE() << "decode differs for '" << input << "'";
    ++rows;
  }
  EXPECT_GT(rows, 1000u);
  EXPECT_EQ(bad, 0u) << "of " << rows;
  // A duplicate line is a one-line error naming the file and line.
  std::ofstream(dir / "vocab.txt", std::ios::app) << vocab[7] << "\n";
  try {
    tfm::load_tokenizer(dir.string());
    ADD_FAILURE() << "no error for a duplicate vocab.txt line";
  } catch (const tfm::Error& e) {
    EXPECT_NE(std::string(e.what()).find("appears twice"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

// GPT-2 as the hub publishes it (vocab.json + merges.txt, no tokenizer.json), and the
// general pipeline on GPT-2 (encode_full), both against tiktoken.
TEST(LegacyFiles, VocabJsonMergesTxtMatchesTiktoken) {
  const std::string ref = env("TFM_GPT2_REFERENCE");
  ASSERT_FALSE(ref.empty());
  const std::string src = env("TFM_SOURCE_DIR").empty() ? TFM_SOURCE_DIR_DEFAULT : env("TFM_SOURCE_DIR");
  const fs::path dir = fs::temp_directory_path() / "tfm_vocab_json";
  fs::create_directories(dir);
  fs::copy_file(src + "/data/gpt2-tokenizer/encoder.json", dir / "vocab.json", fs::copy_options::overwrite_existing);
  fs::copy_file(src + "/data/gpt2-tokenizer/vocab.bpe", dir / "merges.txt", fs::copy_options::overwrite_existing);
  const tfm::Tokenizer tok = tfm::load_tokenizer(dir.string());
  std::ifstream in(ref);
  std::string line;
  std::size_t rows = 0, bad = 0, k = 0;
  while (std::getline(in, line)) {
    if (k++ % 5) continue;
    const auto tab = line.find('\t');
    const std::string input = unhex(line.substr(0, tab));
    try {
      tfm::check_utf8(input, "test");
    } catch (const tfm::Error&) {
      continue;  // the pipeline takes valid UTF-8 (HF's input is a str)
    }
    const auto want = ints(line.substr(tab + 1));
    if (tok.encode(input) != want && ++bad <= 5) ADD_FAILURE() << "vocab.json ids differ for '" << input << "'";
    if (tok.encode_full(input).ids != want && ++bad <= 5) ADD_FAILURE() << "pipeline ids differ for '" << input << "'";
    ++rows;
  }
  EXPECT_GT(rows, 10000u);
  EXPECT_EQ(bad, 0u) << "of " << rows;
  fs::remove_all(dir);
}

}  // namespace
