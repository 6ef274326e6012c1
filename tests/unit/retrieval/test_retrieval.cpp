// src/retrieval and src/infer/sentence_embed.cpp without a model: corpus files, the FAISS
// wrapper (exact answers, round trips, refusals), and the sentence-transformers pipeline's
// files and pooling arithmetic. The PyTorch reference of whole encoders is
// tests/cli/retrieval_commands.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/retrieval.h"
#include "tfm/sentence_embed.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using test::error_message;

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("tfm_retrieval_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path p = path / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
};

TEST(Passages, TextLinesAndJsonLines) {
  TempDir d;
  const auto txt = read_passages(d.write("c.txt", "first line\n\n  \nthird\r\n"));
  ASSERT_EQ(txt.size(), 2u);
  EXPECT_EQ(txt[0].id, "1");
  EXPECT_EQ(txt[1].id, "4");
  EXPECT_EQ(txt[1].text, "third");
  const auto js = read_passages(d.write("c.jsonl", "{\"id\": \"x\", \"text\": \"a\"}\n{\"text\": \"b\", \"id\": 7}\n{\"text\": \"c\"}\n"));
  ASSERT_EQ(js.size(), 3u);
  EXPECT_EQ(js[0].id, "x");
  EXPECT_EQ(js[1].id, "7");
  EXPECT_EQ(js[2].id, "3");
}

TEST(Passages, BadLinesNameFileAndLine) {
  TempDir d;
  EXPECT_NE(error_message([&] { read_passages(d.write("b.jsonl", "{\"text\": \"a\"}\n{\"txt\": 1}\n")); }).find("b.jsonl:2"),
            std::string::npos);
  EXPECT_NE(error_message([&] { read_passages(d.write("j.jsonl", "{\"text\": \n")); }).find("j.jsonl:1] not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_message([&] { read_passages(d.write("u.txt", "ok\nbad \xff byte\n")); }).find("u.txt:2"),
            std::string::npos);
  EXPECT_NE(error_message([&] { read_passages((d.path / "missing.txt").string()); }).find("cannot open"), std::string::npos);
}

// n distinct points (no two equal, so each is its own unique nearest).
std::vector<float> grid(std::int64_t n, std::int64_t dim) {
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < dim; ++k) x[static_cast<std::size_t>(i * dim + k)] = static_cast<float>(std::sin(0.37 * static_cast<double>(i * (k + 1))));
  return x;
}

TEST(VectorIndex, FlatIsExactAndRoundTrips) {
  const std::int64_t n = 300, dim = 8;
  const auto x = grid(n, dim);
  VectorIndex flat(IndexType::flat, dim, /*inner_product=*/false, {}, n);
  flat.add(x.data(), n);
  std::vector<float> scores;
  std::vector<std::int64_t> ids;
  flat.search(x.data() + 42 * dim, 1, 3, scores, ids);
  EXPECT_EQ(ids[0], 42);  // itself, distance 0
  EXPECT_FLOAT_EQ(scores[0], 0.0f);
  EXPECT_LE(scores[1], 0.0f);  // L2: minus the squared distance, best first
  EXPECT_GE(scores[1], scores[2]);
  const VectorIndex back = VectorIndex::deserialize(flat.serialize(), "t", IndexType::flat, {}, dim, false);
  std::vector<float> s2;
  std::vector<std::int64_t> i2;
  back.search(x.data() + 42 * dim, 1, 3, s2, i2);
  EXPECT_EQ(i2, ids);
  EXPECT_EQ(s2, scores);
}

TEST(VectorIndex, HnswAndIvfpqFindThemselves) {
  const std::int64_t n = 2000, dim = 8;
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  std::uint64_t s = 7;
  for (float& v : x) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    v = static_cast<float>((s >> 33) % 1000) / 1000.0f - 0.5f;
  }
  for (IndexType t : {IndexType::hnsw, IndexType::ivfpq}) {
    VectorIndex idx(t, dim, false, {}, n);
    idx.train(x.data(), n);
    idx.add(x.data(), n);
    EXPECT_EQ(idx.size(), n);
    std::vector<float> scores;
    std::vector<std::int64_t> ids;
    idx.search(x.data(), 50, 1, scores, ids);
    int self = 0;
    for (std::int64_t q = 0; q < 50; ++q) self += ids[static_cast<std::size_t>(q)] == q;
    EXPECT_GE(self, 48) << index_type_name(t);
    const VectorIndex back = VectorIndex::deserialize(idx.serialize(), "t", t, idx.settings(), dim, false);
    std::vector<float> s2;
    std::vector<std::int64_t> i2;
    back.search(x.data(), 50, 1, s2, i2);
    EXPECT_EQ(i2, ids) << index_type_name(t);
  }
}

TEST(VectorIndex, Refusals) {
  const auto x = grid(20, 8);
  VectorIndex ivf(IndexType::ivfpq, 8, true, {}, 10);
  EXPECT_NE(error_message([&] { ivf.add(x.data(), 10); }).find("must be trained"), std::string::npos);
  EXPECT_NE(error_message([&] { ivf.train(x.data(), 10); }).find("learns from at least 16 vectors"), std::string::npos);
  EXPECT_NE(error_message([] { VectorIndex::deserialize("not an index", "f.faiss", IndexType::flat, {}, 8, true); }).find("f.faiss"),
            std::string::npos);
  VectorIndex flat(IndexType::flat, 8, true, {}, 20);
  flat.add(x.data(), 20);
  EXPECT_NE(error_message([&] { VectorIndex::deserialize(flat.serialize(), "f", IndexType::ivfpq, {}, 8, true); }).find("another kind"),
            std::string::npos);
  EXPECT_NE(error_message([&] { VectorIndex::deserialize(flat.serialize(), "f", IndexType::flat, {}, 16, true); }).find("index.json names 16"),
            std::string::npos);
  EXPECT_NE(error_message([&] { VectorIndex::deserialize(flat.serialize(), "f", IndexType::flat, {}, 8, false); }).find("compared by inner product"),
            std::string::npos);
  EXPECT_NE(error_message([] { index_type_from_name("annoy"); }).find("flat, hnsw, ivfpq"), std::string::npos);
}

std::string modules(const std::string& types) {
  return "[{\"idx\": 0, \"name\": \"0\", \"path\": \"\", \"type\": \"sentence_transformers.models.Transformer\"}" + types + "]";
}
const char* kPoolingEntry = ", {\"idx\": 1, \"name\": \"1\", \"path\": \"1_Pooling\", \"type\": \"sentence_transformers.models.Pooling\"}";

TEST(SentencePipeline, FilesAndRefusals) {
  TempDir d;
  const std::string dir = d.path.string();
  EXPECT_FALSE(SentencePipeline::load(dir, 4).has_value());
  d.write("modules.json", modules(kPoolingEntry));
  d.write("1_Pooling/config.json", "{\"word_embedding_dimension\": 4, \"pooling_mode_mean_tokens\": true}");
  d.write("sentence_bert_config.json", "{\"max_seq_length\": 9, \"do_lower_case\": true}");
  const auto p = SentencePipeline::load(dir, 4);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->max_seq_length, 9);
  EXPECT_TRUE(p->do_lower_case);
  EXPECT_EQ(p->dimension(), 4);
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 8); }).find("differs from the model's hidden size 8"),
            std::string::npos);
  d.write("1_Pooling/config.json", "{\"word_embedding_dimension\": 4, \"pooling_mode_median\": true}");
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("unknown key 'pooling_mode_median'"),
            std::string::npos);
  d.write("1_Pooling/config.json", "{\"word_embedding_dimension\": 4}");
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("no pooling mode is on"), std::string::npos);
  d.write("modules.json", modules(", {\"idx\": 1, \"path\": \"x\", \"type\": \"sentence_transformers.models.CNN\"}"));
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("module type 'sentence_transformers.models.CNN'"),
            std::string::npos);
  d.write("1_Pooling/config.json", "{\"word_embedding_dimension\": 4, \"pooling_mode_cls_token\": true}");
  d.write("modules.json", modules(std::string(kPoolingEntry) +
                                  ", {\"idx\": 2, \"path\": \"2_Dense\", \"type\": \"sentence_transformers.models.Dense\"}"));
  d.write("2_Dense/config.json", "{\"in_features\": 4, \"out_features\": 2, \"activation_function\": \"torch.nn.modules.activation.Tanh\"}");
  d.write("2_Dense/pytorch_model.bin", "pickle");
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("convert it to model.safetensors"), std::string::npos);
  d.write("2_Dense/config.json", "{\"in_features\": 5, \"out_features\": 2}");
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("in_features 5 but the stage before gives 4"),
            std::string::npos);
  d.write("modules.json", "{\"not\": \"a list\"}");
  EXPECT_NE(error_message([&] { SentencePipeline::load(dir, 4); }).find("expected a list of modules"), std::string::npos);
}

TEST(SentencePipeline, PoolingModesConcatenateInOrder) {
  // One row of 3 valid tokens (of 4 padded) with 2 channels.
  const std::vector<float> h = {1, -1, 3, 0, 2, 5, 100, 100};
  SentencePipeline p;
  p.pooling = {.cls = true, .max = true, .mean = true, .mean_sqrt_len = true, .weighted_mean = true, .last_token = true,
               .include_prompt = true, .word_dimension = 2};
  const auto v = p.apply(h, 4, 2, {3}, {0})[0];
  const std::vector<float> want = {1, -1,                                  // cls
                                   3, 5,                                   // max
                                   2, 4.0f / 3,                            // mean
                                   6 / std::sqrt(3.0f), 4 / std::sqrt(3.0f),  // mean / sqrt(n)
                                   (1 + 6 + 6) / 6.0f, (-1 + 0 + 15) / 6.0f,  // weights 1, 2, 3
                                   2, 5};                                  // last
  ASSERT_EQ(v.size(), want.size());
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], want[i], 1e-6) << i;
  // include_prompt false: the first skip tokens leave the mean.
  SentencePipeline q;
  q.pooling = {.mean = true, .include_prompt = false, .word_dimension = 2};
  q.normalize = true;
  const auto m = q.apply(h, 4, 2, {3}, {1})[0];
  EXPECT_NEAR(m[0], 2.5 / std::sqrt(2.5 * 2.5 + 2.5 * 2.5), 1e-6);
  std::vector<std::vector<float>> vecs = {{3, 4, 12}};
  truncate_embeddings(vecs, 2, true);
  EXPECT_NEAR(vecs[0][0], 0.6, 1e-6);
  EXPECT_NEAR(vecs[0][1], 0.8, 1e-6);
  EXPECT_NE(error_message([&] { truncate_embeddings(vecs, 3, false); }).find("more than the model's 2"), std::string::npos);
}

}  // namespace
}  // namespace tfm
