// Scheduler: admission, batch steps and jobs on one thread (scheduler.h).
#include "scheduler.h"

#include <algorithm>

#include "api_error.h"
#include "lockstep.h"

namespace tfm::server {

void build_serving_batch(std::optional<ContinuousBatch>& into, LoadedModel& lm, SessionOptions so,
                         std::int64_t prefill_chunk, std::int64_t cache_ram_bytes, const SpeculativeOptions* speculative) {
  const ModelConfig& c = lm.model.config();
  if (c.architecture != Architecture::decoder_only || c.head != HeadKind::lm) return;
  into.emplace(lm.model, lm.tokenizer, so, prefill_chunk);
  into->enable_prompt_cache(cache_ram_bytes);
  if (speculative) into->enable_speculative(*speculative);
}

Scheduler::Scheduler(LoadedModel& lm, SessionOptions so, std::int64_t prefill_chunk, std::int64_t max_queue,
                     Metrics& metrics, std::int64_t cache_ram_bytes, const SpeculativeOptions* speculative,
                     BatchMirror* mirror)
    : lm_(lm), max_queue_(max_queue), metrics_(metrics), mirror_(mirror) {
  build_serving_batch(batch_, lm, so, prefill_chunk, cache_ram_bytes, speculative);
  if (batch_) metrics_.slots_total = batch_->slots();
  thread_ = std::thread([this] { loop(); });
}

Scheduler::~Scheduler() { stop(); }

bool Scheduler::submit(const std::shared_ptr<Generation>& g) {
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "server_error", "shutting_down", "the server is shutting down");
    // A request starts at once when slots are free for all its choices; otherwise it waits,
    // if fewer than --queue requests are waiting already.
    const auto n = static_cast<std::int64_t>(g->choices.size());
    const bool room = busy_slots_ + n <= batch_->slots() || static_cast<std::int64_t>(pending_.size()) < max_queue_;
    if (!room) {
      ++metrics_.rejected_queue_full;
      return false;
    }
    busy_slots_ += n;
    pending_.push_back({g, 0});
    metrics_.queue_length = static_cast<std::int64_t>(pending_.size());
  }
  cv_.notify_one();
  return true;
}

void Scheduler::cancel(const std::shared_ptr<Generation>& g) {
  g->cancelled = true;
  {
    std::lock_guard lk(mu_);
    cancel_seen_ = true;
  }
  cv_.notify_one();
}

void Scheduler::run_job(const std::function<void()>& fn, const ModelJob* job) {
  // The other ranks of a split model repeat batch operations and model jobs only: any other
  // model call would wait for partial sums they never send. (On pipeline stages the jobs read
  // the last stage's output, which comes back to every stage.)
  if (mirror_ != nullptr && job == nullptr)
    throw ApiError(400, "invalid_request_error", "unsupported",
                   "this is not served by a model split over processes (--tensor-parallel, --pipeline-parallel)");
  std::packaged_task<void()> task([this, fn, mirrored = job != nullptr ? std::optional<ModelJob>(*job) : std::nullopt] {
    if (mirror_ != nullptr) mirror_->job(*mirrored);  // the other ranks run it alongside
    fn();
  });
  auto done = task.get_future();
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "server_error", "shutting_down", "the server is shutting down");
    // Jobs wait in the same bounded way as generations (--queue): past it, a 503.
    if (static_cast<std::int64_t>(jobs_.size()) >= max_queue_)
      throw ApiError(503, "server_error", "queue_full", "the job queue is full; retry later");
    jobs_.push_back(std::move(task));
  }
  cv_.notify_one();
  try {
    done.get();
  } catch (const std::future_error&) {  // dropped unrun at shutdown
    throw ApiError(503, "server_error", "shutting_down", "the server is shutting down");
  }
}

void Scheduler::run_job_pieces(std::size_t n, std::size_t piece, JobContext& cx,
                               const std::function<ModelJob(std::size_t, std::size_t)>& make,
                               const std::function<void(std::size_t, JobResult&)>& answer) {
  for (std::size_t begin = 0; begin < n; begin += piece) {
    const ModelJob job = make(begin, std::min(n, begin + piece));
    JobResult r;
    run_job([&] { r = run_model_job(cx, job); }, &job);
    answer(begin, r);
  }
}

void Scheduler::stop() {
  {
    std::lock_guard lk(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::fail_all(const std::string& message) {
  std::vector<std::shared_ptr<Generation>> gens;
  for (auto& [id, r] : running_) gens.push_back(r.gen);
  {
    std::lock_guard lk(mu_);
    for (auto& p : pending_) gens.push_back(p.gen);
    pending_.clear();
    jobs_.clear();
    busy_slots_ = 0;
  }
  for (const auto& [id, r] : running_)
    if (batch_) {
      batch_->cancel(id);
      if (mirror_) mirror_->cancel(id);
    }
  running_.clear();
  for (const auto& g : gens) {
    std::lock_guard lk(g->mu);
    if (g->error.empty()) g->error = message;
    g->cv.notify_all();
  }
}

void Scheduler::drop_cancelled() {
  for (auto it = running_.begin(); it != running_.end();) {
    if (!it->second.gen->cancelled) {
      ++it;
      continue;
    }
    batch_->cancel(it->first);
    if (mirror_) mirror_->cancel(it->first);
    ++metrics_.cancelled;
    {
      std::lock_guard lk(mu_);
      --busy_slots_;
    }
    it = running_.erase(it);
  }
}

void Scheduler::dispatch(const std::vector<BatchEvent>& events) {
  const auto now = std::chrono::steady_clock::now();
  for (const BatchEvent& e : events) {
    const auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& r) { return r.first == e.id; });
    if (it == running_.end()) continue;
    Generation& g = *it->second.gen;
    ChoiceDelta d;
    d.choice = it->second.choice;
    d.text = e.text;
    d.has_token = e.has_token;
    d.token = e.token;
    d.chosen = e.chosen;
    d.top = e.top;
    d.at = now;
    if (e.has_token) ++metrics_.generated_tokens;
    if (e.finished) {
      d.finished = true;
      d.stop_reason = e.result.stop_reason;
      d.completion_tokens = static_cast<std::int64_t>(e.result.tokens.size());
      d.cached_tokens = e.result.cached_tokens;
      running_.erase(it);
      std::lock_guard lk(mu_);
      --busy_slots_;
    }
    std::lock_guard lk(g.mu);
    if (d.finished) ++g.finished;
    g.deltas.push_back(std::move(d));
    g.cv.notify_all();
  }
}

void Scheduler::loop() {
  for (;;) {
    std::deque<std::packaged_task<void()>> jobs;
    {
      std::unique_lock lk(mu_);
      cv_.wait(lk, [&] {
        return stopping_ || !jobs_.empty() || cancel_seen_ ||
               (batch_ && (!batch_->idle() || (!pending_.empty() && batch_->has_free_slot())));
      });
      if (stopping_) break;
      cancel_seen_ = false;
      // While sequences decode, one job a step, so a long run of jobs (a request's chunks, many
      // requests) cannot stall the streams; when idle, every job waiting.
      if (batch_ && !batch_->idle() && !jobs_.empty()) {
        jobs.push_back(std::move(jobs_.front()));
        jobs_.pop_front();
      } else {
        jobs.swap(jobs_);
      }
      // Admit waiting choices into free slots: they join the batch at this step.
      while (batch_ && !pending_.empty() && batch_->has_free_slot()) {
        Pending& p = pending_.front();
        if (p.gen->cancelled) {
          busy_slots_ -= static_cast<std::int64_t>(p.gen->choices.size() - p.next_choice);
          pending_.pop_front();
          continue;
        }
        const auto c = static_cast<std::int64_t>(p.next_choice);
        const std::int64_t id = batch_->add(p.gen->choices[p.next_choice]);
        if (mirror_) mirror_->add(id, p.gen->choices[p.next_choice]);
        metrics_.prompt_tokens += p.gen->choices[p.next_choice].prompt.size();
        running_.push_back({id, Running{p.gen, c}});
        if (++p.next_choice == p.gen->choices.size()) pending_.pop_front();
      }
      metrics_.queue_length = static_cast<std::int64_t>(pending_.size());
    }
    for (auto& job : jobs) job();  // a job's exception goes to its future
    if (!batch_) continue;
    drop_cancelled();
    metrics_.slots_busy = batch_->active();
    if (!batch_->idle()) {
      try {
        if (mirror_) mirror_->step();
        const std::vector<BatchEvent> events = batch_->step();
        ++metrics_.steps;
        // Before the handlers hear of a finish, so /metrics never lags what a client has seen.
        metrics_.slots_busy = batch_->active();
        metrics_.spec_drafted = batch_->speculative_stats().drafted;
        metrics_.spec_accepted = batch_->speculative_stats().accepted;
        metrics_.spec_rounds = batch_->speculative_stats().rounds;
        metrics_.spec_steps = batch_->speculative_stats().steps;
        dispatch(events);
      } catch (const std::exception& e) {
        fail_all(std::string("generation failed: ") + e.what());
      }
    }
    metrics_.slots_busy = batch_->active();
  }
  fail_all("the server is shutting down");
  if (mirror_) mirror_->stop();
}

}  // namespace tfm::server
