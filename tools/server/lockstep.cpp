// Lockstep serving for a model split over processes (lockstep.h).
#include "lockstep.h"

#include <optional>

#include "record_bytes.h"
#include "scheduler.h"
#include "tfm/error.h"
#include "tfm/grammar.h"
#include "tfm/load.h"

namespace tfm::server {

using namespace bytes;

// A record is a run of operations: 'A' id request, 'C' id, then 'S' (step), 'J' kind args (a
// job) or 'Q' (quit).

// Every field of BatchRequest and its GenerateOptions (a new field must be added here, or the
// other ranks would decode differently and the sums of a step would not meet).
std::string encode_batch_request(const BatchRequest& r) {
  std::string out;
  put_ids(out, r.prompt);
  const GenerateOptions& o = r.options;
  put(out, o.max_new_tokens);
  const SamplingOptions& s = o.sampling;
  put(out, s.temperature), put(out, s.top_k), put(out, s.top_p), put(out, s.min_p), put(out, s.repeat_penalty);
  put(out, s.repeat_last_n), put(out, s.frequency_penalty), put(out, s.presence_penalty), put(out, s.seed);
  put<std::uint64_t>(out, o.stop.size());
  for (const std::string& stop : o.stop) put_string(out, stop);
  put<std::uint8_t>(out, o.stop_at_eos), put<std::uint8_t>(out, o.context_shift);
  put_ids(out, o.eos_ids);
  put<std::uint8_t>(out, o.grammar != nullptr);
  if (o.grammar) put_string(out, o.grammar->gbnf());
  put_string(out, o.grammar_trigger);
  put(out, r.stream), put(out, r.top_logprobs);
  put<std::uint8_t>(out, r.speculative);
  return out;
}

BatchRequest decode_batch_request(const std::string& in, std::size_t& at) {
  BatchRequest r;
  r.prompt = get_ids(in, at);
  GenerateOptions& o = r.options;
  o.max_new_tokens = get<std::int64_t>(in, at);
  SamplingOptions& s = o.sampling;
  s.temperature = get<double>(in, at), s.top_k = get<std::int64_t>(in, at), s.top_p = get<double>(in, at);
  s.min_p = get<double>(in, at), s.repeat_penalty = get<double>(in, at), s.repeat_last_n = get<std::int64_t>(in, at);
  s.frequency_penalty = get<double>(in, at), s.presence_penalty = get<double>(in, at), s.seed = get<std::uint64_t>(in, at);
  const auto stops = get<std::uint64_t>(in, at);
  TFM_CHECK(stops <= in.size() - at, "serve", "a lockstep record from rank 0 is cut short");
  o.stop.resize(stops);
  for (std::string& stop : o.stop) stop = get_string(in, at);
  o.stop_at_eos = get<std::uint8_t>(in, at) != 0, o.context_shift = get<std::uint8_t>(in, at) != 0;
  o.eos_ids = get_ids(in, at);
  if (get<std::uint8_t>(in, at) != 0) o.grammar = std::make_shared<const Grammar>(Grammar::parse(get_string(in, at), "grammar"));
  o.grammar_trigger = get_string(in, at);
  r.stream = get<std::uint64_t>(in, at), r.top_logprobs = get<std::int64_t>(in, at);
  r.speculative = get<std::uint8_t>(in, at) != 0;
  return r;
}

void LockstepLeader::add(std::int64_t id, const BatchRequest& r) {
  record_ += 'A';
  put(record_, id);
  record_ += encode_batch_request(r);
}

void LockstepLeader::cancel(std::int64_t id) {
  record_ += 'C';
  put(record_, id);
}

void LockstepLeader::step() {
  record_ += 'S';
  send_(record_);
  record_.clear();
}

void LockstepLeader::job(const ModelJob& j) {
  record_ += 'J';
  put_string(record_, j.kind);
  put_string(record_, j.args);
  send_(record_);
  record_.clear();
}

void LockstepLeader::stop() {
  record_ += 'Q';
  send_(record_);
  record_.clear();
}

void follow_lockstep(LoadedModel& lm, const ServeOptions& opt, const std::function<std::string()>& receive) {
  std::optional<ContinuousBatch> batch;
  const std::optional<SpeculativeOptions> spec = serving_speculation(lm, opt);
  build_serving_batch(batch, lm, serving_session(lm, opt), opt.prefill_chunk, opt.cache_ram_mib << 20,
                      spec ? &*spec : nullptr);
  std::unique_ptr<Translator> translator;
  JobContext jobs{lm, opt, translator, batch ? &*batch : nullptr};
  for (;;) {
    const std::string record = receive();
    for (std::size_t at = 0; at < record.size();) {
      const char op = record[at++];
      if (op == 'Q') return;
      if (op == 'J') {
        ModelJob j;
        j.kind = get_string(record, at);
        j.args = get_string(record, at);
        try {
          (void)run_model_job(jobs, j);  // rank 0 answers
        } catch (const std::exception&) {
          // rank 0's run failed alike, before or after the same sums
        }
        continue;
      }
      TFM_CHECK(batch.has_value(), "serve", "rank 0 sent a batch operation for a model that does not generate");
      if (op == 'S') {
        try {
          (void)batch->step();  // rank 0 turns the events into answers
        } catch (const std::exception&) {
          // rank 0's step failed alike: it cancels the batch's requests next
        }
        continue;
      }
      const auto id = get<std::int64_t>(record, at);
      if (op == 'C') {
        batch->cancel(id);
        continue;
      }
      TFM_CHECK(op == 'A', "serve", "unknown lockstep operation '", op, "' from rank 0");
      const std::int64_t mine = batch->add(decode_batch_request(record, at));
      TFM_CHECK(mine == id, "serve", "this rank's batch gave request id ", mine, " where rank 0's gave ", id,
                " (the ranks' batches diverged)");
    }
  }
}

}  // namespace tfm::server
