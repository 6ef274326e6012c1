// The scheduler thread: the only thread that touches the model. It admits generation
// requests into ContinuousBatch slots as they free up (a bounded queue in front), runs one
// batch step at a time, hands each step's text to the waiting HTTP handlers, and runs the
// one-shot jobs (embeddings, classification, translation, attention maps) between steps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "metrics.h"
#include "model_jobs.h"
#include "serve_options.h"
#include "tfm/continuous_batch.h"
#include "tfm/model_dir.h"

namespace tfm::server {

// One piece of a choice's output, as one batch step produced it.
struct ChoiceDelta {
  std::int64_t choice = 0;
  std::string text;
  bool has_token = false;
  std::int32_t token = 0;
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  bool finished = false;
  std::string stop_reason;             // when finished: eos | stop | length | context | cancelled
  std::int64_t completion_tokens = 0;  // when finished
  std::int64_t cached_tokens = 0;      // when finished: prompt tokens the prompt cache gave
  std::chrono::steady_clock::time_point at;  // when the scheduler produced it
};

// A request's generation (n choices of one prompt), shared by its HTTP handler and the scheduler.
struct Generation {
  std::vector<BatchRequest> choices;   // set before submit
  std::int64_t prompt_tokens = 0;

  std::mutex mu;
  std::condition_variable cv;
  std::deque<ChoiceDelta> deltas;      // produced by the scheduler, consumed by the handler
  std::int64_t finished = 0;           // choices finished
  std::string error;                   // set when the server stops or the engine fails
  std::atomic<bool> cancelled{false};  // set by the handler: the client left or timed out
};

class BatchMirror;  // lockstep.h

// The decoding session of `tfm serve` (slots, context, KV cache type from the options, the
// model's defaults), and its speculative decoding (--lookup; a draft model is loaded by
// serve() itself; nullopt: none).
SessionOptions serving_session(const LoadedModel& lm, const ServeOptions& opt);
std::optional<SpeculativeOptions> serving_speculation(const LoadedModel& lm, const ServeOptions& opt);

// The batch serve() decodes with, for a model that generates (else `into` stays empty): slots
// per `so`, the prompt cache (cache_ram_bytes; 0: none), speculative decoding (null: none).
// The other ranks of a model-parallel server build theirs with the same call.
void build_serving_batch(std::optional<ContinuousBatch>& into, LoadedModel& lm, SessionOptions so,
                         std::int64_t prefill_chunk, std::int64_t cache_ram_bytes, const SpeculativeOptions* speculative);

class Scheduler {
 public:
  // cache_ram_bytes: the prompt cache's budget (0: none); speculative: decoding with drafts
  // (null: none); mirror: the other ranks of a model split over processes, told every batch
  // operation (null: none; jobs are then refused).
  Scheduler(LoadedModel& lm, SessionOptions so, std::int64_t prefill_chunk, std::int64_t max_queue, Metrics& metrics,
            std::int64_t cache_ram_bytes = 0, const SpeculativeOptions* speculative = nullptr,
            BatchMirror* mirror = nullptr);
  ~Scheduler();
  bool generates() const { return batch_.has_value(); }
  const ContinuousBatch& batch() const { return *batch_; }
  // The batch to change, inside run_job only (the scheduler thread's).
  ContinuousBatch& batch_for_jobs() { return *batch_; }
  // Queues a generation; false when the queue is full (the caller answers 503).
  bool submit(const std::shared_ptr<Generation>& g);
  // Wakes the scheduler to drop a cancelled generation (its slots free at the next step).
  void cancel(const std::shared_ptr<Generation>& g);
  // Runs fn on the scheduler thread between steps and waits for it (its exception rethrown);
  // one job a step while sequences decode; a 503 ApiError when --queue jobs are waiting.
  // A model split over processes runs only model jobs (fn running `job` through
  // run_model_job: the other ranks run it too); anything else is a 400 there.
  void run_job(const std::function<void()>& fn, const ModelJob* job = nullptr);
  // make(begin, end) over [0, n) in pieces of at most `piece`, each run as its own model job
  // (answer(begin, result)): a request of many inputs lets decode steps run between its pieces.
  void run_job_pieces(std::size_t n, std::size_t piece, JobContext& cx,
                      const std::function<ModelJob(std::size_t, std::size_t)>& make,
                      const std::function<void(std::size_t, JobResult&)>& answer);
  // Cancels everything in flight (handlers see error "server is shutting down") and joins.
  void stop();

 private:
  void loop();
  void dispatch(const std::vector<BatchEvent>& events);
  void drop_cancelled();
  void fail_all(const std::string& message);

  struct Running {                     // one choice in a slot
    std::shared_ptr<Generation> gen;
    std::int64_t choice;
  };
  struct Pending {
    std::shared_ptr<Generation> gen;
    std::size_t next_choice = 0;       // choices before it already admitted
  };

  LoadedModel& lm_;
  std::optional<ContinuousBatch> batch_;
  std::int64_t max_queue_;
  Metrics& metrics_;
  std::mutex mu_;                      // guards pending_, jobs_, stopping_
  std::condition_variable cv_;
  std::deque<Pending> pending_;
  std::deque<std::packaged_task<void()>> jobs_;
  bool stopping_ = false;
  std::int64_t busy_slots_ = 0;        // choices admitted or waiting, not yet finished
  std::atomic<bool> cancel_seen_{false};
  std::vector<std::pair<std::int64_t, Running>> running_;  // engine id -> choice (scheduler thread only)
  BatchMirror* mirror_ = nullptr;
  std::thread thread_;
};

}  // namespace tfm::server
