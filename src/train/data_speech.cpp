// Speech training data (task "speech"): clips' log-mel windows with SpecAugment, and the
// decoder's Whisper-style targets with and without timestamps.
#include <algorithm>
#include <cmath>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

SpeechData::SpeechData(std::vector<SpeechClip> train, std::vector<SpeechClip> test, const WhisperTokens& special,
                       std::int64_t window_frames, SpecAugmentConfig augment, double timestamps_fraction, std::uint64_t seed)
    : train_(std::move(train)),
      test_(std::move(test)),
      special_(special),
      window_(window_frames),
      augment_(augment),
      timestamps_fraction_(timestamps_fraction),
      seed_(seed) {}

Tensor SpeechData::window(const SpeechClip& c) const {
  const std::int64_t mels = c.frames.size(0), stored = std::min(c.frames.size(1), window_);
  Tensor w = Tensor::full({mels, window_}, c.padding);
  float* o = w.data<float>();
  const float* in = c.frames.data<float>();
  for (std::int64_t m = 0; m < mels; ++m) std::copy_n(in + m * c.frames.size(1), stored, o + m * window_);
  return w;
}

void SpeechData::pack(const std::vector<const SpeechClip*>& clips, const std::vector<bool>& timestamps, bool augment,
                      std::uint64_t draw, Tensor& features, Tensor& dec_in, Tensor& labels) const {
  const auto B = static_cast<std::int64_t>(clips.size());
  const std::int64_t mels = clips.front()->frames.size(0);
  std::vector<std::vector<std::int32_t>> seqs;  // <|startoftranscript|> ... <|endoftext|>
  std::int64_t T = 1;
  for (std::int64_t b = 0; b < B; ++b) {
    const SpeechClip& c = *clips[static_cast<std::size_t>(b)];
    std::vector<std::int32_t> s{special_.sot};
    const std::int32_t last_time = special_.timestamp_begin + static_cast<std::int32_t>(std::llround(c.seconds / 0.02));
    const bool ts = timestamps[static_cast<std::size_t>(b)] && last_time < special_.timestamp_begin + 1501;
    s.push_back(ts ? special_.timestamp_begin : special_.no_timestamps);
    s.insert(s.end(), c.text.begin(), c.text.end());
    if (ts) s.push_back(last_time);
    s.push_back(special_.eot);
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(s.size()) - 1);
    seqs.push_back(std::move(s));
  }
  features = Tensor::empty({B, mels, window_});
  dec_in = Tensor::full({B, T}, static_cast<float>(special_.eot), DType::i64);
  labels = Tensor::full({B, T}, -100.0f, DType::i64);
  auto* d = dec_in.data<std::int64_t>();
  auto* l = labels.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    const SpeechClip& c = *clips[static_cast<std::size_t>(b)];
    const Tensor w = window(c);
    float* f = features.data<float>() + b * mels * window_;
    std::copy_n(w.data<float>(), mels * window_, f);
    if (augment) {
      // The clip's mean over its sound, drawn masks within it (seeded by the draw and the row).
      const std::int64_t sound = std::max<std::int64_t>(1, std::min(window_, static_cast<std::int64_t>(c.seconds * 100.0)));
      double mean = 0;
      for (std::int64_t m = 0; m < mels; ++m)
        for (std::int64_t t = 0; t < sound; ++t) mean += f[m * window_ + t];
      const auto fill = static_cast<float>(mean / static_cast<double>(mels * sound));
      std::uint64_t r = mix64(draw * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(b));
      const auto next = [&](std::int64_t bound) { return bound <= 0 ? 0 : static_cast<std::int64_t>((r = mix64(r)) % static_cast<std::uint64_t>(bound)); };
      for (std::int64_t k = 0; k < augment_.time_masks; ++k) {
        const std::int64_t width = next(augment_.time_width + 1), start = next(std::max<std::int64_t>(1, sound - width));
        for (std::int64_t m = 0; m < mels; ++m)
          for (std::int64_t t = start; t < std::min(window_, start + width); ++t) f[m * window_ + t] = fill;
      }
      for (std::int64_t k = 0; k < augment_.freq_masks; ++k) {
        const std::int64_t width = next(augment_.freq_width + 1), start = next(std::max<std::int64_t>(1, mels - width));
        for (std::int64_t m = start; m < std::min(mels, start + width); ++m)
          for (std::int64_t t = 0; t < window_; ++t) f[m * window_ + t] = fill;
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
  std::vector<const SpeechClip*> clips;
  std::vector<bool> ts;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b, epoch = c / n;
    if (epoch != cached_epoch_) {
      order_ = seeded_permutation(n, seed_ ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
      cached_epoch_ = epoch;
    }
    clips.push_back(&train_[static_cast<std::size_t>(order_[static_cast<std::size_t>(c % n)])]);
    const double u = static_cast<double>(mix64(seed_ ^ (static_cast<std::uint64_t>(c) * 0xD1B54A32D192ED03ull)) >> 11) * 0x1.0p-53;
    ts.push_back(u < timestamps_fraction_);
  }
  pack(clips, ts, true, seed_ ^ static_cast<std::uint64_t>(cursor), features, dec_in, labels);
  if (ctc_targets == nullptr || ctc_lengths == nullptr) return;
  std::int64_t L = 1;
  for (const SpeechClip* c : clips) L = std::max<std::int64_t>(L, static_cast<std::int64_t>(c->text.size()));
  *ctc_targets = Tensor::zeros({batch, L}, DType::i64);
  *ctc_lengths = Tensor::empty({batch}, DType::i64);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<std::int32_t>& text = clips[static_cast<std::size_t>(b)]->text;
    std::copy(text.begin(), text.end(), ctc_targets->data<std::int64_t>() + b * L);
    ctc_lengths->data<std::int64_t>()[b] = static_cast<std::int64_t>(text.size());
  }
}

void SpeechData::test_batch(std::int64_t first, std::int64_t batch, Tensor& features, Tensor& dec_in, Tensor& labels) const {
  std::vector<const SpeechClip*> clips;
  for (std::int64_t i = first; i < std::min(first + batch, test_size()); ++i) clips.push_back(&test_[static_cast<std::size_t>(i)]);
  pack(clips, std::vector<bool>(clips.size(), false), false, 0, features, dec_in, labels);
}

}  // namespace tfm::train_detail
