// Retrieval: a corpus of passages embedded by an encoder and searched through a FAISS index.
//
// An index directory holds, each written atomically and checked when opened:
//   index.json      what built it: the encoder (its path, model type, dimension and the vector it
//                   gives a fixed probe text, so another encoder is refused), the index type and
//                   settings, the count, each file's size and checksum, the measured recall@10
//                   against exact search and the query latency
//   passages.jsonl  {"id": ..., "text": ...} per passage, in vector order
//   vectors.f32     the embeddings, little-endian f32, count x dimension (kept so that --add and
//                   the recall measurement need no re-embedding)
//   index.faiss     the FAISS index over them (faiss::write_index's format)
// A build appends passages and vectors in checkpoints (index.json records how far it got), so
// an interrupted build resumes where its last checkpoint ended.
//
//   tfm::IndexBuildOptions o;  o.type = tfm::IndexType::hnsw;
//   tfm::build_index(encoder, "runs/encoder", tfm::read_passages("corpus.txt"), "idx", o);
//   tfm::PassageIndex idx = tfm::PassageIndex::open("idx");
//   for (const auto& hit : idx.search(encoder, {"who wrote it?"}, 5)[0]) ... hit.text, hit.score
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm {

struct Passage {
  std::string id, text;
};
// A corpus file: .jsonl (an object per line with "text" and optionally "id"; ids default to the
// line number) or any other file as text, one passage per non-empty line (id: its line number).
// Errors name the file and the line.
std::vector<Passage> read_passages(const std::string& path);

enum class IndexType { flat, hnsw, ivfpq };
IndexType index_type_from_name(const std::string& name);  // "flat" | "hnsw" | "ivfpq"
const char* index_type_name(IndexType t);

// The index's parameters. 0 picks the default: HNSW M 32, efConstruction 80, efSearch 128;
// IVF-PQ nlist ~ 4 sqrt(n) (at most n / 39), PQ sub-vectors of 2 numbers (dimension / 2, rounded
// to a divisor) of 8 bits, nprobe nlist / 4, and the top 10k re-ranked by exact distance
// (IndexRefineFlat): recall@10 0.98 on tests/cli/retrieval_commands.sh's corpus, where 4-number
// sub-vectors and 4k re-ranked gave 0.42.
struct IndexSettings {
  std::int64_t hnsw_m = 0, ef_construction = 0, ef_search = 0;
  std::int64_t nlist = 0, pq_m = 0, nprobe = 0, refine = 0;
};

// A FAISS index over vectors of one dimension; inner product (the vectors are unit length
// when the encoder's similarity is cosine) or L2.
class VectorIndex {
 public:
  VectorIndex(IndexType type, std::int64_t dim, bool inner_product, IndexSettings settings, std::int64_t expected_count);
  ~VectorIndex();
  VectorIndex(VectorIndex&&) noexcept;
  VectorIndex& operator=(VectorIndex&&) noexcept;

  // IVF-PQ learns its clusters and codebooks from `n` vectors before any add; the others need no
  // training. Too few vectors for the settings is an error naming the minimum.
  void train(const float* x, std::int64_t n);
  void add(const float* x, std::int64_t n);
  std::int64_t size() const;
  std::int64_t dimension() const { return dim_; }
  IndexType type() const { return type_; }
  const IndexSettings& settings() const { return settings_; }
  // k best of each of nq queries: scores (higher is closer; L2 gives minus the squared
  // distance) and ids (-1 where fewer than k exist), each nq x k row-major.
  void search(const float* q, std::int64_t nq, std::int64_t k, std::vector<float>& scores,
              std::vector<std::int64_t>& ids) const;
  std::string serialize() const;
  // bytes as serialize() wrote them, checked against the dimension and metric index.json records.
  static VectorIndex deserialize(const std::string& bytes, const std::string& where, IndexType type,
                                 IndexSettings settings, std::int64_t dim, bool inner_product);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  IndexType type_ = IndexType::flat;
  std::int64_t dim_ = 0;
  bool inner_product_ = true;
  IndexSettings settings_;
};

struct IndexBuildOptions {
  IndexType type = IndexType::flat;
  IndexSettings settings;
  std::int64_t batch = 32;              // passages a forward pass
  std::int64_t checkpoint = 1024;       // passages between checkpoints
  bool add = false;                     // append to an existing index (same encoder)
  bool resume = true;                   // continue an interrupted build of the same corpus
  EmbedOptions embed;                   // the passages' prompt (e.g. a "document" prompt name)
  // Progress: passages done and in all, after each batch.
  std::function<void(std::int64_t done, std::int64_t total)> progress;
};

struct IndexReport {
  std::int64_t count = 0, added = 0, resumed_from = 0;
  double recall_at_10 = 1.0;  // approximate vs exact on up to 200 stored vectors as queries
  double query_ms = 0;        // mean time of one query's search (not its embedding)
};

// Embeds `passages` with `encoder` (loaded from encoder_path, which index.json records) into
// the index directory `dir`, created when absent. With o.add, the directory's index grows;
// otherwise an existing complete index is an error (the caller removes it).
IndexReport build_index(LoadedModel& encoder, const std::string& encoder_path, const std::vector<Passage>& passages,
                        const std::string& dir, const IndexBuildOptions& o);

struct SearchHit {
  std::int64_t index = 0;  // row in the index
  std::string id, text;
  float score = 0;
};

class PassageIndex {
 public:
  // Reads and checks every file (sizes, checksums, count, dimension): a damaged directory is
  // a one-line error naming the file.
  static PassageIndex open(const std::string& dir);
  // Whether dir holds an index whose build finished (false: none, or one to resume).
  static bool complete(const std::string& dir);
  const std::string& encoder_path() const { return encoder_path_; }
  std::int64_t size() const { return static_cast<std::int64_t>(passages_.size()); }
  const std::vector<Passage>& passages() const { return passages_; }
  // Refuses an encoder whose vector for the probe text differs from the one recorded.
  void check_encoder(LoadedModel& encoder) const;
  std::vector<std::vector<SearchHit>> search(LoadedModel& encoder, const std::vector<std::string>& queries,
                                             std::int64_t k, const EmbedOptions& embed = {}) const;
  const VectorIndex& index() const { return *index_; }

 private:
  std::string dir_, encoder_path_;
  std::vector<float> probe_;
  bool normalize_ = true;
  std::vector<Passage> passages_;
  std::shared_ptr<VectorIndex> index_;
};

// ---- retrieval-augmented prompts ----------------------------------------------------------
// The passages put before a prompt through a Jinja template (rendered by tfm/chat_template.h)
// that sees `documents` (a list of {"id", "text", "score"}) and `prompt`. The default numbers
// the passages, one a line, then a blank line and the prompt.
const std::string& default_retrieval_template();
std::string retrieval_prompt(const std::string& prompt, const std::vector<SearchHit>& hits,
                             const std::string& jinja_template = default_retrieval_template());
// For chat templates that read `documents` (Command R's, Granite's...): the hits as Hugging
// Face's RAG convention passes them ({"title": id, "text": ...}).
nlohmann::ordered_json chat_documents(const std::vector<SearchHit>& hits);
bool template_reads_documents(std::string_view chat_template);
// Fusion-in-Decoder: one retrieved passage joined with the input into one encoder part, by a
// Jinja template over `prompt` and `document` ({"id", "text", "score"}); the default is
// "question: {{ prompt }} context: {{ document.text }}" (tfm translate --retrieve, data.fusion).
const std::string& default_fusion_template();
std::string fusion_part(const std::string& prompt, const SearchHit& hit,
                        const std::string& jinja_template = default_fusion_template());

}  // namespace tfm
