// Progress output: a \r-updated line on a terminal, plain log lines otherwise.
#include "train/progress.h"

#include <cstdio>
#include <unistd.h>

namespace tfm::train_detail {

Progress::Progress(bool quiet, std::int64_t total_steps, std::int64_t log_every)
    : quiet_(quiet), tty_(::isatty(2) == 1), total_(total_steps), log_every_(log_every),
      start_(std::chrono::steady_clock::now()) {}

void Progress::step(std::int64_t step, double loss, double tokens_per_s, double lr, std::int64_t steps_done) {
  if (quiet_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double eta = steps_done > 0 ? elapsed / static_cast<double>(steps_done) * static_cast<double>(total_ - step) : 0;
  char line[200];
  std::snprintf(line, sizeof line, "step %lld/%lld | loss %.4f | %.0f tok/s | lr %.2e | ETA %dm%02ds",
                static_cast<long long>(step), static_cast<long long>(total_), loss, tokens_per_s, lr,
                static_cast<int>(eta) / 60, static_cast<int>(eta) % 60);
  if (tty_) {
    std::fprintf(stderr, "\r%-90s", line);
    open_line_ = true;
  } else if (step % log_every_ == 0 || step == total_) {
    std::fprintf(stderr, "%s\n", line);
  }
  std::fflush(stderr);
}

void Progress::message(const std::string& text) {
  if (quiet_) return;
  if (open_line_) std::fprintf(stderr, "\n");
  open_line_ = false;
  std::fprintf(stderr, "%s\n", text.c_str());
  std::fflush(stderr);
}

}  // namespace tfm::train_detail
