// Learning-rate schedules: constant, linear warm-up + cosine decay, and Vaswani et al.'s
// inverse square root. All include the same linear warm-up.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tfm/error.h"
#include "tfm/train.h"

namespace tfm {

double learning_rate(const ScheduleConfig& s, double peak_lr, std::int64_t step, std::int64_t total_steps) {
  TFM_CHECK(step >= 0, "schedule", "negative step ", step);
  const auto w = static_cast<double>(s.warmup_steps);
  const auto t = static_cast<double>(step + 1);  // 1-based: the first step already has lr > 0
  switch (s.kind) {
    case ScheduleKind::constant:
      return w > 0 && t < w ? peak_lr * t / w : peak_lr;
    case ScheduleKind::cosine: {
      if (w > 0 && t <= w) return peak_lr * t / w;
      const double span = std::max(1.0, static_cast<double>(total_steps) - w);
      const double progress = std::clamp((t - w) / span, 0.0, 1.0);
      const double floor = peak_lr * s.min_lr_ratio;
      return floor + (peak_lr - floor) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
    case ScheduleKind::inverse_sqrt: {
      // Vaswani: d^-0.5 * min(t^-0.5, t * w^-1.5); normalised so the peak (t = w) is peak_lr.
      const double ww = std::max(1.0, w);
      return peak_lr * std::sqrt(ww) * std::min(1.0 / std::sqrt(t), t * std::pow(ww, -1.5));
    }
  }
  fail("schedule", "unknown schedule kind");
}

}  // namespace tfm
