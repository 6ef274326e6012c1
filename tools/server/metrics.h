// Counters and gauges behind GET /metrics (Prometheus text format 0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

namespace tfm::server {

// A latency histogram with fixed bucket bounds (seconds).
class Histogram {
 public:
  void observe(double seconds);
  std::string text(const std::string& name, const std::string& help) const;

 private:
  static constexpr std::array<double, 12> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  mutable std::mutex mu_;
  std::array<std::uint64_t, kBounds.size()> counts_{};
  std::uint64_t total_ = 0;
  double sum_ = 0;
};

struct Metrics {
  std::atomic<std::uint64_t> requests{0};           // HTTP requests answered
  std::atomic<std::uint64_t> requests_failed{0};    // with status >= 400
  std::atomic<std::uint64_t> rejected_queue_full{0};
  std::atomic<std::uint64_t> cancelled{0};          // choices cancelled (client gone, timeout)
  std::atomic<std::uint64_t> prompt_tokens{0};
  std::atomic<std::uint64_t> generated_tokens{0};
  std::atomic<std::uint64_t> steps{0};              // scheduler batch steps
  std::atomic<std::int64_t> slots_busy{0};
  std::atomic<std::int64_t> slots_total{0};
  std::atomic<std::int64_t> queue_length{0};        // generations waiting for a slot
  std::atomic<std::int64_t> spec_drafted{0};        // speculative decoding: tokens drafted
  std::atomic<std::int64_t> spec_accepted{0};       // and kept
  std::atomic<std::int64_t> spec_rounds{0};         // drafting rounds (one per slot that drafted)
  std::atomic<std::int64_t> spec_steps{0};          // the model's steps that scored them (batched)
  Histogram request_seconds, first_token_seconds, inter_token_seconds;
  std::string text() const;
};

}  // namespace tfm::server
