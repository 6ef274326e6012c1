// Whisper's log-mel spectrogram (tfm/audio.h): FFTW3's real FFT over centred, Hann-windowed
// frames in double precision, the power spectrum through Slaney mel filters (one GEMM), and
// Whisper's dynamic-range compression. docs/speech.md says why FFTW3.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <numbers>

#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

// Slaney's mel scale (librosa htk=False): linear below 1 kHz, logarithmic above.
constexpr double kFsp = 200.0 / 3.0, kMinLogHz = 1000.0, kMinLogMel = kMinLogHz / kFsp;
const double kLogStep = std::log(6.4) / 27.0;

double hz_to_mel(double hz) { return hz < kMinLogHz ? hz / kFsp : kMinLogMel + std::log(hz / kMinLogHz) / kLogStep; }
double mel_to_hz(double mel) { return mel < kMinLogMel ? kFsp * mel : kMinLogHz * std::exp(kLogStep * (mel - kMinLogMel)); }

// FFTW's planner is not thread-safe; its plans run on any thread with new arrays of the same
// alignment (fftw_malloc's), so one plan per size serves every caller. They are destroyed at
// exit, with FFTW's own planner state (LeakSanitizer sees nothing left).
struct FftPlan {
  std::int64_t n = 0;
  fftw_plan plan = nullptr;
};
struct FftPlans {
  std::mutex mu;
  std::vector<FftPlan> plans;
  ~FftPlans() {
    for (const FftPlan& p : plans) fftw_destroy_plan(p.plan);
    fftw_cleanup();
  }
};
fftw_plan plan_for(std::int64_t n) {
  static FftPlans cache;
  std::lock_guard<std::mutex> lock(cache.mu);
  auto& plans = cache.plans;
  for (const FftPlan& p : plans)
    if (p.n == n) return p.plan;
  double* in = fftw_alloc_real(static_cast<std::size_t>(n));
  fftw_complex* out = fftw_alloc_complex(static_cast<std::size_t>(n / 2 + 1));
  fftw_plan plan = fftw_plan_dft_r2c_1d(static_cast<int>(n), in, out, FFTW_ESTIMATE);
  fftw_free(in);
  fftw_free(out);
  TFM_CHECK(plan != nullptr, "log_mel", "FFTW could not plan a ", n, "-point FFT");
  plans.push_back({n, plan});
  return plan;
}

}  // namespace

Tensor mel_filters(std::int64_t n_mels, std::int64_t n_fft, std::int64_t sample_rate) {
  TFM_CHECK(n_mels >= 1 && n_fft >= 2 && sample_rate >= 1, "mel_filters", "bad sizes: ", n_mels, " mels, n_fft ", n_fft,
            ", ", sample_rate, " Hz");
  const std::int64_t bins = n_fft / 2 + 1;
  const double top = static_cast<double>(sample_rate) / 2.0, mel_top = hz_to_mel(top);
  std::vector<double> f(static_cast<std::size_t>(n_mels + 2));  // the filters' edges and centres, in Hz
  for (std::size_t i = 0; i < f.size(); ++i)
    f[i] = mel_to_hz(mel_top * static_cast<double>(i) / static_cast<double>(n_mels + 1));
  std::vector<float> w(static_cast<std::size_t>(n_mels * bins), 0.0f);
  for (std::int64_t m = 0; m < n_mels; ++m) {
    const auto i = static_cast<std::size_t>(m);
    const double norm = 2.0 / (f[i + 2] - f[i]);  // Slaney: each filter's area is the same
    for (std::int64_t k = 0; k < bins; ++k) {
      const double hz = top * static_cast<double>(k) / static_cast<double>(bins - 1);
      const double lower = (hz - f[i]) / (f[i + 1] - f[i]), upper = (f[i + 2] - hz) / (f[i + 2] - f[i + 1]);
      w[static_cast<std::size_t>(m * bins + k)] = static_cast<float>(std::max(0.0, std::min(lower, upper)) * norm);
    }
  }
  return Tensor::from_floats(w, {n_mels, bins});
}

Tensor log_mel_spectrogram(std::span<const float> samples, const LogMelOptions& opt) {
  const std::int64_t n_fft = opt.n_fft, hop = opt.hop, half = n_fft / 2, bins = n_fft / 2 + 1;
  TFM_CHECK(n_fft >= 2 && hop >= 1 && opt.n_mels >= 1, "log_mel", "bad options: n_fft ", n_fft, ", hop ", hop, ", ",
            opt.n_mels, " mels");
  const auto n = static_cast<std::int64_t>(samples.size());
  TFM_CHECK(n > half, "log_mel", "audio of ", n, " samples is too short for a centred ", n_fft, "-point STFT (needs more than ",
            half, ")");
  const std::int64_t frames = n / hop;  // torch.stft's 1 + n / hop frames, less the last (Whisper drops it)
  TFM_CHECK(frames >= 1, "log_mel", "audio of ", n, " samples gives no frame at hop ", hop);
  // The signal with n_fft / 2 samples reflected at each end (torch.stft's center=True).
  std::vector<double> x(static_cast<std::size_t>(n + 2 * half));
  for (std::int64_t i = 0; i < n + 2 * half; ++i) {
    std::int64_t j = i - half;
    if (j < 0) j = -j;
    if (j >= n) j = 2 * (n - 1) - j;
    x[static_cast<std::size_t>(i)] = samples[static_cast<std::size_t>(j)];
  }
  std::vector<double> window(static_cast<std::size_t>(n_fft));  // periodic Hann (torch.hann_window)
  for (std::int64_t i = 0; i < n_fft; ++i)
    window[static_cast<std::size_t>(i)] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(n_fft));

  const fftw_plan plan = plan_for(n_fft);
  Tensor power = Tensor::empty({frames, bins});
  float* pw = power.data<float>();
#pragma omp parallel
  {
    double* in = fftw_alloc_real(static_cast<std::size_t>(n_fft));
    fftw_complex* out = fftw_alloc_complex(static_cast<std::size_t>(bins));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < frames; ++t) {
      const double* src = x.data() + t * hop;
      for (std::int64_t i = 0; i < n_fft; ++i) in[i] = src[i] * window[static_cast<std::size_t>(i)];
      fftw_execute_dft_r2c(plan, in, out);
      for (std::int64_t k = 0; k < bins; ++k)  // capped: samples far past full scale stay finite
        pw[t * bins + k] = static_cast<float>(std::min(out[k][0] * out[k][0] + out[k][1] * out[k][1], 1e30));
    }
    fftw_free(in);
    fftw_free(out);
  }
  // (frames, bins) x (n_mels, bins)^T -> (frames, n_mels), then Whisper's compression.
  const Tensor mel = contiguous(transpose(linear(power, mel_filters(opt.n_mels, n_fft, opt.sample_rate)), 0, 1));
  float* m = mel.data<float>();
  const std::size_t count = static_cast<std::size_t>(mel.numel());
  float top = -INFINITY;
  for (std::size_t i = 0; i < count; ++i) {
    m[i] = std::log10(std::max(m[i], 1e-10f));
    top = std::max(top, m[i]);
  }
  for (std::size_t i = 0; i < count; ++i) m[i] = (std::max(m[i], top - 8.0f) + 4.0f) / 4.0f;
  return mel;
}

}  // namespace tfm
