// RETRO (model_type "retro"): the "retrieval" block's parsing and errors, the chunk database's
// search (the chunk itself first, excluded spans, batch-independent answers, the file), chunked
// cross-attention's causality, and cached generation retrieving as chunks complete, equal to the
// uncached forward (prefill, steps, rows of different lengths, a roll-back that rewrites a chunk,
// beam reordering). PyTorch parity of the forward and gradients: tests/parity/test_parity_retro.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "support/test_support.h"
#include "support/train_helpers.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig tiny_retro() {
  ModelConfig c;
  c.model_type = "retro";
  c.architecture = Architecture::decoder_only;
  c.vocab_size = 37; c.d_model = 16; c.n_heads = 2; c.n_layers = 3; c.d_ff = 24; c.max_positions = 64;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.0;
  c.retrieval.chunk_size = 4;
  c.retrieval.neighbours = 2;
  c.retrieval.layers = {0, 2};
  c.retrieval.encoder_layers = 1;
  c.retrieval.embedding_dim = 64;
  return c;
}

// A stream with repeats, so lexical neighbours are not ties: id = 3 + (i * 7 + i * i / 5) % 34.
std::vector<std::int32_t> stream(std::int64_t n, std::int64_t salt = 0) {
  std::vector<std::int32_t> v;
  for (std::int64_t i = 0; i < n; ++i) v.push_back(static_cast<std::int32_t>(3 + (i * 7 + i * i / 5 + salt) % 34));
  return v;
}

Tensor row(const std::vector<std::int32_t>& s, std::int64_t from, std::int64_t n) {
  std::vector<std::int64_t> v(s.begin() + from, s.begin() + from + n);
  return Tensor::from_ints(v, {1, n});
}

std::string error_of(const std::function<void()>& f) { return test::error_message(f); }

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const Tensor x = contiguous(a), y = contiguous(b);
  float d = 0.0f;
  for (std::int64_t i = 0; i < x.numel(); ++i) d = std::max(d, std::abs(x.data<float>()[i] - y.data<float>()[i]));
  return d;
}

}  // namespace

TEST(RetroConfig, ParsesRoundTripsAndRefusesBadBlocks) {
  const ModelConfig c = parse_model_config(R"({"model_type": "retro", "n_layers": 4,
    "retrieval": {"chunk_size": 16, "neighbours": 3, "layers": [1, 3], "encoder_layers": 1}})", "cfg");
  EXPECT_TRUE(c.retrieval.enabled());
  EXPECT_EQ(c.retrieval.length(), 32) << "default: the chunk and its continuation";
  EXPECT_EQ(c.retrieval.layers, (std::vector<std::int64_t>{1, 3}));
  const ModelConfig back = parse_model_config(model_config_to_json(c), "round trip");
  EXPECT_EQ(model_config_to_json(back), model_config_to_json(c));
  const auto parse = [](const std::string& t) { return [t] { (void)parse_model_config(t, "cfg.json"); }; };
  EXPECT_NE(error_of(parse(R"({"model_type": "retro", "retrieval": {"layers": [0]}})")).find("chunk_size"), std::string::npos);
  EXPECT_NE(error_of(parse(R"({"model_type": "retro", "n_layers": 2, "retrieval": {"chunk_size": 4, "layers": [2]}})"))
                .find("names layer 2"), std::string::npos);
  EXPECT_NE(error_of(parse(R"({"model_type": "retro", "retrieval": {"chunk_size": 4, "layers": [0], "stride": 1}})"))
                .find("retrieval.stride"), std::string::npos);
  EXPECT_NE(error_of(parse(R"({"model_type": "retro", "max_positions": 8, "retrieval": {"chunk_size": 8, "layers": [0]}})"))
                .find("neighbour_length 16 exceeds max_positions 8"), std::string::npos);
  EXPECT_NE(error_of(parse(R"({"model_type": "retro", "architecture": "encoder_only", "head": "classifier",
                               "retrieval": {"chunk_size": 4, "layers": [0]}})")).find("decoder-only"), std::string::npos);
  EXPECT_NE(error_of(parse(R"({"model_type": "transformer", "retrieval": {"chunk_size": 4, "layers": [0]}})"))
                .find("unknown key 'retrieval'"), std::string::npos) << "the block belongs to the retro family";
  // Without its block a retro model is the plain decoder (tfm train --no-retrieval).
  ModelConfig plain = tiny_retro();
  plain.retrieval = RetrievalConfig{};
  for (const ParamSpec& s : parameter_specs(plain)) EXPECT_EQ(s.name.find("cca"), std::string::npos) << s.name;
  std::size_t cca = 0, retriever = 0;
  for (const ParamSpec& s : parameter_specs(tiny_retro())) {
    cca += s.name.find(".cca.") != std::string::npos;
    retriever += s.name.rfind("retriever.", 0) == 0;
  }
  EXPECT_EQ(cca, 2u * 8u) << "q, k, v, o weights and biases in 2 layers";
  EXPECT_GT(retriever, 0u);
}

TEST(ChunkDatabase, FindsTheChunkFirstHonoursExclusionAndAnswersAloneAsInABatch) {
  RetrievalConfig rc = tiny_retro().retrieval;
  const std::vector<std::int32_t> s = stream(400);
  const ChunkDatabase db(s, rc);
  EXPECT_EQ(db.chunks(), (400 - 8) / 4 + 1);
  std::vector<std::int64_t> q;
  for (std::int64_t j : {5, 40, 77})
    for (std::int64_t t = 0; t < 4; ++t) q.push_back(s[static_cast<std::size_t>(j * 4 + t)]);
  const Tensor queries = Tensor::from_ints(q, {3, 4});
  std::vector<std::int64_t> pos;
  const Tensor n = db.search(queries, {}, &pos);
  ASSERT_EQ(n.shape(), (Shape{3, 2, 8}));
  EXPECT_EQ(pos[0], 20);
  EXPECT_EQ(pos[2], 160);
  EXPECT_EQ(pos[4], 308);
  const auto nv = n.to_ints();
  for (std::int64_t t = 0; t < 8; ++t) EXPECT_EQ(nv[static_cast<std::size_t>(t)], s[static_cast<std::size_t>(20 + t)]) << "the chunk and its continuation";
  // Excluding a span drops every chunk whose 8 tokens overlap it.
  std::vector<std::int64_t> ex_pos;
  (void)db.search(queries, {{10, 40}, {150, 175}, {0, 1}}, &ex_pos);
  for (std::size_t i = 0; i < ex_pos.size(); ++i) {
    const std::pair<std::int64_t, std::int64_t> span = i < 2 ? std::pair<std::int64_t, std::int64_t>{10, 40}
                                                  : i < 4 ? std::pair<std::int64_t, std::int64_t>{150, 175}
                                                          : std::pair<std::int64_t, std::int64_t>{0, 1};
    EXPECT_FALSE(ex_pos[i] < span.second && ex_pos[i] + 8 > span.first) << "neighbour at " << ex_pos[i];
  }
  EXPECT_EQ(ex_pos[4], 308) << "an exclusion elsewhere changes nothing";
  // Each query alone gets what it got in the batch (scores are exact integers).
  for (std::int64_t i = 0; i < 3; ++i)
    test::expect_bitwise_equal(db.search(slice(queries, 0, i, i + 1)), slice(n, 0, i, i + 1), "alone");
  // The file: same answers after a round trip; other settings and short streams refused.
  const std::string path = train_test::tmp_dir("retro_db") + "/retrieval_db.safetensors";
  db.save(path);
  test::expect_bitwise_equal(ChunkDatabase::load(path, rc).search(queries), n, "reloaded");
  RetrievalConfig other = rc;
  other.chunk_size = 5;
  EXPECT_NE(error_of([&] { (void)ChunkDatabase::load(path, other); }).find("chunk_size 4"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)ChunkDatabase(stream(9), rc); }).find("reads 2 neighbours"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)db.search(Tensor::from_ints({1, 2, 3}, {1, 3})); }).find("(N, 4)"), std::string::npos);
}

TEST(RetroModel, ChunkedCrossAttentionIsCausal) {
  Model m = Model::create(tiny_retro(), 5);
  m.set_retriever(ChunkDatabase(stream(400), m.config().retrieval).retriever());
  NoGradGuard ng;
  const std::vector<std::int32_t> s = stream(30, 11);
  ModelInputs a;
  a.input_ids = row(s, 0, 14);
  const Tensor base = m.forward(a).logits;
  // Other neighbours change only the positions after the first chunk.
  ModelInputs b = a;
  std::vector<std::int64_t> other(static_cast<std::size_t>(3 * 2 * 8));
  for (std::size_t i = 0; i < other.size(); ++i) other[i] = static_cast<std::int64_t>(3 + i % 30);
  b.neighbours = Tensor::from_ints(other, {1, 3, 2, 8});
  const Tensor with_other = m.forward(b).logits;
  test::expect_bitwise_equal(slice(with_other, 1, 0, 4), slice(base, 1, 0, 4), "chunk 0 reads no neighbours");
  EXPECT_GT(max_abs_diff(slice(with_other, 1, 4, 14), slice(base, 1, 4, 14)), 1e-3);
  // A token changed at position 6 (chunk 1) changes nothing before it, though chunk 1's
  // neighbours change: chunk 2 reads them.
  std::vector<std::int64_t> ids = a.input_ids.to_ints();
  ids[6] = ids[6] == 5 ? 6 : 5;
  ModelInputs c = a;
  c.input_ids = Tensor::from_ints(ids, {1, 14});
  const Tensor changed = m.forward(c).logits;
  test::expect_bitwise_equal(slice(changed, 1, 0, 6), slice(base, 1, 0, 6), "before the change");
  // Without neighbours or a database: one clear error.
  Model bare = Model::create(tiny_retro(), 5);
  EXPECT_NE(error_of([&] { (void)bare.forward(a); }).find("retrieval_db.safetensors"), std::string::npos);
  ModelInputs bad = a;
  bad.neighbours = Tensor::from_ints(std::vector<std::int64_t>(other.begin(), other.begin() + 24), {1, 3, 1, 8});  // k = 1
  EXPECT_NE(error_of([&] { (void)bare.forward(bad); }).find("(B, L, k, r)"), std::string::npos);
}

TEST(RetroModel, CachedDecodingRetrievesAsChunksCompleteAndEqualsTheForward) {
  Model m = Model::create(tiny_retro(), 9);
  m.set_retriever(ChunkDatabase(stream(500), m.config().retrieval).retriever());
  NoGradGuard ng;
  const std::vector<std::int32_t> s = stream(40, 3), t = stream(40, 17);
  const auto uncached = [&](const std::vector<std::int32_t>& seq, std::int64_t n) {
    ModelInputs in;
    in.input_ids = row(seq, 0, n);
    return m.forward(in).logits;  // (1, n, V)
  };
  const Tensor want_s = uncached(s, 23), want_t = uncached(t, 23);
  KVCache cache(m.config(), 3, 32);
  // Slot 0: a prefill of 6 (a chunk and a half), then a token at a time.
  const Tensor pre = m.decode_cached(row(s, 0, 6), {0}, cache, true);
  test::expect_close(pre, slice(want_s, 1, 0, 6), 1e-4, 1e-5, "prefill");
  // Slot 1: a prefill of 9 beside it; then both step together at different lengths.
  (void)m.decode_cached(row(t, 0, 9), {1}, cache);
  for (std::int64_t p = 6; p < 23; ++p) {
    std::vector<std::int64_t> ids{s[static_cast<std::size_t>(p)]};
    std::vector<std::int64_t> slots{0};
    const std::int64_t q = p + 3;  // slot 1's position
    if (q < 23) {
      ids.push_back(t[static_cast<std::size_t>(q)]);
      slots.push_back(1);
    }
    const Tensor got = m.decode_cached(Tensor::from_ints(ids, {static_cast<std::int64_t>(ids.size()), 1}), slots, cache);
    test::expect_close(slice(got, 0, 0, 1), squeeze(slice(want_s, 1, p, p + 1), 1), 1e-4, 1e-5, "slot 0 at " + std::to_string(p));
    if (q < 23)
      test::expect_close(slice(got, 0, 1, 2), squeeze(slice(want_t, 1, q, q + 1), 1), 1e-4, 1e-5, "slot 1 at " + std::to_string(q));
  }
  // A roll-back into chunk 2 (speculative decoding's rejection), then other tokens: chunk 2's
  // neighbours are retrieved again for its new text.
  cache.set_length(0, 10);
  std::vector<std::int32_t> u(s.begin(), s.begin() + 10);
  for (std::int64_t i = 0; i < 10; ++i) u.push_back(t[static_cast<std::size_t>(20 + i)]);
  const Tensor again = m.decode_cached(row(u, 10, 10), {0}, cache, true);
  test::expect_close(again, slice(uncached(u, 20), 1, 10, 20), 1e-4, 1e-5, "after the roll-back");
  // Speculative decoding's pattern: several tokens scored at once, the length set back and then
  // forward a token at a time as drafts are kept; the kept tokens stay the slot's.
  const std::int64_t L = cache.length(0);  // 20
  const std::vector<std::int32_t> draft{9, 11, 13};
  for (std::int32_t d : draft) u.push_back(d);
  (void)m.decode_cached(row(u, L, 3), {0}, cache, true);
  cache.set_length(0, L + 1);
  cache.set_length(0, L + 2);  // two drafts kept, the third rejected
  u.resize(static_cast<std::size_t>(L + 2));
  u.push_back(5);
  const Tensor after = m.decode_cached(row(u, L + 2, 1), {0}, cache);
  test::expect_close(after, squeeze(slice(uncached(u, L + 3), 1, L + 2, L + 3), 1), 1e-4, 1e-5, "after kept drafts");
  cache.set_length(0, L);
  u.resize(static_cast<std::size_t>(L));
  // Beam reordering copies a slot's tokens and neighbours with its keys and values.
  cache.reorder({0, 0, 1});
  const Tensor next = m.decode_cached(Tensor::from_ints({7, 7}, {2, 1}), {0, 1}, cache);
  u.push_back(7);
  test::expect_close(slice(next, 0, 1, 2), squeeze(slice(uncached(u, 21), 1, 20, 21), 1), 1e-4, 1e-5, "reordered copy");
  // A cache filled without its tokens (another model's rows) cannot be continued.
  KVCache other(m.config(), 1, 32);
  other.set_length(0, 5);
  EXPECT_NE(error_of([&] { (void)m.decode_cached(row(s, 5, 1), {0}, other); }).find("RETRO saw 0"), std::string::npos);
}
