// RETRO's chunk database (Borgeaud et al. 2022, section 2.3): a token stream cut into chunks of
// m tokens, each kept with its continuation (r tokens from the chunk's start), and searched by a
// frozen encoder. The encoder here is lexical: a chunk's hashed token n-grams (1 .. max_ngram,
// embedding_dim buckets) weighted by the database's rounded inverse document frequencies. Its
// numbers are small integers, so every dot product is exact in f32 whatever the GEMM's order,
// and a chunk finds the same neighbours alone or in any batch (cached generation retrieves a
// chunk at a time, training and evaluation a batch at a time). docs/retrieval.md says why this
// encoder and not a neural one.
//
//   ChunkDatabase db(tokens, cfg.retrieval);          // tokens: the training split
//   Tensor n = db.search(chunks);                      // (N, m) ids -> (N, k, r) neighbour ids
//   model.set_retriever(db.retriever());
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tfm/model.h"
#include "tfm/model_config.h"

namespace tfm {

// A RETRO model directory's chunk database (load_model_dir attaches it as the retriever).
inline constexpr const char* kRetrievalDbFile = "retrieval_db.safetensors";

class ChunkDatabase {
 public:
  // Chunks start at 0, m, 2m, ... while r tokens remain from the start.
  ChunkDatabase(std::vector<std::int32_t> tokens, const RetrievalConfig& cfg);

  std::int64_t chunks() const;
  const std::vector<std::int32_t>& tokens() const;
  const RetrievalConfig& config() const;

  // The k best chunks' neighbours (N, k, r) i64 for chunks (N, m) of token ids, best first
  // (cosine of the lexical vectors; ties to the earlier chunk). exclude[i] = [begin, end): row i
  // skips every database chunk whose r tokens overlap that span of the stream (training: the
  // sequence's own text). `positions`, when given, receives each neighbour's start (N * k).
  Tensor search(const Tensor& chunks, const std::vector<std::pair<std::int64_t, std::int64_t>>& exclude = {},
                std::vector<std::int64_t>* positions = nullptr) const;

  // retrieval_db.safetensors in a model directory: the tokens (i32) and the settings, which
  // load() checks against the model's.
  void save(const std::string& path) const;
  std::string serialize() const;  // the file's bytes
  static ChunkDatabase load(const std::string& path, const RetrievalConfig& cfg);
  // search() as a Model::Retriever (shares this database's data).
  Model::Retriever retriever() const;

 private:
  struct State;  // shared: copies of a database (and its retrievers) share its vectors
  std::shared_ptr<const State> state_;
};

}  // namespace tfm
