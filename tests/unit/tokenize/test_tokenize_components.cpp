// The tokenizer.json pipeline's components one by one (expected values from HF tokenizers'
// documented behaviour; whole-file parity is in tests/tokenizer_parity), and malformed files.
#include <gtest/gtest.h>

#include <algorithm>

#include "tfm/error.h"
#include "tfm/tokenizer.h"
#include "tokenize/components.h"
#include "tokenize/regex.h"

namespace {

using namespace tfm::tok;
using V = std::vector<std::string>;

Piece piece(const std::string& s) { return Piece{s, {}, 0, false}; }

std::string norm(const Normalizer& n, const std::string& s) {
  Piece p = piece(s);
  n.normalize(p);
  return p.text;
}

V pre(const PreTokenizer& pt, const std::string& s) {
  PreTokenized x{Split{piece(s), {}, false}};
  pt.pre_tokenize(x);
  V out;
  for (const auto& sp : x) out.push_back(sp.piece.text);
  return out;
}

std::string dec(const Decoder& d, V tokens) {
  d.decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

TEST(TokNormalizers, UnicodeForms) {
  EXPECT_EQ(norm(*make_unicode_normalizer(uprops::Form::nfc), "e\u0301"), "\u00e9");
  EXPECT_EQ(norm(*make_unicode_normalizer(uprops::Form::nfd), "\u00e9"), "e\u0301");
  EXPECT_EQ(norm(*make_unicode_normalizer(uprops::Form::nfkc), "\ufb01\u2460"), "fi1");
  EXPECT_EQ(norm(*make_unicode_normalizer(uprops::Form::nfkd), "\u00bd"), "1\u20442");
  // Canonical reordering of marks: ccc 230 after ccc 220.
  EXPECT_EQ(norm(*make_unicode_normalizer(uprops::Form::nfd), "a\u0301\u0323"), "a\u0323\u0301");
}

TEST(TokNormalizers, AlignmentsFollowTheSourceChar) {
  Piece p = piece("e\u0301x");
  make_unicode_normalizer(uprops::Form::nfc)->normalize(p);
  ASSERT_EQ(p.text, "\u00e9x");
  EXPECT_EQ(p.original(0, 2), (Range{0, 1}));  // the composed char keeps its starter's range
  EXPECT_EQ(p.original(2, 3), (Range{3, 4}));
}

TEST(TokNormalizers, TextOnes) {
  EXPECT_EQ(norm(*make_lowercase(), "HeLLo \u0130\u03a3"), "hello i\u0307\u03c3");
  EXPECT_EQ(norm(*make_strip_accents(), "e\u0301a\u0308"), "ea");
  EXPECT_EQ(norm(*make_strip(true, true), " \t x y \n"), "x y");
  EXPECT_EQ(norm(*make_strip(false, true), "  x  "), "  x");
  EXPECT_EQ(norm(*make_replace(" ", "", "\u2581"), "a b  c"), "a\u2581b\u2581\u2581c");
  EXPECT_EQ(norm(*make_replace("", " {2,}", " "), "a   b  c d"), "a b c d");
  EXPECT_EQ(norm(*make_prepend("\u2581"), "hi"), "\u2581hi");
  EXPECT_EQ(norm(*make_prepend("\u2581"), ""), "");
  std::vector<std::unique_ptr<Normalizer>> seq;
  seq.push_back(make_lowercase());
  seq.push_back(make_prepend("_"));
  EXPECT_EQ(norm(*make_normalizer_sequence(std::move(seq)), "AB"), "_ab");
}

TEST(TokNormalizers, Bert) {
  const auto bert = make_bert_normalizer(true, true, true, true);
  EXPECT_EQ(norm(*bert, "H\u00e9llo\tW\u00f6rld\x01\u4f60\u597d"), "hello world \u4f60  \u597d ");
  const auto keep = make_bert_normalizer(true, false, false, false);
  EXPECT_EQ(norm(*keep, "H\u00e9\u4f60"), "H\u00e9\u4f60");
}

TEST(TokPreTokenizers, SplitBehaviors) {
  auto split = [](SplitBehavior b, bool invert = false) { return make_split("-", "", b, invert); };
  EXPECT_EQ(pre(*split(SplitBehavior::removed), "a-b--c"), (V{"a", "b", "c"}));
  EXPECT_EQ(pre(*split(SplitBehavior::isolated), "a-b--c"), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pre(*split(SplitBehavior::merged_with_previous), "a-b--c"), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pre(*split(SplitBehavior::merged_with_next), "a-b--c"), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pre(*split(SplitBehavior::contiguous), "a-b--c"), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(pre(*make_split("", "\\p{N}+", SplitBehavior::isolated, true), "ab12cd"), (V{"ab", "12", "cd"}));
}

TEST(TokPreTokenizers, Llama3PatternWithLookAhead) {
  const std::string llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+";
  const auto s = make_split("", llama3, SplitBehavior::isolated, false);
  EXPECT_EQ(pre(*s, "I'LL pay 12345 now!!\n\n  ok"), (V{"I", "'LL", " pay", " ", "123", "45", " now", "!!\n\n", " ", " ok"}));
}

TEST(TokPreTokenizers, OthersAsHfDocumentsThem) {
  EXPECT_EQ(pre(*make_whitespace(), "Hey friend!  How_are you?"), (V{"Hey", "friend", "!", "How_are", "you", "?"}));
  EXPECT_EQ(pre(*make_whitespace_split(), " a\tb\u3000c "), (V{"a", "b", "c"}));
  EXPECT_EQ(pre(*make_bert_pre(), "Hello, world!"), (V{"Hello", ",", "world", "!"}));
  EXPECT_EQ(pre(*make_punctuation(SplitBehavior::isolated), "a,b"), (V{"a", ",", "b"}));
  EXPECT_EQ(pre(*make_digits(true), "a12b"), (V{"a", "1", "2", "b"}));
  EXPECT_EQ(pre(*make_digits(false), "a12b"), (V{"a", "12", "b"}));
  EXPECT_EQ(pre(*make_metaspace(0x2581, PrependScheme::always, true), "Hey friend"), (V{"\u2581Hey", "\u2581friend"}));
  EXPECT_EQ(pre(*make_metaspace(0x2581, PrependScheme::never, false), "Hey friend"), (V{"Hey\u2581friend"}));
  EXPECT_EQ(pre(*make_byte_level_pre(true, true), "Hello world"), (V{" Hello", " world"}));
  EXPECT_EQ(pre(*make_byte_level_pre(false, false), "Hello world"), (V{"Hello world"}));
}

std::vector<std::int32_t> ids(const Model& m, const std::string& s, bool byte_level = false) {
  std::vector<Token> out;
  Piece p = piece(s);
  p.byte_level = byte_level;
  m.tokenize(p, out);
  std::vector<std::int32_t> v;
  for (const auto& t : out) v.push_back(t.id);
  return v;
}

TEST(TokModels, BpeOptions) {
  BpeOptions o;
  o.has_unk = true;
  o.unk_token = "<unk>";
  o.fuse_unk = true;
  const auto bpe = make_bpe({"<unk>", "a", "b", "ab", "c"}, {{"a", "b"}}, o, "t");
  EXPECT_EQ(ids(*bpe, "abcab"), (std::vector<std::int32_t>{3, 4, 3}));
  EXPECT_EQ(ids(*bpe, "ab\u00e9\u00e9c"), (std::vector<std::int32_t>{3, 0, 4}));  // fused unk
  BpeOptions fb;
  fb.byte_fallback = true;
  std::vector<std::string> v = {"a"};
  for (int b = 0; b < 256; ++b) {
    char code[8];
    std::snprintf(code, sizeof code, "<0x%02X>", b);
    v.push_back(code);
  }
  const auto bytes = make_bpe(v, {}, fb, "t");
  EXPECT_EQ(ids(*bytes, "a\u00e9"), (std::vector<std::int32_t>{0, 1 + 0xC3, 1 + 0xA9}));
  BpeOptions affix;
  affix.continuing_subword_prefix = "##";
  affix.end_of_word_suffix = "</w>";
  const auto wp = make_bpe({"a", "##b", "##c</w>", "a##b", "ab", "a##b##c</w>", "abc</w>"}, {{"a", "##b"}, {"ab", "##c</w>"}}, affix, "t");
  EXPECT_EQ(ids(*wp, "abc"), (std::vector<std::int32_t>{6}));
  BpeOptions ig;
  ig.ignore_merges = true;
  const auto whole = make_bpe({"x", "y", "xy", "xyx"}, {{"x", "y"}}, ig, "t");
  EXPECT_EQ(ids(*whole, "xyx"), (std::vector<std::int32_t>{3}));
  EXPECT_THROW(make_bpe({"a"}, {{"a", "z"}}, BpeOptions{}, "t"), tfm::Error);
}

TEST(TokModels, WordPieceUnigramWordLevel) {
  const auto wp = make_wordpiece({"[UNK]", "un", "##aff", "##able", "a"}, "[UNK]", "##", 100, "t");
  EXPECT_EQ(ids(*wp, "unaffable"), (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ(ids(*wp, "unx"), (std::vector<std::int32_t>{0}));
  const auto small = make_wordpiece({"[UNK]", "a"}, "[UNK]", "##", 3, "t");
  EXPECT_EQ(ids(*small, "aaaa"), (std::vector<std::int32_t>{0}));  // over max_input_chars_per_word
  const auto uni = make_unigram({"<unk>", "a", "b", "ab"}, {0, -1, -1, -1.5}, 0, false, "t");
  EXPECT_EQ(ids(*uni, "abab"), (std::vector<std::int32_t>{3, 3}));
  EXPECT_EQ(ids(*uni, "a\u00e9\u00e9b"), (std::vector<std::int32_t>{1, 0, 2}));  // unks fused
  const auto wl = make_wordlevel({"<unk>", "hi"}, "<unk>", "t");
  EXPECT_EQ(ids(*wl, "hi"), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(ids(*wl, "yo"), (std::vector<std::int32_t>{0}));
}

TEST(TokDecoders, EachAsHf) {
  EXPECT_EQ(dec(*make_byte_level_decoder(), {"Hello", "\u0120world"}), "Hello world");
  EXPECT_EQ(dec(*make_metaspace_decoder(0x2581, PrependScheme::always), {"\u2581Hey", "\u2581friend"}), "Hey friend");
  EXPECT_EQ(dec(*make_wordpiece_decoder("##", true), {"un", "##aff", "##able", "!"}), "unaffable!");
  EXPECT_EQ(dec(*make_byte_fallback_decoder(), {"a", "<0xC3>", "<0xA9>", "b", "<0xFF>"}), "a\u00e9b\ufffd");
  // a run of bytes that is not UTF-8 as a whole: one U+FFFD per byte, as HF
  EXPECT_EQ(dec(*make_byte_fallback_decoder(), {"<0xC3>", "<0xA9>", "<0xFF>"}), "\ufffd\ufffd\ufffd");
  EXPECT_EQ(dec(*make_fuse_decoder(), {"a", "b"}), "ab");
  EXPECT_EQ(dec(*make_strip_decoder(' ', 1, 0), {"  x"}), " x");
  EXPECT_EQ(dec(*make_replace_decoder("\u2581", "", " "), {"\u2581a\u2581b"}), " a b");
  EXPECT_EQ(dec(*make_bpe_decoder("</w>"), {"hel", "lo</w>", "there</w>"}), "hello there");
  EXPECT_EQ(dec(*make_ctc_decoder("<pad>", "|", true), {"h", "h", "<pad>", "i", "|", "x"}), "hi x");
}

TEST(TokPostProcessors, TemplatesAndBert) {
  Encoding a;
  a.ids = {7, 8};
  a.type_ids = {0, 0};
  a.tokens = {"x", "y"};
  a.offsets = {{0, 1}, {1, 2}};
  a.special_mask = {0, 0};
  a.attention = {1, 1};
  Encoding b = a;
  const auto bert = make_bert_processing({"[SEP]", 3}, {"[CLS]", 2});
  const Encoding p = bert->process(a, &b, true);
  EXPECT_EQ(p.ids, (std::vector<std::int32_t>{2, 7, 8, 3, 7, 8, 3}));
  EXPECT_EQ(p.type_ids, (std::vector<std::int32_t>{0, 0, 0, 0, 1, 1, 1}));
  const auto rob = make_roberta_processing({"</s>", 2}, {"<s>", 0}, false, true);
  EXPECT_EQ(rob->process(a, &b, true).ids, (std::vector<std::int32_t>{0, 7, 8, 2, 2, 7, 8, 2}));
  EXPECT_EQ(bert->process(a, nullptr, false).ids, a.ids);
}

void expect_error(const std::string& json, const std::string& needle) {
  try {
    tfm::Tokenizer::from_json(json);
    ADD_FAILURE() << "no error for " << json;
  } catch (const tfm::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

TEST(TokMalformed, OneLineErrorsNamingTheProblem) {
  const std::string model = R"("model":{"type":"WordLevel","vocab":{"a":0,"<unk>":1},"unk_token":"<unk>"})";
  expect_error(R"({"normalizer":{"type":"Frob"},)" + model + "}",
               "unknown normalizer type 'Frob' (supported: NFC, NFD, NFKC, NFKD, Lowercase");
  expect_error(R"({"decoder":{"type":"Frob"},)" + model + "}", "unknown decoder type 'Frob' (supported: ByteLevel");
  expect_error(R"({"post_processor":{"type":"Frob"},)" + model + "}",
               "unknown post_processor type 'Frob' (supported: TemplateProcessing");
  expect_error(R"({"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(unclosed"},"behavior":"Isolated"},)" + model + "}",
               "regex '(unclosed' does not compile");
  expect_error(R"({"pre_tokenizer":{"type":"Split","pattern":{"String":"x"},"behavior":"Sideways"},)" + model + "}",
               "unknown split behavior 'Sideways'");
  expect_error(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":["a q"]},"pre_tokenizer":{"type":"Whitespace"}})",
               "names unknown token 'q'");
  expect_error(R"({"model":{"type":"WordPiece","vocab":{"a":0,"b":0}}})", "duplicate id 0");
  expect_error(R"({"model":{"type":"WordPiece","vocab":{"[UNK]":0,"b":2}}})", "vocabulary hole: no token has id 1");
  expect_error(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})", "unk_token '[UNK]' is not in the vocabulary");
  expect_error(R"({"added_tokens":[{"id":0,"content":"zz"}],)" + model + "}", "duplicate id 0");
  expect_error(R"({"model":{"type":"Unigram","vocab":[["a"]]}})", "is not [piece, score]");
  expect_error(R"({"normalizer":{"type":"Precompiled","precompiled_charsmap":"AAA="},)" + model + "}",
               "precompiled_charsmap is truncated");
  EXPECT_THROW(Regex("[z-a]", "t"), tfm::Error);
}

TEST(TokPipeline, AddedTokenFlags) {
  const std::string doc = R"({"added_tokens":[
      {"id":3,"content":"<m>","lstrip":true,"rstrip":false,"single_word":false,"normalized":false,"special":true},
      {"id":4,"content":"cat","lstrip":false,"rstrip":false,"single_word":true,"normalized":true,"special":false}],
    "normalizer":{"type":"Lowercase"},"pre_tokenizer":{"type":"WhitespaceSplit"},
    "model":{"type":"WordLevel","vocab":{"<unk>":0,"a":1,"cats":2},"unk_token":"<unk>"}})";
  const auto t = tfm::Tokenizer::from_json(doc);
  EXPECT_EQ(t.encode("a   <m>a"), (std::vector<std::int32_t>{1, 3, 1}));  // lstrip eats the spaces
  EXPECT_EQ(t.encode("CAT cats"), (std::vector<std::int32_t>{4, 2}));     // normalized + single word
  const auto e = t.encode_full("a   <m>a");
  EXPECT_EQ(e.offsets[1], (std::pair<std::uint32_t, std::uint32_t>{1, 7}));
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{1, 3, 1}, true), "a a");
}

}  // namespace

namespace {

TEST(TokWordPieceTrainer, BertPipelineVocabularyAndDeterminism) {
  std::vector<std::string> corpus;
  for (int k = 0; k < 60; ++k) {
    corpus.push_back("The quick brown fox jumps over the lazy dog, again and again: " + std::to_string(k));
    corpus.push_back("Unaffable lads and lasses jumped; foxes were quicker than dogs!");
    corpus.push_back("\u4f60\u597d\u4e16\u754c Caf\u00e9 na\u00efve");
  }
  tfm::TokenizerTrainOptions o;
  o.kind = tfm::TokenizerKind::wordpiece;
  o.vocab_size = 120;
  const auto t = tfm::Tokenizer::train(corpus, o);
  EXPECT_EQ(t.kind(), tfm::TokenizerKind::pipeline);
  EXPECT_EQ(t.vocab_size(), 120);
  EXPECT_EQ(t.id_to_token(1), "[UNK]");
  EXPECT_EQ(t.to_json(), tfm::Tokenizer::train(corpus, o).to_json());  // deterministic
  const auto back = tfm::Tokenizer::from_json(t.to_json());
  for (const auto& line : corpus) {
    const auto ids = t.encode(line, true);
    EXPECT_EQ(ids.front(), 2);  // [CLS]
    EXPECT_EQ(ids.back(), 3);   // [SEP]
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 0) << line;  // every training char is in the alphabet
    EXPECT_EQ(back.encode(line, true), ids);
  }
  // Frequent words become single tokens; the rest are ##-pieces.
  EXPECT_EQ(t.tokenize("the quick"), (V{"the", "quick"}));
  EXPECT_EQ(t.decode(t.encode("the quick brown fox"), true), "the quick brown fox");
  o.vocab_size = 5;
  EXPECT_THROW(tfm::Tokenizer::train(corpus, o), tfm::Error);  // below specials + alphabet
}

}  // namespace
