// RETRO's chunk database: the lexical encoder, exact search over the database's bucket rows
// (a query reads only its non-zero buckets'), and the file (include/tfm/chunk_database.h).
#include "tfm/chunk_database.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {

struct ChunkDatabase::State {
  RetrievalConfig cfg;
  std::vector<std::int32_t> tokens;
  std::int64_t chunks = 0;
  std::vector<float> idf;       // per bucket: round(ln(chunks / df)), at least 1
  // (D, chunks) f32 small integers: bucket-major, so a query, which has at most
  // max_ngram * m non-zero buckets of D, reads only those rows.
  std::vector<float> columns;
  std::vector<float> inv_norm;  // 1 / |vector|, 0 for an empty one

  // A chunk's n-gram counts per bucket (FNV-1a over the n-gram's ids and n), times idf when given.
  std::vector<float> counts(const std::int64_t* ids, const std::vector<float>* weights) const {
    const std::int64_t m = cfg.chunk_size, D = cfg.embedding_dim;
    std::vector<float> v(static_cast<std::size_t>(D), 0.0f);
    for (std::int64_t n = 1; n <= cfg.max_ngram && n <= m; ++n)
      for (std::int64_t i = 0; i + n <= m; ++i) {
        std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint64_t>(n);
        for (std::int64_t j = 0; j < n; ++j) {
          h = (h ^ static_cast<std::uint64_t>(ids[i + j])) * 1099511628211ull;
          h = (h ^ (h >> 29)) * 1099511628211ull;
        }
        v[static_cast<std::size_t>(h % static_cast<std::uint64_t>(D))] += 1.0f;
      }
    if (weights != nullptr)
      for (std::size_t b = 0; b < v.size(); ++b) v[b] *= (*weights)[b];
    return v;
  }
};

namespace {

constexpr const char* kWhere = "chunk database";

std::int64_t max_weight(std::int64_t chunks) {
  return std::max<std::int64_t>(1, std::llround(std::log(static_cast<double>(std::max<std::int64_t>(chunks, 1)))));
}

}  // namespace

ChunkDatabase::ChunkDatabase(std::vector<std::int32_t> tokens, const RetrievalConfig& cfg) {
  auto s = std::make_shared<State>();
  s->cfg = cfg;
  s->tokens = std::move(tokens);
  const std::int64_t m = cfg.chunk_size, r = cfg.length(), D = cfg.embedding_dim;
  TFM_CHECK(cfg.enabled(), kWhere, "the model has no retrieval block");
  const auto n = static_cast<std::int64_t>(s->tokens.size());
  s->chunks = n >= r ? (n - r) / m + 1 : 0;
  TFM_CHECK(s->chunks >= cfg.neighbours, kWhere, "a stream of ", n, " tokens holds ", s->chunks, " chunks of ", m,
            " tokens with ", r, " to read; the model reads ", cfg.neighbours, " neighbours");
  // Every dot product must stay an exact f32 integer: |x . q| <= sum(x) * max(q) < 2^24.
  const std::int64_t w = max_weight(s->chunks), grams = cfg.max_ngram * m;
  TFM_CHECK(grams * w * m * w < (std::int64_t{1} << 24), kWhere, "chunks of ", m, " tokens with n-grams up to ",
            cfg.max_ngram, " are too long for exact lexical scores; use shorter chunks or a smaller max_ngram");
  // Counts straight into the bucket-major rows, then each bucket's IDF, then each chunk's norm.
  const std::int64_t N = s->chunks;
  s->columns.assign(static_cast<std::size_t>(N * D), 0.0f);
  std::vector<std::int64_t> df(static_cast<std::size_t>(D), 0), ids(static_cast<std::size_t>(m));
  for (std::int64_t c = 0; c < N; ++c) {
    for (std::int64_t i = 0; i < m; ++i) ids[static_cast<std::size_t>(i)] = s->tokens[static_cast<std::size_t>(c * m + i)];
    const std::vector<float> v = s->counts(ids.data(), nullptr);
    for (std::int64_t b = 0; b < D; ++b) {
      s->columns[static_cast<std::size_t>(b * N + c)] = v[static_cast<std::size_t>(b)];
      df[static_cast<std::size_t>(b)] += v[static_cast<std::size_t>(b)] > 0.0f ? 1 : 0;
    }
  }
  s->idf.resize(static_cast<std::size_t>(D));
  std::vector<double> sq(static_cast<std::size_t>(N), 0.0);
  for (std::int64_t b = 0; b < D; ++b) {
    const double d = static_cast<double>(std::max<std::int64_t>(df[static_cast<std::size_t>(b)], 1));
    const auto weight = static_cast<float>(std::max<std::int64_t>(1, std::llround(std::log(static_cast<double>(N) / d))));
    s->idf[static_cast<std::size_t>(b)] = weight;
    float* row = s->columns.data() + b * N;
    for (std::int64_t c = 0; c < N; ++c) {
      row[c] *= weight;
      sq[static_cast<std::size_t>(c)] += static_cast<double>(row[c]) * row[c];
    }
  }
  s->inv_norm.resize(static_cast<std::size_t>(N));
  for (std::int64_t c = 0; c < N; ++c)
    s->inv_norm[static_cast<std::size_t>(c)] =
        sq[static_cast<std::size_t>(c)] > 0.0 ? static_cast<float>(1.0 / std::sqrt(sq[static_cast<std::size_t>(c)])) : 0.0f;
  state_ = std::move(s);
}

std::int64_t ChunkDatabase::chunks() const { return state_->chunks; }
const std::vector<std::int32_t>& ChunkDatabase::tokens() const { return state_->tokens; }
const RetrievalConfig& ChunkDatabase::config() const { return state_->cfg; }

Tensor ChunkDatabase::search(const Tensor& chunks, const std::vector<std::pair<std::int64_t, std::int64_t>>& exclude,
                             std::vector<std::int64_t>* positions) const {
  const State& s = *state_;
  const std::int64_t m = s.cfg.chunk_size, r = s.cfg.length(), k = s.cfg.neighbours, D = s.cfg.embedding_dim;
  TFM_CHECK(chunks.defined() && chunks.dim() == 2 && chunks.size(1) == m && !dtype_is_float(chunks.dtype()), kWhere,
            "queries must be (N, ", m, ") token ids, got ", chunks.defined() ? chunks.str() : std::string("nothing"));
  const std::int64_t N = chunks.size(0);
  TFM_CHECK(exclude.empty() || static_cast<std::int64_t>(exclude.size()) == N, kWhere, exclude.size(),
            " excluded spans for ", N, " queries");
  const std::vector<std::int64_t> ids = chunks.to_ints();
  std::vector<std::int64_t> out(static_cast<std::size_t>(N * k * r));
  if (positions != nullptr) positions->assign(static_cast<std::size_t>(N * k), 0);
  std::vector<std::int64_t> found_of(static_cast<std::size_t>(N), 0);
  // Each query on its own thread: its scores are sums over its few non-zero buckets of
  // bucket rows, exact integers in any order, so the answer never depends on the batch.
#pragma omp parallel
  {
    std::vector<float> score(static_cast<std::size_t>(s.chunks));
    std::vector<std::int64_t> order(static_cast<std::size_t>(s.chunks));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < N; ++i) {
      const std::vector<float> q = s.counts(ids.data() + i * m, &s.idf);
      std::fill(score.begin(), score.end(), 0.0f);
      for (std::int64_t b = 0; b < D; ++b) {
        const float w = q[static_cast<std::size_t>(b)];
        if (w == 0.0f) continue;
        const float* col = s.columns.data() + b * s.chunks;
        for (std::int64_t c = 0; c < s.chunks; ++c) score[static_cast<std::size_t>(c)] += w * col[c];
      }
      for (std::int64_t c = 0; c < s.chunks; ++c) score[static_cast<std::size_t>(c)] *= s.inv_norm[static_cast<std::size_t>(c)];
      std::int64_t a = 0, b = 0;
      if (!exclude.empty()) std::tie(a, b) = exclude[static_cast<std::size_t>(i)];
      // Enough candidates that k survive the excluded span's overlapping chunks.
      const std::int64_t overlapping = b > a ? (b - a + r) / m + 2 : 0;
      const std::int64_t want = std::min(s.chunks, k + overlapping);
      std::iota(order.begin(), order.end(), std::int64_t{0});
      const auto better = [&](std::int64_t x, std::int64_t y) {
        const float cx = score[static_cast<std::size_t>(x)], cy = score[static_cast<std::size_t>(y)];
        return cx != cy ? cx > cy : x < y;
      };
      std::nth_element(order.begin(), order.begin() + (want - 1), order.end(), better);
      std::sort(order.begin(), order.begin() + want, better);
      std::int64_t found = 0;
      for (std::int64_t j = 0; j < want && found < k; ++j) {
        const std::int64_t c = order[static_cast<std::size_t>(j)], start = c * m;
        if (start < b && start + r > a) continue;  // overlaps the excluded span
        for (std::int64_t t = 0; t < r; ++t)
          out[static_cast<std::size_t>((i * k + found) * r + t)] = s.tokens[static_cast<std::size_t>(start + t)];
        if (positions != nullptr) (*positions)[static_cast<std::size_t>(i * k + found)] = start;
        ++found;
      }
      found_of[static_cast<std::size_t>(i)] = found;
    }
  }
  for (std::int64_t i = 0; i < N; ++i)
    TFM_CHECK(found_of[static_cast<std::size_t>(i)] == k, kWhere, "query ", i, " found ", found_of[static_cast<std::size_t>(i)],
              " neighbours outside its excluded span; the model reads ", k, " (the database holds ", s.chunks, " chunks)");
  return Tensor::from_ints(out, {N, k, r});
}

void ChunkDatabase::save(const std::string& path) const { write_file_atomic(path, serialize()); }

std::string ChunkDatabase::serialize() const {
  const State& s = *state_;
  Tensor tokens = Tensor::empty({static_cast<std::int64_t>(s.tokens.size())}, DType::i32);
  std::copy(s.tokens.begin(), s.tokens.end(), tokens.data<std::int32_t>());
  return serialize_safetensors({{"tokens", tokens}},
                   {{"format", "tfm-retro-chunks"},
                    {"chunk_size", std::to_string(s.cfg.chunk_size)},
                    {"neighbour_length", std::to_string(s.cfg.length())},
                    {"embedding_dim", std::to_string(s.cfg.embedding_dim)},
                    {"max_ngram", std::to_string(s.cfg.max_ngram)}});
}

ChunkDatabase ChunkDatabase::load(const std::string& path, const RetrievalConfig& cfg) {
  const SafetensorsFile f = load_safetensors(path);
  const auto meta = [&](const char* key) {
    const auto it = f.metadata.find(key);
    TFM_CHECK(it != f.metadata.end(), path, "no '", key, "' in the metadata: not a RETRO chunk database");
    return it->second;
  };
  TFM_CHECK(meta("format") == "tfm-retro-chunks", path, "format '", meta("format"), "' is not tfm-retro-chunks");
  const std::pair<const char*, std::int64_t> settings[] = {{"chunk_size", cfg.chunk_size},
                                                           {"neighbour_length", cfg.length()},
                                                           {"embedding_dim", cfg.embedding_dim},
                                                           {"max_ngram", cfg.max_ngram}};
  for (const auto& [key, want] : settings)
    TFM_CHECK(meta(key) == std::to_string(want), path, "was built with ", key, " ", meta(key), "; the model's is ", want);
  const auto it = f.tensors.find("tokens");
  TFM_CHECK(it != f.tensors.end() && it->second.dim() == 1 && it->second.dtype() == DType::i32, path,
            "needs a 1-D i32 tensor 'tokens'");
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(it->second.numel()));
  const auto* d = it->second.data<std::int32_t>();
  std::copy(d, d + it->second.numel(), tokens.begin());
  return ChunkDatabase(std::move(tokens), cfg);
}

Model::Retriever ChunkDatabase::retriever() const {
  return [db = *this](const Tensor& chunks) { return db.search(chunks); };
}

}  // namespace tfm
