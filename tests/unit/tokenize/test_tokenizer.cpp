// Tokenizers: pre-tokenizer tables, BPE fast vs naive, byte round-trip property, trainer
// determinism and tokenizer.json reload, char/word vocabularies, batching, malformed input.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tfm/tokenizer.h"
#include "tokenize/bpe_model.h"
#include "tokenize/pretokenizer.h"
#include "tokenize/tokenizer_impl.h"
#include "tokenize/unicode.h"

namespace {

std::string data_dir() {
  const char* s = std::getenv("TFM_SOURCE_DIR");
  return std::string(s ? s : ".") + "/data";
}
const tfm::Tokenizer& gpt2() {
  static const tfm::Tokenizer t = tfm::Tokenizer::load(data_dir() + "/gpt2-tokenizer");
  return t;
}
std::string random_bytes(std::mt19937& rng, std::size_t max_len) {
  std::uniform_int_distribution<std::size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255), kind(0, 3);
  const char* alphabet = " \n\t'sabcXY12.,!";
  std::string s(len(rng), '\0');
  for (auto& c : s) c = kind(rng) == 0 ? static_cast<char>(byte(rng)) : alphabet[byte(rng) % 15];
  return s;
}
std::vector<std::string> shakespeare_lines(std::size_t n) {
  std::istringstream in(tfm::tok::read_file(data_dir() + "/tinyshakespeare.txt", "test"));
  std::vector<std::string> lines;
  std::string l;
  while (lines.size() < n && std::getline(in, l)) lines.push_back(l);
  return lines;
}

TEST(Unicode, FastClassifyMatchesSlowForEveryCodePoint) {
  using namespace tfm::tok::unicode;
  for (std::uint32_t cp = 0; cp <= 0x10FFFF; ++cp) ASSERT_EQ(classify(cp), classify_slow(cp)) << cp;
  EXPECT_EQ(classify(0x4E2D), CharClass::letter);  // 中
  EXPECT_EQ(classify(0x0661), CharClass::number);  // Arabic-Indic 1
  EXPECT_EQ(classify(0x3000), CharClass::space);
  EXPECT_EQ(classify(0x0301), CharClass::other);   // combining mark (Mn)
}

TEST(Gpt2Tokenizer, KnownIds) {
  EXPECT_EQ(gpt2().encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
  EXPECT_EQ(gpt2().encode("<|endoftext|>"), (std::vector<std::int32_t>{50256}));
  EXPECT_EQ(gpt2().encode("hi", true), (std::vector<std::int32_t>{5303, 50256}));
  EXPECT_EQ(gpt2().decode(std::vector<std::int32_t>{5303, 50256}, true), "hi");
}

TEST(Gpt2Tokenizer, FastMergeMatchesGpt2ReferenceAlgorithm) {
  const auto& impl = *reinterpret_cast<const std::shared_ptr<const tfm::Tokenizer::Impl>*>(&gpt2());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string w = random_bytes(rng, trial % 10 == 0 ? 600 : 40);  // > 128 bytes: heap path
    std::vector<std::int32_t> fast, naive;
    impl->bpe.encode_word(w, fast);
    impl->bpe.encode_word_naive(w, naive);
    ASSERT_EQ(fast, naive) << "trial " << trial;
  }
}

TEST(Gpt2Tokenizer, RoundTripsRandomBytes) {
  for (int seed = 0; seed < 200; ++seed) {
    std::mt19937 rng(seed);
    const std::string s = random_bytes(rng, 300);
    ASSERT_EQ(gpt2().decode(gpt2().encode(s)), s) << "seed " << seed;
  }
}

TEST(BpeTrainer, DeterministicAcrossRunsAndThreadsAndReloads) {
  const auto lines = shakespeare_lines(4000);
  tfm::TokenizerTrainOptions opts;
  opts.vocab_size = 1000;
  opts.extra_specials = {"<cls>", "<sep>", "<mask>"};
  tfm::set_num_threads(1);
  const auto a = tfm::Tokenizer::train(lines, opts);
  tfm::set_num_threads(2);
  const auto b = tfm::Tokenizer::train(lines, opts);
  EXPECT_EQ(a.vocab_size(), 1000);
  EXPECT_EQ(a.to_json(), b.to_json());
  EXPECT_EQ(a.token_to_id("<pad>"), 0);
  EXPECT_EQ(a.token_to_id("<mask>"), 6);
  const auto reloaded = tfm::Tokenizer::from_json(a.to_json());
  EXPECT_EQ(reloaded.to_json(), a.to_json());
  const auto ids = a.encode_batch(lines, true);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    ASSERT_EQ(reloaded.encode(lines[i], true), ids[i]);
    ASSERT_EQ(a.decode(ids[i], true), lines[i]);
  }
  for (int seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(seed);
    const std::string s = random_bytes(rng, 200);
    ASSERT_EQ(reloaded.decode(reloaded.encode(s)), s);
  }
}

TEST(Vocab, CharLevelIsPerCodePointSortedByFrequency) {
  tfm::TokenizerTrainOptions opts;
  opts.kind = tfm::TokenizerKind::char_level;
  const auto t = tfm::Tokenizer::train({"我爱你", "你好", "aab"}, opts);
  EXPECT_EQ(t.token_to_id("<pad>"), 0);
  EXPECT_EQ(t.token_to_id("<unk>"), 1);
  EXPECT_EQ(t.id_to_token(4), "你");  // 2 occurrences, first seen before 'a'
  EXPECT_EQ(t.id_to_token(5), "a");
  EXPECT_EQ(t.tokenize("你好z"), (std::vector<std::string>{"你", "好", "<unk>"}));
  EXPECT_EQ(t.decode(t.encode("我爱你")), "我爱你");
  const auto again = tfm::Tokenizer::from_json(t.to_json());
  EXPECT_EQ(again.kind(), tfm::TokenizerKind::char_level);
  EXPECT_EQ(again.encode("你好z<eos>"), t.encode("你好z<eos>"));
}

TEST(Vocab, WordLevelMinFreqAndReload) {
  tfm::TokenizerTrainOptions opts;
  opts.kind = tfm::TokenizerKind::word_level;
  opts.min_freq = 2;
  const auto t = tfm::Tokenizer::train({"the cat sat", "the dog  sat\ton the mat"}, opts);
  EXPECT_EQ(t.vocab_size(), 4 + 2);  // the(3) sat(2)
  EXPECT_EQ(t.id_to_token(4), "the");
  EXPECT_EQ(t.encode("the fish sat", true), (std::vector<std::int32_t>{2, 4, 1, 5, 3}));
  EXPECT_EQ(t.decode(t.encode("the  sat")), "the sat");
  const auto again = tfm::Tokenizer::from_json(t.to_json());
  EXPECT_EQ(again.kind(), tfm::TokenizerKind::word_level);
  EXPECT_EQ(again.encode("the fish sat", true), t.encode("the fish sat", true));
}

TEST(Batching, PadsTruncatesAndReportsValidLens) {
  tfm::TokenizerTrainOptions opts;
  opts.kind = tfm::TokenizerKind::word_level;
  const auto t = tfm::Tokenizer::train({"a b c d e"}, opts);
  tfm::BatchOptions bo;
  bo.add_special = true;
  auto b = t.encode_padded({"a b", "a b c d e"}, bo);
  EXPECT_EQ(b.length, 7);
  EXPECT_EQ(b.valid_lens, (std::vector<std::int32_t>{4, 7}));
  EXPECT_EQ(std::vector<std::int32_t>(b.ids.begin(), b.ids.begin() + 7), (std::vector<std::int32_t>{2, 4, 5, 3, 0, 0, 0}));
  bo.max_length = 4;
  bo.padding = tfm::BatchOptions::Padding::max_length;
  b = t.encode_padded({"a", "a b c d e"}, bo);
  EXPECT_EQ(b.length, 4);
  EXPECT_EQ(b.valid_lens, (std::vector<std::int32_t>{3, 4}));
  EXPECT_EQ(std::vector<std::int32_t>(b.ids.begin() + 4, b.ids.end()), (std::vector<std::int32_t>{2, 4, 5, 3}));
  EXPECT_THROW(gpt2().encode_padded({"x"}, tfm::BatchOptions{}), tfm::Error);  // GPT-2 has no <pad>
}

void expect_error(const std::string& json, const std::string& needle) {
  try {
    tfm::Tokenizer::from_json(json);
    ADD_FAILURE() << "no error for " << json;
  } catch (const tfm::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::vector<std::string> pieces(const std::string& text) {
  std::vector<tfm::tok::Span> spans;
  tfm::tok::cjk_isolated_gpt2_split(text, spans);
  std::vector<std::string> out;
  for (const auto& s : spans) out.push_back(text.substr(s.begin, s.end - s.begin));
  return out;
}

TEST(CjkPreTokenizer, IsolatesIdeographsAndGpt2SplitsTheRest) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Tom是我的朋友。Hi"), (V{"Tom", "是", "我", "的", "朋", "友", "。", "Hi"}));
  EXPECT_EQ(pieces("I am 汤姆 ok"), (V{"I", " am", " ", "汤", "姆", " ok"}));
  EXPECT_EQ(pieces("no ideographs here's 42"), (V{"no", " ideographs", " here", "'s", " 42"}));
  // A rare-plane ideograph (U+20000) and a compatibility one (U+F900) are pieces too; kana
  // and Hangul are not ideographs, so they stay in GPT-2 letter runs.
  EXPECT_EQ(pieces("\xF0\xA0\x80\x80\xEF\xA4\x80"), (V{"\xF0\xA0\x80\x80", "\xEF\xA4\x80"}));
  EXPECT_EQ(pieces("ひらがな한국어"), (V{"ひらがな한국어"}));
  // Invalid bytes are never ideographs; the pieces still cover the text exactly.
  const std::string bad = "a\xE4\xB8x\xFF是";
  std::string joined;
  for (const auto& p : pieces(bad)) joined += p;
  EXPECT_EQ(joined, bad);
  EXPECT_EQ(pieces(bad).back(), "是");
}

TEST(BpeTrainer, IsolateCjkKeepsChineseCharacterLevelAndReloads) {
  std::vector<std::string> corpus;
  for (int i = 0; i < 200; ++i) {
    corpus.push_back("Tom is my friend. 汤姆是我的朋友。");
    corpus.push_back("I love you. 我爱你。");
    corpus.push_back("Where is the station? 车站在哪里？");
  }
  tfm::TokenizerTrainOptions opts;
  opts.vocab_size = 400;
  opts.isolate_cjk = true;
  const auto t = tfm::Tokenizer::train(corpus, opts);
  opts.isolate_cjk = false;
  const auto plain = tfm::Tokenizer::train(corpus, opts);
  // Every ideograph of the corpus is one token, none joins two; without the rule BPE merges
  // whole Chinese words (fewer tokens than characters).
  auto han = [](const std::string& s) {
    std::vector<tfm::tok::Span> sp;
    tfm::tok::codepoint_split(s, sp);
    std::int64_t n = 0;
    for (const auto& x : sp) n += x.end - x.begin == 3 && static_cast<unsigned char>(s[x.begin]) >= 0xE4;
    return n;
  };
  const std::string zh = "汤姆是我的朋友";
  EXPECT_EQ(static_cast<std::int64_t>(t.encode(zh).size()), han(zh));
  EXPECT_LT(plain.encode(zh).size(), t.encode(zh).size());
  for (std::int32_t id = 0; id < t.vocab_size(); ++id) EXPECT_LE(han(t.decode(std::vector<std::int32_t>{id})), 1) << t.id_to_token(id);
  // English still gets merged words.
  EXPECT_EQ(t.encode("Tom is my friend.").size(), 5u);
  // tokenizer.json: the Split + ByteLevel sequence, read back to the same encodings.
  const std::string json = t.to_json();
  EXPECT_NE(json.find("\"Sequence\""), std::string::npos);
  const auto back = tfm::Tokenizer::from_json(json);
  EXPECT_EQ(back.to_json(), json);
  for (const auto& line : corpus) {
    ASSERT_EQ(back.encode(line), t.encode(line));
    ASSERT_EQ(t.decode(t.encode(line)), line);
  }
  // Only byte-level BPE takes the rule.
  opts.kind = tfm::TokenizerKind::char_level;
  opts.isolate_cjk = true;
  EXPECT_THROW(tfm::Tokenizer::train(corpus, opts), tfm::Error);
}

TEST(TokenizerJson, MalformedInputsGiveClearErrors) {
  const std::string pre = R"("pre_tokenizer":{"type":"ByteLevel"},)";
  std::string good = gpt2().to_json();
  expect_error(good.substr(0, good.size() / 2), "not valid JSON");
  expect_error("{" + pre + R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a c"]}})", "unknown token 'c'");
  expect_error("{" + pre + R"("model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}})", "duplicate id 0");
  expect_error("{" + pre + R"("model":{"type":"BPE","vocab":{"a":0,"b":2},"merges":[]}})", "vocabulary hole: no token has id 1");
  expect_error("{" + pre + R"("model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}})", "not an integer");
  expect_error(R"({"model":{"type":"Unigram","vocab":{}}})", "not an array of [piece, score]");
  expect_error(R"({"model":{"type":"Bogus","vocab":{}}})", "unknown model type 'Bogus' (supported: BPE, WordPiece");
  // Any Split before ByteLevel loads now (the pipeline); an unknown type names itself.
  EXPECT_NO_THROW(tfm::Tokenizer::from_json(
      R"({"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\d"},)"
      R"("behavior":"Isolated","invert":false},{"type":"ByteLevel"}]},"model":{"type":"BPE","vocab":{"a":0},"merges":[]}})"));
  expect_error(R"({"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Frobnicate"}]},)"
               R"("model":{"type":"BPE","vocab":{"a":0},"merges":[]}})",
               "unknown pre_tokenizer type 'Frobnicate' (supported: ByteLevel, Split");
  expect_error(R"({"model":[]})", "not an object");
  // Both merge spellings load to the same tokenizer.
  const auto s = tfm::Tokenizer::from_json("{" + pre + R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}})");
  const auto p = tfm::Tokenizer::from_json("{" + pre + R"("model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}})");
  EXPECT_EQ(s.encode("abab"), (std::vector<std::int32_t>{2, 2}));
  EXPECT_EQ(p.encode("abab"), s.encode("abab"));
  // ByteLevel's add_prefix_space defaults to true (no 'Ġ' token here) and a char the
  // vocabulary lacks, with no unk_token, is dropped: what HF tokenizers does.
  EXPECT_EQ(s.encode("abc"), (std::vector<std::int32_t>{2}));
  EXPECT_THROW(gpt2().decode(std::vector<std::int32_t>{50257}), tfm::Error);
  EXPECT_THROW(gpt2().decode(std::vector<std::int32_t>{-1}), tfm::Error);
  EXPECT_THROW(tfm::Tokenizer::load("/nonexistent/tokenizer.json"), tfm::Error);
}

}  // namespace
