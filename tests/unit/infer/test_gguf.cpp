// GGUF reader/writer: round trips (bit-exact for f32), and malformed files, each refused
// with one error naming the file, the key or tensor, and the rule — never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>

#include "support/test_support.h"
#include "support/train_helpers.h"
#include "tfm/gguf_model.h"
#include "tfm/quantize.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

// Little-endian byte builder for hand-made headers.
struct Bytes {
  std::string s;
  template <class T>
  Bytes& put(T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  Bytes& str(const std::string& x) {
    put<std::uint64_t>(x.size());
    s += x;
    return *this;
  }
};

// A valid file: one u32 key, one F32 tensor "w" of ne = [4, 2] (torch shape (2, 4)).
Bytes header(std::uint32_t version = 3, std::uint64_t n_tensors = 1, std::uint64_t n_kv = 1) {
  Bytes b;
  b.s = "GGUF";
  b.put<std::uint32_t>(version).put<std::uint64_t>(n_tensors).put<std::uint64_t>(n_kv);
  return b;
}
std::string valid_file(std::uint64_t ne0 = 4, std::uint32_t type = 0, std::uint64_t offset = 0) {
  Bytes b = header();
  b.str("general.architecture").put<std::uint32_t>(8).str("llama");
  b.str("w").put<std::uint32_t>(2).put<std::uint64_t>(ne0).put<std::uint64_t>(2).put<std::uint32_t>(type).put<std::uint64_t>(offset);
  b.s.append((32 - b.s.size() % 32) % 32, '\0');
  for (int i = 0; i < 8; ++i) b.put<float>(static_cast<float>(i) * 0.5f);
  return b.s;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_gguf(bytes, "bad.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::string& bytes, const std::string& rule) {
  const std::string e = error_of(bytes);
  EXPECT_NE(e.find("bad.gguf"), std::string::npos) << e;
  EXPECT_NE(e.find(rule), std::string::npos) << "got: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

}  // namespace

TEST(Gguf, ValidHandMadeFileParses) {
  const GgufFile f = parse_gguf(valid_file(), "ok.gguf");
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors[0].shape(), (Shape{2, 4}));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.to_f32(f.tensors[0]).to_floats()[7], 3.5f);
}

TEST(Gguf, MalformedHeadersAreRefusedNamingTheRule) {
  std::string s = valid_file();
  s[0] = 'X';
  expect_refused(s, "magic");
  expect_refused(header(1).s, "version 1 is not supported");
  expect_refused(header(0x03000000u).s, "big-endian");
  expect_refused(header(7).s, "unknown GGUF version 7");
  expect_refused(header(3, 1ull << 60, 0).s, "tensor count");
  expect_refused(header(3, 0, 1ull << 62).s, "metadata count");
  Bytes b = header(3, 0, 1);
  b.put<std::uint64_t>(~0ull);  // key length 2^64 - 1
  b.s.append(16, '\0');
  expect_refused(b.s, "metadata key #0");
  Bytes arr = header(3, 0, 1);
  arr.str("a").put<std::uint32_t>(9).put<std::uint32_t>(8).put<std::uint64_t>(1ull << 61);  // 2^61 strings
  expect_refused(arr.s, "key 'a': array of");
  Bytes nested = header(3, 0, 1);
  nested.str("a").put<std::uint32_t>(9).put<std::uint32_t>(9).put<std::uint64_t>(1);
  expect_refused(nested.s, "nested arrays");
  Bytes type = header(3, 0, 1);
  type.str("a").put<std::uint32_t>(13);
  expect_refused(type.s, "unknown value type 13");
  Bytes dup = header(3, 0, 2);
  dup.str("a").put<std::uint32_t>(4).put<std::uint32_t>(1).str("a").put<std::uint32_t>(4).put<std::uint32_t>(2);
  expect_refused(dup.s, "key 'a' appears twice");
  Bytes align = header(3, 0, 1);
  align.str("general.alignment").put<std::uint32_t>(4).put<std::uint32_t>(24);
  expect_refused(align.s, "not a power of two");
  Bytes boolean = header(3, 0, 1);
  boolean.str("b").put<std::uint32_t>(7).put<std::uint8_t>(2);
  expect_refused(boolean.s, "must be 0 or 1");
}

TEST(Gguf, MalformedTensorInfosAreRefusedNamingTheTensor) {
  auto tensor_file = [](std::uint32_t n_dims, std::vector<std::uint64_t> ne, std::uint32_t type, std::uint64_t off) {
    Bytes b = header(3, 1, 0);
    b.str("w").put<std::uint32_t>(n_dims);
    for (auto d : ne) b.put<std::uint64_t>(d);
    b.put<std::uint32_t>(type).put<std::uint64_t>(off);
    b.s.append((32 - b.s.size() % 32) % 32, '\0');
    b.s.append(64, '\0');
    return b.s;
  };
  expect_refused(tensor_file(5, {1, 1, 1, 1, 1}, 0, 0), "tensor 'w': n_dims 5");
  expect_refused(tensor_file(2, {0, 4}, 0, 0), "tensor 'w': ne[0] = 0");
  expect_refused(tensor_file(4, {1ull << 40, 1ull << 40, 1, 1}, 0, 0), "tensor 'w'");
  expect_refused(tensor_file(1, {16}, 99, 0), "tensor 'w': tensor type type 99 is not supported");
  expect_refused(tensor_file(1, {256}, 10, 0), "Q2_K is not supported");
  expect_refused(tensor_file(1, {100}, 12, 0), "row length ne[0] = 100 is not a multiple of Q4_K's block of 256");
  expect_refused(tensor_file(1, {4}, 0, 3), "offset 3 is not a multiple of the alignment 32");
  expect_refused(tensor_file(1, {17}, 0, 0), "run past the end");                   // 68 bytes, 64 present
  expect_refused(tensor_file(1, {64}, 0, ~0ull - 31), "overflows 64 bits");         // offset + size wraps
  Bytes name = header(3, 1, 0);
  name.str(std::string(64, 'n'));
  expect_refused(name.s, "exceeds the limit of 63 bytes");
  Bytes dup = header(3, 2, 0);
  for (int i = 0; i < 2; ++i) dup.str("w").put<std::uint32_t>(1).put<std::uint64_t>(4).put<std::uint32_t>(0).put<std::uint64_t>(0);
  expect_refused(dup.s, "tensor 'w' appears twice");
}

// Every prefix of a valid file is refused with an error (never a crash or an overrun:
// the ASan run of the unit tests checks the reads).
TEST(Gguf, EveryTruncationIsRefused) {
  const std::string s = valid_file();
  for (std::size_t n = 0; n < s.size(); ++n) EXPECT_FALSE(error_of(s.substr(0, n)).empty()) << "prefix " << n;
  EXPECT_TRUE(error_of(s).empty());
}

TEST(Gguf, WriterRoundTripsF32BitExactAndEncodesF16Bf16Q8_0) {
  const std::string path = ::testing::TempDir() + "gguf_writer_roundtrip.gguf";
  const Tensor a = test::random_tensor({3, 64}, 1, -4.0f, 4.0f);
  const Tensor v = test::random_tensor({7}, 2);
  std::vector<std::pair<std::string, GgufValue>> meta = {
      {"general.architecture", GgufValue::string("test")}, {"x.f", GgufValue::f32(0.25f)},
      {"x.list", GgufValue::string_array({"a", "", "\xe2\x96\x81" "b"})}, {"x.ids", GgufValue::i32_array({-1, 5})}};
  write_gguf(path, meta,
             {{"a.f32", a, GgmlType::f32}, {"a.f16", a, GgmlType::f16}, {"a.bf16", a, GgmlType::bf16},
              {"a.q8", a, GgmlType::q8_0}, {"v", v, GgmlType::f32}},
             64);
  const GgufFile f = read_gguf(path);
  EXPECT_EQ(f.alignment, 64u);
  EXPECT_EQ(f.get_float("x.f", 0), 0.25);
  EXPECT_EQ(f.find("x.list")->strings, (std::vector<std::string>{"a", "", "\xe2\x96\x81" "b"}));
  EXPECT_EQ(f.find("x.ids")->ints, (std::vector<std::int64_t>{-1, 5}));
  test::expect_bitwise_equal(f.to_f32(*f.find_tensor("a.f32")), a, "f32");
  test::expect_bitwise_equal(f.to_f32(*f.find_tensor("v")), v, "1-d f32");
  test::expect_close(f.to_f32(*f.find_tensor("a.f16")), a, 1e-3, 1e-3, "f16");
  test::expect_close(f.to_f32(*f.find_tensor("a.bf16")), a, 8e-3, 1e-2, "bf16");
  // Q8_0: each value within half a quantization step (max|block| / 254) of the original.
  test::expect_close(f.to_f32(*f.find_tensor("a.q8")), a, 0.0, 4.0 / 254 * 1.01, "q8_0");
  EXPECT_EQ(ggml_type_name(f.find_tensor("a.q8")->type), "Q8_0");
  EXPECT_THROW(write_gguf(path, {}, {{"odd", Tensor::zeros({2, 31}), GgmlType::q8_0}}), Error);
  EXPECT_THROW(write_gguf(path, {}, {{"nan", Tensor::full({1, 32}, NAN), GgmlType::q8_0}}), Error);
}

// Ours -> GGUF -> ours: a GPT-2-family model with a trained byte-level BPE tokenizer is
// bit-exact in f32 (weights and logits), and its tokenizer encodes the same ids.
TEST(Gguf, Gpt2ModelAndTokenizerRoundTripBitExact) {
  ModelConfig c = parse_model_config(
      R"({"model_type": "gpt2", "vocab_size": 300, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 32})", "t");
  Model m = Model::create(c, 7);
  TokenizerTrainOptions o;
  o.vocab_size = 300;
  const Tokenizer tok = Tokenizer::train({"the quick brown fox jumps over the lazy dog", "hello world, hello there"}, o);
  const std::string path = ::testing::TempDir() + "gguf_gpt2_roundtrip.gguf";
  save_gguf_model(path, m, tok);
  LoadedModel b = load_gguf_model(path);
  EXPECT_EQ(b.config.model_type, "gpt2");
  for (const auto& [name, t] : m.parameters()) test::expect_bitwise_equal(b.model.parameters().at(name), t, name);
  for (const char* text : {"the lazy fox", "hello, world!", "unseen words \xc3\xa9t\xc3\xa9"})
    EXPECT_EQ(b.tokenizer.encode(text), tok.encode(text)) << text;
  EXPECT_EQ(b.tokenizer.eos_id(), tok.eos_id());
  // f16 and q8_0 files load too (kept in their type), within their precision.
  for (GgmlType t : {GgmlType::f16, GgmlType::q8_0}) {
    save_gguf_model(path, m, tok, {t, "tiny", "{{ messages }}"});
    GgufModelInfo info;
    LoadedModel q = load_gguf_model(path, &info);
    EXPECT_EQ(info.name, "tiny");
    EXPECT_EQ(info.chat_template, "{{ messages }}");
    // Kept in the file's type at load (stored (out, in)); widened back to f32 (in, out) to compare.
    EXPECT_EQ(q.model.parameters().at("transformer.h.0.mlp.c_fc.weight").dtype(),
              t == GgmlType::f16 ? DType::f16 : DType::q8_0);
    dequantize_model(q.model);
    const Tensor w = m.parameters().at("transformer.h.0.mlp.c_fc.weight");
    test::expect_close(q.model.parameters().at("transformer.h.0.mlp.c_fc.weight"), w, 0.0,
                       t == GgmlType::f16 ? 1e-4 : 2e-3, ggml_type_name(static_cast<std::uint32_t>(t)));
  }
}

TEST(Gguf, UnsupportedArchitecturesAndModelsAreRefused) {
  const std::string path = ::testing::TempDir() + "gguf_arch.gguf";
  write_gguf(path, {{"general.architecture", GgufValue::string("mamba")}}, {{"w", Tensor::zeros({2}), GgmlType::f32}});
  try {
    load_gguf_model(path);
    FAIL() << "mamba accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'mamba' is not supported"), std::string::npos) << e.what();
  }
  ModelConfig c = model_preset("vaswani");
  c.vocab_size = 50; c.d_model = 16; c.n_heads = 2; c.d_ff = 32; c.n_layers = 1;
  TokenizerTrainOptions o;
  o.vocab_size = 270;
  EXPECT_THROW(save_gguf_model(path, Model::create(c, 1), Tokenizer::train({"a b c"}, o)), Error);
  // A BPE tokenizer without a pre-tokenizer (Llama 2's tokenizer.json has "pre_tokenizer":
  // null): the writer's rule in one line, not a JSON library's exception.
  const Tokenizer spm_like = Tokenizer::from_json(R"({"version": "1.0", "added_tokens": [], "normalizer": null,
      "pre_tokenizer": null, "post_processor": null, "decoder": null,
      "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})");
  ModelConfig g = parse_model_config(
      R"({"model_type": "gpt2", "vocab_size": 3, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 8})", "t");
  const std::string e = train_test::expect_error([&] { save_gguf_model(path, Model::create(g, 1), spm_like); });
  EXPECT_NE(e.find("only byte-level BPE tokenizers"), std::string::npos) << e;
}

// Random byte corruptions of a real model file (header, metadata, tensor infos): each one
// loads or is refused with tfm::Error — no crash, no read outside the file (ASan run).
TEST(Gguf, RandomCorruptionsLoadOrAreRefused) {
  ModelConfig c = parse_model_config(
      R"({"model_type": "llama", "vocab_size": 270, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 16})", "t");
  TokenizerTrainOptions o;
  o.vocab_size = 270;
  const std::string path = ::testing::TempDir() + "gguf_corrupt_src.gguf";
  save_gguf_model(path, Model::create(c, 3), Tokenizer::train({"abc abd abe"}, o));
  std::ifstream in(path, std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const GgufFile ref = parse_gguf(good, "x");
  const std::size_t header_end = static_cast<std::size_t>(ref.data_offset);
  std::uint64_t state = 12345;
  auto next = [&] { return state = state * 6364136223846793005ull + 1442695040888963407ull, state >> 33; };
  int loaded = 0, refused = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    const int flips = 1 + static_cast<int>(next() % 4);
    for (int k = 0; k < flips; ++k) bad[next() % header_end] = static_cast<char>(next() & 0xff);
    try {
      const GgufFile f = parse_gguf(bad, "corrupt.gguf");
      for (const auto& t : f.tensors) f.to_f32(t);
      gguf_to_model(f);
      ++loaded;
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_EQ(loaded + refused, 300);
  EXPECT_GT(refused, 0);
}

// Models in the engine's own scheme whose components are GPT-2's or Llama's are written under
// that family's names and compute the same logits after the round trip; others are refused.
TEST(Gguf, EngineSchemeModelsExportAsTheirFamily) {
  TokenizerTrainOptions o;
  o.vocab_size = 280;
  const Tokenizer tok = Tokenizer::train({"the quick brown fox", "jumps over the lazy dog"}, o);
  const char* gpt2_like = R"({"model_type": "transformer", "architecture": "decoder_only", "vocab_size": 280,
      "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64, "max_positions": 32, "activation": "gelu_tanh",
      "position": "learned", "norm": "layer_norm", "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0})";
  const char* llama_like = R"({"model_type": "transformer", "architecture": "decoder_only", "vocab_size": 280,
      "d_model": 32, "n_heads": 4, "n_kv_heads": 2, "n_layers": 2, "d_ff": 48, "max_positions": 32, "activation": "swiglu",
      "position": "rope", "norm": "rms_norm", "bias": false, "tie_embeddings": false, "dropout": 0.0,
      "attention_dropout": 0.0, "embedding_dropout": 0.0})";
  const std::string path = ::testing::TempDir() + "gguf_engine_scheme.gguf";
  for (const auto& [json, family] : {std::pair{gpt2_like, "gpt2"}, std::pair{llama_like, "llama"}}) {
    Model m = Model::create(parse_model_config(json, family), 5);
    save_gguf_model(path, m, tok);
    LoadedModel b = load_gguf_model(path);
    EXPECT_EQ(b.config.model_type, family);
    ModelInputs in;
    in.input_ids = Tensor::from_ints({3, 70, 101, 200, 9, 44, 2}, {1, 7});
    test::expect_close(b.model.forward(in).logits, m.forward(in).logits, 1e-5, 1e-6, family);
  }
  ModelConfig gelu = parse_model_config(gpt2_like, "gelu");
  gelu.activation = FfnActivation::gelu;  // erf GELU: llama.cpp's gpt2 has the tanh form only
  try {
    save_gguf_model(path, Model::create(gelu, 1), tok);
    FAIL() << "erf-GELU model written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("match neither GPT-2"), std::string::npos) << e.what();
  }
}

// A model file whose tensors disagree with its metadata names the GGUF tensor.
TEST(Gguf, TensorsThatDisagreeWithTheMetadataAreNamed) {
  ModelConfig c = parse_model_config(
      R"({"model_type": "llama", "vocab_size": 270, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
          "num_attention_heads": 2, "max_position_embeddings": 16})", "t");
  TokenizerTrainOptions o;
  o.vocab_size = 270;
  const std::string path = ::testing::TempDir() + "gguf_meta.gguf";
  save_gguf_model(path, Model::create(c, 3), Tokenizer::train({"abc abd abe"}, o));
  GgufFile f = read_gguf(path);
  auto error_with = [&](const std::function<void(GgufFile&)>& edit) {
    GgufFile g = f;
    edit(g);
    try {
      gguf_to_model(g);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_with([](GgufFile& g) {
              for (auto& [k, v] : g.metadata)
                if (k == "llama.feed_forward_length") v.i = 48;
            }).find("tensor 'blk.0.ffn_gate.weight' has shape (32,16), the metadata implies (48,16)"),
            std::string::npos);
  EXPECT_NE(error_with([](GgufFile& g) { g.tensors.erase(g.tensors.begin() + 3); }).find("is missing"),
            std::string::npos);
  EXPECT_NE(error_with([](GgufFile& g) {
              for (auto& [k, v] : g.metadata)
                if (k == "llama.rope.dimension_count") v.i = 4;
            }).find("partial rotary"),
            std::string::npos);
}
