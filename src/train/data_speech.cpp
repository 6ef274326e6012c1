// Speech training data (task "speech"): clips' log-mel windows with SpecAugment, and the
// decoder's Whisper-style targets with and without timestamps.
#include <algorithm>
#include <cmath>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

SpeechData::SpeechData(std::vector<SpeechClip> train, std::vector<SpeechClip> test, const WhisperTokens& special,
                       SpeechDataOptions o)
    : train_(std::move(train)), test_(std::move(test)), special_(special), o_(o) {}

Tensor SpeechData::window(const SpeechClip& c) const {
  const std::int64_t mels = c.frames.size(0), stored = std::min(c.frames.size(1), o_.window_frames);
  Tensor w = Tensor::full({mels, o_.window_frames}, c.padding);
  float* o = w.data<float>();
  const float* in = c.frames.data<float>();
  for (std::int64_t m = 0; m < mels; ++m) std::copy_n(in + m * c.frames.size(1), stored, o + m * o_.window_frames);
  return w;
}

// The frames that hold the clip's samples (the stored frames also hold the STFT's overlap into
// the silence behind it).
std::int64_t SpeechData::sound_frames(const SpeechClip& c) const {
  return std::clamp<std::int64_t>(std::llround(c.seconds * o_.frames_per_second), 1, c.frames.size(1));
}

void SpeechData::pack(const std::vector<Window>& windows, bool augment, std::uint64_t draw, Tensor& features, Tensor& dec_in,
                      Tensor& labels) const {
  const auto B = static_cast<std::int64_t>(windows.size());
  const std::int64_t W = o_.window_frames, mels = windows.front().clips.front()->frames.size(0);
  const auto seconds_at = [&](std::int64_t frame) { return static_cast<double>(frame) / o_.frames_per_second; };
  const auto timestamp = [&](double seconds) {
    return special_.timestamp_begin + static_cast<std::int32_t>(std::llround(seconds / 0.02));
  };
  std::vector<std::vector<std::int32_t>> seqs;  // <|startoftranscript|> ... <|endoftext|>
  std::int64_t T = 1;
  for (const Window& w : windows) {
    const std::size_t n = w.clips.size();
    const bool ts = w.timestamps && timestamp(seconds_at(w.starts[n - 1]) + w.clips[n - 1]->seconds) < special_.timestamp_begin + 1501;
    std::vector<std::int32_t> s{special_.sot};
    if (!ts) s.push_back(special_.no_timestamps);
    for (std::size_t k = 0; k < n; ++k) {
      const double start = seconds_at(w.starts[k]);
      if (ts) s.push_back(timestamp(start));
      s.insert(s.end(), w.clips[k]->text.begin(), w.clips[k]->text.end());
      if (ts) s.push_back(timestamp(start + w.clips[k]->seconds));
    }
    s.push_back(special_.eot);
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(s.size()) - 1);
    seqs.push_back(std::move(s));
  }
  features = Tensor::empty({B, mels, W});
  dec_in = Tensor::full({B, T}, static_cast<float>(special_.eot), DType::i64);
  labels = Tensor::full({B, T}, -100.0f, DType::i64);
  auto* d = dec_in.data<std::int64_t>();
  auto* l = labels.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    const Window& win = windows[static_cast<std::size_t>(b)];
    float* f = features.data<float>() + b * mels * W;
    std::fill_n(f, mels * W, win.clips.front()->padding);
    std::int64_t sound = 1;  // the frames up to the end of the last clip's samples
    for (std::size_t k = 0; k < win.clips.size(); ++k) {
      const SpeechClip& c = *win.clips[k];
      const std::int64_t at = win.starts[k], stored = c.frames.size(1);
      // A clip followed by another gives up its overlap frames to the next one's start.
      const std::int64_t take = std::min(k + 1 < win.clips.size() ? sound_frames(c) : stored, W - at);
      for (std::int64_t m = 0; m < mels; ++m) std::copy_n(c.frames.data<float>() + m * stored, take, f + m * W + at);
      sound = std::min(W, at + sound_frames(c));
    }
    if (augment) {
      // The window's mean over its sound, drawn masks within it (seeded by the draw and the row).
      double mean = 0;
      for (std::int64_t m = 0; m < mels; ++m)
        for (std::int64_t t = 0; t < sound; ++t) mean += f[m * W + t];
      const auto fill = static_cast<float>(mean / static_cast<double>(mels * sound));
      std::uint64_t r = mix64(draw * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(b));
      const auto next = [&](std::int64_t bound) { return bound <= 0 ? 0 : static_cast<std::int64_t>((r = mix64(r)) % static_cast<std::uint64_t>(bound)); };
      for (std::int64_t k = 0; k < o_.augment.time_masks; ++k) {
        const std::int64_t width = next(o_.augment.time_width + 1), start = next(std::max<std::int64_t>(1, sound - width));
        for (std::int64_t m = 0; m < mels; ++m)
          for (std::int64_t t = start; t < std::min(W, start + width); ++t) f[m * W + t] = fill;
      }
      for (std::int64_t k = 0; k < o_.augment.freq_masks; ++k) {
        const std::int64_t width = next(o_.augment.freq_width + 1), start = next(std::max<std::int64_t>(1, mels - width));
        for (std::int64_t m = start; m < std::min(mels, start + width); ++m)
          for (std::int64_t t = 0; t < W; ++t) f[m * W + t] = fill;
      }
    }
    const auto& s = seqs[static_cast<std::size_t>(b)];
    for (std::size_t t = 0; t + 1 < s.size(); ++t) {
      d[b * T + static_cast<std::int64_t>(t)] = s[t];
      l[b * T + static_cast<std::int64_t>(t)] = s[t + 1];
    }
  }
}

void SpeechData::train_batch(std::int64_t cursor, std::int64_t batch, Tensor& features, Tensor& dec_in, Tensor& labels,
                             Tensor* ctc_targets, Tensor* ctc_lengths) {
  const std::int64_t n = train_size();
  const auto uniform = [](std::uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; };
  std::vector<Window> windows;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b, epoch = c / n;
    if (epoch != cached_epoch_) {
      order_ = seeded_permutation(n, o_.seed ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
      cached_epoch_ = epoch;
    }
    Window w;
    w.clips.push_back(&train_[static_cast<std::size_t>(order_[static_cast<std::size_t>(c % n)])]);
    w.starts.push_back(0);
    w.timestamps = uniform(mix64(o_.seed ^ (static_cast<std::uint64_t>(c) * 0xD1B54A32D192ED03ull))) < o_.timestamps_fraction;
    std::uint64_t r = mix64(o_.seed ^ (static_cast<std::uint64_t>(c) * 0x8CB92BA72F3D8DD7ull) ^ 0x5851F42D4C957F2Dull);
    if (uniform(r) < o_.pack_fraction) {
      // A few random clips are tried; each that fits (with its pause) is appended, while the
      // decoder's input (<|startoftranscript|>, a timestamp pair or <|notimestamps|> and the
      // text per clip) fits its positions.
      std::int64_t end = sound_frames(*w.clips.front());
      const auto tokens_of = [&](const SpeechClip& clip) { return static_cast<std::int64_t>(clip.text.size()) + (w.timestamps ? 2 : 0); };
      std::int64_t tokens = 1 + (w.timestamps ? 0 : 1) + tokens_of(*w.clips.front());
      const auto max_gap = static_cast<std::uint64_t>(0.3 * o_.frames_per_second) + 1;
      for (int tries = 0; tries < 8; ++tries) {
        const SpeechClip* next = &train_[static_cast<std::size_t>((r = mix64(r)) % static_cast<std::uint64_t>(n))];
        const auto gap = static_cast<std::int64_t>((r = mix64(r)) % max_gap);
        if (std::find(w.clips.begin(), w.clips.end(), next) != w.clips.end()) continue;
        if (end + gap + std::llround(next->seconds * o_.frames_per_second) > o_.window_frames) continue;
        if (tokens + tokens_of(*next) > o_.max_target_positions) continue;
        tokens += tokens_of(*next);
        w.clips.push_back(next);
        w.starts.push_back(end + gap);
        end += gap + sound_frames(*next);
      }
    }
    windows.push_back(std::move(w));
  }
  pack(windows, true, o_.seed ^ static_cast<std::uint64_t>(cursor), features, dec_in, labels);
  if (ctc_targets == nullptr || ctc_lengths == nullptr) return;
  std::vector<std::vector<std::int32_t>> texts;
  std::int64_t L = 1;
  for (const Window& w : windows) {
    std::vector<std::int32_t> t;
    for (const SpeechClip* c : w.clips) t.insert(t.end(), c->text.begin(), c->text.end());
    L = std::max<std::int64_t>(L, static_cast<std::int64_t>(t.size()));
    texts.push_back(std::move(t));
  }
  *ctc_targets = Tensor::zeros({batch, L}, DType::i64);
  *ctc_lengths = Tensor::empty({batch}, DType::i64);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<std::int32_t>& text = texts[static_cast<std::size_t>(b)];
    std::copy(text.begin(), text.end(), ctc_targets->data<std::int64_t>() + b * L);
    ctc_lengths->data<std::int64_t>()[b] = static_cast<std::int64_t>(text.size());
  }
}

void SpeechData::test_batch(std::int64_t first, std::int64_t batch, Tensor& features, Tensor& dec_in, Tensor& labels) const {
  std::vector<Window> windows;
  for (std::int64_t i = first; i < std::min(first + batch, test_size()); ++i)
    windows.push_back({{&test_[static_cast<std::size_t>(i)]}, {0}, false});
  pack(windows, false, 0, features, dec_in, labels);
}

}  // namespace tfm::train_detail
