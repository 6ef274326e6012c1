// The speech task's training windows (src/train/data_speech.cpp): one clip per window, or
// several packed behind each other with their timestamps, at any feature frame rate.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tfm/tfm.h"
#include "train/train_internal.h"

namespace tfm::train_detail {
namespace {

constexpr std::int32_t kSot = 100, kEot = 101, kNoTimestamps = 102, kTimestampBegin = 103;
constexpr std::int64_t kMels = 3;

WhisperTokens tokens() {
  WhisperTokens t;
  t.sot = kSot;
  t.eot = kEot;
  t.no_timestamps = kNoTimestamps;
  t.timestamp_begin = kTimestampBegin;
  return t;
}

// Clip i: `seconds` of sound whose frames all hold the value i + 1 (then 3 overlap frames and
// the padding -1 behind), and the two-token text {2i, 2i + 1}.
std::vector<SpeechClip> clips(const std::vector<double>& seconds, double fps) {
  std::vector<SpeechClip> out;
  for (std::size_t i = 0; i < seconds.size(); ++i) {
    SpeechClip c;
    const auto sound = static_cast<std::int64_t>(std::llround(seconds[i] * fps));
    c.frames = Tensor::full({kMels, sound + 3}, static_cast<float>(i + 1));
    for (std::int64_t m = 0; m < kMels; ++m)
      for (std::int64_t t = sound; t < sound + 3; ++t) c.frames.data<float>()[m * (sound + 3) + t] = 0.5f;
    c.padding = -1;
    c.seconds = seconds[i];
    c.text = {static_cast<std::int32_t>(2 * i), static_cast<std::int32_t>(2 * i + 1)};
    out.push_back(std::move(c));
  }
  return out;
}

struct Batch {
  Tensor features, dec_in, labels, ctc_targets, ctc_lengths;
};

Batch draw(SpeechData& d, std::int64_t cursor, std::int64_t batch) {
  Batch b;
  d.train_batch(cursor, batch, b.features, b.dec_in, b.labels, &b.ctc_targets, &b.ctc_lengths);
  return b;
}

// The decoder's full sequence of row b: <|startoftranscript|> then the labels up to <|endoftext|>.
std::vector<std::int32_t> sequence(const Batch& x, std::int64_t b) {
  const std::int64_t T = x.labels.size(1);
  std::vector<std::int32_t> s{static_cast<std::int32_t>(x.dec_in.data<std::int64_t>()[b * T])};
  for (std::int64_t t = 0; t < T && x.labels.data<std::int64_t>()[b * T + t] != -100; ++t)
    s.push_back(static_cast<std::int32_t>(x.labels.data<std::int64_t>()[b * T + t]));
  return s;
}

TEST(SpeechData, OneClipAWindowWithoutPacking) {
  const double fps = 100;
  SpeechDataOptions o;
  o.window_frames = 400;
  o.frames_per_second = fps;
  SpeechData d(clips({1.0, 2.5, 3.9, 0.4}, fps), clips({1.0}, fps), tokens(), o);
  const Batch x = draw(d, 0, 4);
  ASSERT_EQ(x.features.shape(), (Shape{4, kMels, 400}));
  for (std::int64_t b = 0; b < 4; ++b) {
    const auto s = sequence(x, b);
    ASSERT_EQ(s.size(), 5u);
    EXPECT_EQ(s[0], kSot);
    EXPECT_EQ(s[1], kNoTimestamps);
    EXPECT_EQ(s[4], kEot);
    const std::int32_t clip = s[2] / 2;
    EXPECT_EQ(s[3], s[2] + 1);
    // The window is the clip's stored frames, then its padding.
    const float* f = x.features.data<float>() + b * kMels * 400;
    const std::int64_t stored = d.window(d.test().front()).size(1);
    EXPECT_EQ(stored, 400);
    EXPECT_EQ(f[0], static_cast<float>(clip + 1));
    EXPECT_EQ(f[399], -1.0f);
    EXPECT_EQ(x.ctc_lengths.data<std::int64_t>()[b], 2);
  }
}

TEST(SpeechData, PackedWindowsHoldSeveralClipsWhereTheirTimestampsSay) {
  for (const double fps : {100.0, 50.0}) {  // hop 160 and hop 320 at 16 kHz
    SpeechDataOptions o;
    o.window_frames = static_cast<std::int64_t>(4 * fps);  // 4-s windows
    o.frames_per_second = fps;
    o.timestamps_fraction = 1;
    o.pack_fraction = 1;
    o.seed = 5;
    const std::vector<double> seconds{0.6, 1.1, 0.9, 1.7, 2.2, 0.5, 1.3, 3.1, 0.8, 1.0};
    SpeechData d(clips(seconds, fps), clips({1.0}, fps), tokens(), o);
    std::int64_t windows = 0, packed_clips = 0;
    for (std::int64_t cursor = 0; cursor < 40; cursor += 8) {
      const Batch x = draw(d, cursor, 8);
      const std::int64_t W = o.window_frames, L = x.ctc_targets.size(1);
      for (std::int64_t b = 0; b < 8; ++b, ++windows) {
        const auto s = sequence(x, b);
        const float* f = x.features.data<float>() + b * kMels * W;
        ASSERT_EQ(s.front(), kSot);
        ASSERT_EQ(s.back(), kEot);
        // <|start|> text <|end|> per clip: the clip's frames begin at its start time and it
        // fits in the window; the CTC targets are the texts in the same order.
        std::vector<std::int32_t> texts;
        double last_end = 0;
        std::size_t k = 1;
        std::map<std::int32_t, int> seen;
        while (k + 1 < s.size()) {
          ASSERT_GE(s[k], kTimestampBegin) << "row " << b;
          const std::int32_t clip = s[k + 1] / 2;
          ASSERT_EQ(s[k + 2], s[k + 1] + 1);
          ASSERT_GE(s[k + 3], kTimestampBegin);
          EXPECT_EQ(++seen[clip], 1) << "a clip twice in one window";
          const double start = (s[k] - kTimestampBegin) * 0.02, end = (s[k + 3] - kTimestampBegin) * 0.02;
          EXPECT_NEAR(end - start, seconds[static_cast<std::size_t>(clip)], 0.021);
          EXPECT_GE(start, last_end - 1e-9);
          EXPECT_LE(start - last_end, 0.3 + 0.021) << "the pause between clips";
          EXPECT_LE(end, 4.0 + 0.011);
          const auto frame = static_cast<std::int64_t>(std::llround(start * fps));
          // Within a timestamp step (0.02 s) of the start, the clip's value begins.
          std::int64_t first = -1;
          for (std::int64_t t = std::max<std::int64_t>(0, frame - 2); t <= std::min(W - 1, frame + 2); ++t)
            if (f[t] == static_cast<float>(clip + 1)) {
              first = t;
              break;
            }
          EXPECT_GE(first, 0) << "clip " << clip << " not at " << start << " s";
          last_end = end;
          texts.push_back(s[k + 1]);
          texts.push_back(s[k + 2]);
          k += 4;
        }
        ASSERT_EQ(k + 1, s.size());
        ASSERT_EQ(x.ctc_lengths.data<std::int64_t>()[b], static_cast<std::int64_t>(texts.size()));
        for (std::size_t i = 0; i < texts.size(); ++i)
          EXPECT_EQ(x.ctc_targets.data<std::int64_t>()[b * L + static_cast<std::int64_t>(i)], texts[i]);
        packed_clips += static_cast<std::int64_t>(texts.size() / 2);
      }
    }
    // Clips of about a second in 4-s windows: most windows take more than one.
    EXPECT_GT(static_cast<double>(packed_clips) / static_cast<double>(windows), 1.8) << fps;
  }
}

TEST(SpeechData, PackedWindowsFitTheDecodersPositions) {
  SpeechDataOptions o;
  o.window_frames = 400;
  o.timestamps_fraction = 1;
  o.pack_fraction = 1;
  o.max_target_positions = 9;  // <|startoftranscript|> and two clips of <|t|> a b <|t|>
  SpeechData d(clips({0.5, 0.4, 0.6, 0.5, 0.3, 0.7}, 100), clips({1.0}, 100), tokens(), o);
  const Batch x = draw(d, 0, 24);
  EXPECT_LE(x.dec_in.size(1), 9);
  std::int64_t pairs = 0;
  for (std::int64_t r = 0; r < 24; ++r) {
    EXPECT_LE(x.ctc_lengths.data<std::int64_t>()[r], 4);
    pairs += x.ctc_lengths.data<std::int64_t>()[r] == 4;
  }
  EXPECT_GT(pairs, 12);  // short clips: the positions, not the window, stop the packing
}

TEST(SpeechData, PackingIsSeededAndRepeatable) {
  SpeechDataOptions o;
  o.window_frames = 400;
  o.pack_fraction = 0.5;
  o.timestamps_fraction = 0.5;
  o.seed = 9;
  const std::vector<double> seconds{0.6, 1.1, 0.9, 1.7, 2.2, 0.5};
  SpeechData a(clips(seconds, 100), clips({1.0}, 100), tokens(), o), b(clips(seconds, 100), clips({1.0}, 100), tokens(), o);
  const Batch x = draw(a, 6, 6), y = draw(b, 6, 6);
  EXPECT_EQ(x.features.to_floats(), y.features.to_floats());
  EXPECT_EQ(x.labels.to_ints(), y.labels.to_ints());
  // At pack_fraction 0.5 about half the windows take more than their first clip.
  const Batch many = draw(a, 0, 200);
  std::int64_t packed = 0;
  for (std::int64_t r = 0; r < 200; ++r) packed += many.ctc_lengths.data<std::int64_t>()[r] > 2;
  EXPECT_GT(packed, 70);
  EXPECT_LT(packed, 130);
}

}  // namespace
}  // namespace tfm::train_detail
