// The audio front end against tools/reference/ref_audio.py: the WAV reader's samples, the
// down-mix, torchaudio's Slaney mel filters, and Whisper's log-mel spectrogram computed with
// torch.stft (with and without the 30-s window of WhisperFeatureExtractor).
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/test_support.h"
#include "tfm/audio.h"
#include "tfm/safetensors.h"

using namespace tfm;

namespace {

std::string audio_dir() {
  const char* d = std::getenv("TFM_FIXTURE_DIR");
  return std::string(d ? d : "fixtures") + "/audio/";
}

const SafetensorsFile& ref() {
  static const SafetensorsFile r = load_safetensors(audio_dir() + "audio.ref.safetensors");
  return r;
}

Tensor as_tensor(const std::vector<float>& v) { return Tensor::from_floats(v, {static_cast<std::int64_t>(v.size())}); }

}  // namespace

TEST(AudioParity, WavSamplesAsSoundfileReadsThem) {
  const Audio a = read_audio(audio_dir() + "tone16k.wav");
  EXPECT_EQ(a.sample_rate, 16000);
  EXPECT_EQ(a.source_channels, 1);
  test::expect_close(as_tensor(a.samples), ref().tensors.at("samples"), 0, 0, "samples");
}

TEST(AudioParity, StereoFloatWavDownMixedToTheChannelsMean) {
  AudioReadOptions keep;
  keep.sample_rate = 0;
  const Audio a = read_audio(audio_dir() + "stereo44k.wav", keep);
  EXPECT_EQ(a.sample_rate, 44100);
  EXPECT_EQ(a.source_channels, 2);
  test::expect_close(as_tensor(a.samples), ref().tensors.at("stereo_mono"), 0, 1e-7, "stereo_mono");
  // Resampled to 16 kHz: the length soxr gives is the exact ratio.
  const Audio r = read_audio(audio_dir() + "stereo44k.wav");
  EXPECT_NEAR(static_cast<double>(r.samples.size()), static_cast<double>(a.samples.size()) * 16000.0 / 44100.0, 1.0);
}

TEST(AudioParity, SlaneyMelFiltersEqualTorchaudio) {
  test::expect_close(mel_filters(80, 400, 16000), ref().tensors.at("filters80"), 1e-5, 1e-7, "filters80");
  test::expect_close(mel_filters(128, 400, 16000), ref().tensors.at("filters128"), 1e-5, 1e-7, "filters128");
}

TEST(AudioParity, LogMelSpectrogramEqualsWhisper) {
  const Tensor& x = ref().tensors.at("samples");
  const std::span<const float> s(x.data<float>(), static_cast<std::size_t>(x.numel()));
  LogMelOptions o;
  test::expect_close(log_mel_spectrogram(s, o), ref().tensors.at("mel80"), 0, 1e-4, "mel80");
  o.n_mels = 128;
  test::expect_close(log_mel_spectrogram(s, o), ref().tensors.at("mel128"), 0, 1e-4, "mel128");
}

TEST(AudioParity, FeatureExtractorPadsToThirtySecondsFirst) {
  const Tensor& x = ref().tensors.at("samples");
  const AudioFeatureExtractor fx = AudioFeatureExtractor::whisper(80);
  EXPECT_EQ(fx.window_frames(), 3000);
  test::expect_close(fx(std::span<const float>(x.data<float>(), static_cast<std::size_t>(x.numel()))),
                     ref().tensors.at("features80"), 0, 1e-4, "features80");
  const std::vector<float> silence(16000, 0.0f);
  test::expect_close(fx(silence), ref().tensors.at("silence_features80"), 0, 1e-6, "silence_features80");
}
