// Progress output of the training loop (stderr).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tfm::train_detail {

class Progress {
 public:
  Progress(bool quiet, std::int64_t total_steps, std::int64_t log_every);
  // After optimiser step `step` (1-based); steps_done counts the steps run in this process.
  void step(std::int64_t step, double loss, double tokens_per_s, double lr, std::int64_t steps_done);
  void message(const std::string& text);  // a line of its own (eval results, checkpoints)

 private:
  bool quiet_, tty_;
  std::int64_t total_, log_every_;
  std::chrono::steady_clock::time_point start_;
  bool open_line_ = false;
};

}  // namespace tfm::train_detail
