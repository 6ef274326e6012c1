// Prometheus text for GET /metrics (metrics.h).
#include "metrics.h"

#include <cstdio>

namespace tfm::server {

void Histogram::observe(double seconds) {
  std::lock_guard lk(mu_);
  for (std::size_t i = 0; i < kBounds.size(); ++i)
    if (seconds <= kBounds[i]) ++counts_[i];
  ++total_;
  sum_ += seconds;
}

std::string Histogram::text(const std::string& name, const std::string& help) const {
  std::lock_guard lk(mu_);
  std::string s = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  char buf[160];
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s_bucket{le=\"%g\"} %llu\n", name.c_str(), kBounds[i], static_cast<unsigned long long>(counts_[i]));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name.c_str(),
                static_cast<unsigned long long>(total_), name.c_str(), sum_, name.c_str(), static_cast<unsigned long long>(total_));
  return s + buf;
}

std::string Metrics::text() const {
  std::string s;
  auto line = [&](const char* name, const char* type, const char* help, long long v) {
    s += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + std::to_string(v) + "\n";
  };
  line("tfm_requests_total", "counter", "HTTP requests answered", static_cast<long long>(requests.load()));
  line("tfm_requests_failed_total", "counter", "HTTP requests answered with status >= 400", static_cast<long long>(requests_failed.load()));
  line("tfm_requests_rejected_queue_full_total", "counter", "generation requests turned away with 503 (queue full)",
       static_cast<long long>(rejected_queue_full.load()));
  line("tfm_choices_cancelled_total", "counter", "sequences cancelled (client disconnected or timed out)", static_cast<long long>(cancelled.load()));
  line("tfm_prompt_tokens_total", "counter", "prompt tokens prefilled", static_cast<long long>(prompt_tokens.load()));
  line("tfm_tokens_generated_total", "counter", "tokens generated", static_cast<long long>(generated_tokens.load()));
  line("tfm_batch_steps_total", "counter", "scheduler batch steps", static_cast<long long>(steps.load()));
  line("tfm_slots_busy", "gauge", "slots decoding or prefilling", slots_busy.load());
  line("tfm_slots_total", "gauge", "slots (--parallel)", slots_total.load());
  line("tfm_queue_length", "gauge", "generation requests waiting for a slot", queue_length.load());
  line("tfm_speculative_drafted_tokens_total", "counter", "tokens drafted (--lookup, --draft-model)", spec_drafted.load());
  line("tfm_speculative_accepted_tokens_total", "counter", "drafted tokens the model kept", spec_accepted.load());
  line("tfm_speculative_rounds_total", "counter", "speculative rounds (a slot's draft scored and judged)", spec_rounds.load());
  line("tfm_speculative_steps_total", "counter", "model steps that scored the rounds (the rounds of one scheduler step share one)",
       spec_steps.load());
  s += request_seconds.text("tfm_request_duration_seconds", "HTTP request latency");
  s += first_token_seconds.text("tfm_time_to_first_token_seconds", "time from request to its first generated token");
  s += inter_token_seconds.text("tfm_inter_token_seconds", "time between a request's consecutive tokens");
  return s;
}

}  // namespace tfm::server
