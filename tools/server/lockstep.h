// Serving a model split over processes (mpirun -np N tfm serve --tensor-parallel N, or
// --pipeline-parallel N; docs/server.md): rank 0 serves HTTP and runs the scheduler; every
// other rank holds its shard or stage and repeats rank 0's batch operations in the same order,
// so that the partial sums (or activations) of each step meet. Rank 0's scheduler records each
// operation on the batch — a request added, one cancelled, a step — and hands the record to
// the others before the step; they apply it to a batch built as rank 0's. The jobs of the
// endpoints outside the batch (embeddings, classification, reranking, translation,
// transcription, of texts, pictures and audio: model_jobs.h) travel the same way, each run by
// every rank where rank 0 runs it, and so do attention maps, rollouts and word timestamps
// (the ranks' captured attention meets on every rank) and the prompt cache's saves, restores
// and erasures (each rank's file holds its part).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model_jobs.h"
#include "serve_options.h"
#include "tfm/continuous_batch.h"
#include "tfm/model_dir.h"

namespace tfm::server {

// What the scheduler tells the other ranks (null in a single process).
class BatchMirror {
 public:
  virtual ~BatchMirror() = default;
  virtual void add(std::int64_t id, const BatchRequest& r) = 0;  // after batch.add gave id
  virtual void cancel(std::int64_t id) = 0;
  virtual void step() = 0;  // before batch.step: sends what was recorded, then the step
  virtual void job(const ModelJob& j) = 0;  // before running j: sends what was recorded, then j
  virtual void stop() = 0;  // the server is done: the other ranks return
};

// Rank 0's side: `send` hands one record (the operations since the last one) to every other
// rank.
class LockstepLeader : public BatchMirror {
 public:
  explicit LockstepLeader(std::function<void(const std::string&)> send) : send_(std::move(send)) {}
  void add(std::int64_t id, const BatchRequest& r) override;
  void cancel(std::int64_t id) override;
  void step() override;
  void job(const ModelJob& j) override;
  void stop() override;

 private:
  std::function<void(const std::string&)> send_;
  std::string record_;
};

// Another rank's side: builds the batch as serve() does for rank 0 and applies each record
// `receive` gives (it blocks for rank 0's next) until rank 0 stops, running each job as rank 0
// does (its answer dropped; a job that fails here fails on rank 0 alike). Fails when its batch
// gives another id than rank 0's (the two would have diverged).
void follow_lockstep(LoadedModel& lm, const ServeOptions& opt, const std::function<std::string()>& receive);

// The bytes of a request and back (every field of BatchRequest; a grammar as its GBNF source).
std::string encode_batch_request(const BatchRequest& r);
BatchRequest decode_batch_request(const std::string& bytes, std::size_t& at);

}  // namespace tfm::server
