// GPT-2 parity: our byte-level BPE against OpenAI's tiktoken (npm, encoding gpt2) on every
// line of the data files and an adversarial set. The reference file is written at test
// time by tools/reference/tiktoken/gen_reference.js (ctest fixture gpt2_reference).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "reference_env.h"
#include "tfm/tokenizer.h"

namespace {

struct Case {
  std::string input;
  std::vector<std::int32_t> ids;
};

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::vector<Case> load_reference() {
  const char* path = reference_env("TFM_GPT2_REFERENCE");
  if (!path) return {};
  std::ifstream in(path);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    Case c;
    c.input = unhex(line.substr(0, tab));
    std::istringstream ids(line.substr(tab + 1));
    std::int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

std::string source_dir() {
  const char* s = reference_env("TFM_SOURCE_DIR");
  return s ? s : TFM_SOURCE_DIR_DEFAULT;
}

std::string show(const std::vector<std::int32_t>& v) {
  std::string s;
  for (auto id : v) s += std::to_string(id) + " ";
  return s;
}

TEST(Gpt2Parity, EveryLineMatchesTiktoken) {
  const auto cases = load_reference();
  ASSERT_GT(cases.size(), 100000u) << "reference missing: set TFM_GPT2_REFERENCE (ctest does)";
  const auto tok = tfm::Tokenizer::load(source_dir() + "/data/gpt2-tokenizer");
  ASSERT_EQ(tok.vocab_size(), 50257);
  std::size_t mismatches = 0;
  for (const auto& c : cases) {
    const auto ids = tok.encode(c.input);
    if (ids != c.ids && ++mismatches <= 10)
      ADD_FAILURE() << "input '" << c.input << "'\n ours: " << show(ids) << "\n tiktoken: " << show(c.ids);
    EXPECT_EQ(tok.decode(ids), c.input);
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " inputs";
}

TEST(Gpt2Parity, BatchedEncodeMatchesTiktoken) {
  const auto cases = load_reference();
  ASSERT_FALSE(cases.empty());
  const auto tok = tfm::Tokenizer::load(source_dir() + "/data/gpt2-tokenizer");
  std::vector<std::string> texts;
  for (const auto& c : cases) texts.push_back(c.input);
  const auto ids = tok.encode_batch(texts);
  for (std::size_t i = 0; i < cases.size(); ++i) ASSERT_EQ(ids[i], cases[i].ids) << "case " << i;
}

TEST(Gpt2Parity, TokenizerJsonRoundTripKeepsIds) {
  const auto cases = load_reference();
  ASSERT_FALSE(cases.empty());
  const auto tok = tfm::Tokenizer::load(source_dir() + "/data/gpt2-tokenizer");
  const auto again = tfm::Tokenizer::from_json(tok.to_json());
  for (std::size_t i = 0; i < cases.size(); i += 7) ASSERT_EQ(again.encode(cases[i].input), cases[i].ids);
}

}  // namespace
