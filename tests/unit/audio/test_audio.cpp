// src/audio: decoding from memory and its errors, soxr's resampling against the exact sine,
// the log-mel front end's shapes and limits, the feature extractor's config, the .npy writer.
// (Values against PyTorch and torchaudio: tests/parity/test_parity_audio.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

using namespace tfm;

namespace {

// A 16-bit PCM WAV file of `samples` (interleaved when channels > 1).
std::vector<std::uint8_t> wav16(const std::vector<std::int16_t>& samples, int rate, int channels) {
  std::vector<std::uint8_t> b;
  const auto u32 = [&](std::uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i))); };
  const auto u16 = [&](std::uint16_t v) { b.push_back(static_cast<std::uint8_t>(v)); b.push_back(static_cast<std::uint8_t>(v >> 8)); };
  const auto tag = [&](const char* t) { b.insert(b.end(), t, t + 4); };
  const auto data = static_cast<std::uint32_t>(samples.size() * 2);
  tag("RIFF"); u32(36 + data); tag("WAVE");
  tag("fmt "); u32(16); u16(1); u16(static_cast<std::uint16_t>(channels)); u32(static_cast<std::uint32_t>(rate));
  u32(static_cast<std::uint32_t>(rate * channels * 2)); u16(static_cast<std::uint16_t>(channels * 2)); u16(16);
  tag("data"); u32(data);
  for (std::int16_t s : samples) u16(static_cast<std::uint16_t>(s));
  return b;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Audio, DecodesWavFromMemoryAndDownMixes) {
  const std::vector<std::int16_t> stereo{1000, 3000, -2000, 2000, 16384, -16384};
  AudioReadOptions keep;
  keep.sample_rate = 0;
  const Audio a = decode_audio(wav16(stereo, 8000, 2), "upload", keep);
  EXPECT_EQ(a.sample_rate, 8000);
  EXPECT_EQ(a.source_channels, 2);
  ASSERT_EQ(a.samples.size(), 3u);
  EXPECT_FLOAT_EQ(a.samples[0], 2000.0f / 32768.0f);
  EXPECT_FLOAT_EQ(a.samples[1], 0.0f);
  EXPECT_FLOAT_EQ(a.samples[2], 0.0f);
  EXPECT_NE(a.format.find("WAV"), std::string::npos);
}

TEST(Audio, BadFilesAreOneLineErrorsNamingThem) {
  EXPECT_NE(error_of([] { decode_audio({}, "upload.wav"); }).find("[upload.wav] audio file is empty"), std::string::npos);
  const std::vector<std::uint8_t> junk(100, 0x5a);
  EXPECT_NE(error_of([&] { decode_audio(junk, "upload.wav"); }).find("[upload.wav] not a readable audio file"), std::string::npos);
  std::vector<std::uint8_t> cut = wav16(std::vector<std::int16_t>(1000, 7), 16000, 1);
  cut.resize(44);  // the header only: no samples
  EXPECT_NE(error_of([&] { decode_audio(cut, "cut.wav"); }).find("[cut.wav]"), std::string::npos);
  EXPECT_NE(error_of([] { read_audio("/nonexistent/x.flac"); }).find("[/nonexistent/x.flac] not a readable audio file"),
            std::string::npos);
  AudioReadOptions short_limit;
  short_limit.max_seconds = 0.01;
  const auto long_wav = wav16(std::vector<std::int16_t>(16000, 7), 16000, 1);
  EXPECT_NE(error_of([&] { decode_audio(long_wav, "long.wav", short_limit); }).find("longer than the limit"), std::string::npos);
  // A header claiming 1 Hz: 16,000 frames are 4.4 hours there. The limit is checked on the frames
  // read, before they are resampled (16,000 times over: a gigabyte, then a fuzz timeout).
  AudioReadOptions minute;
  minute.max_seconds = 60.0;
  const auto slow_wav = wav16(std::vector<std::int16_t>(16000, 7), 1, 1);
  EXPECT_NE(error_of([&] { decode_audio(slow_wav, "slow.wav", minute); }).find("[slow.wav] audio is longer than the limit"),
            std::string::npos);
}

TEST(Audio, SoxrResamplesASineToTheExactSine) {
  const double f = 1000.0;
  std::vector<float> x(44100);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * f * static_cast<double>(i) / 44100.0));
  const std::vector<float> y = resample_audio(x, 44100, 16000);
  ASSERT_NEAR(static_cast<double>(y.size()), 16000.0, 1.0);
  double worst = 0;
  for (std::size_t i = 1000; i < 15000; ++i)  // away from the ends' transients
    worst = std::max(worst, std::abs(y[i] - 0.5 * std::sin(2 * std::numbers::pi * f * static_cast<double>(i) / 16000.0)));
  EXPECT_LT(worst, 1e-3);
}

TEST(Audio, LogMelShapesAndLimits) {
  std::vector<float> x(16000);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.05 * static_cast<double>(i)));
  const Tensor m = log_mel_spectrogram(x);
  EXPECT_EQ(m.shape(), (Shape{80, 100}));
  // The dynamic range is clamped to 8 decades below the maximum: (x + 4) / 4 spans at most 2.
  float lo = 1e9f, hi = -1e9f;
  for (std::int64_t i = 0; i < m.numel(); ++i) lo = std::min(lo, m.data<float>()[i]), hi = std::max(hi, m.data<float>()[i]);
  EXPECT_LE(hi - lo, 2.0f + 1e-6f);
  EXPECT_NE(error_of([] { log_mel_spectrogram(std::vector<float>(200, 0.0f)); }).find("too short"), std::string::npos);
  EXPECT_EQ(mel_filters(128, 400, 16000).shape(), (Shape{128, 201}));
}

TEST(Audio, FeatureExtractorConfig) {
  const auto dir = std::filesystem::temp_directory_path() / "tfm_test_audio_fx";
  std::filesystem::create_directories(dir);
  const auto cfg = (dir / "preprocessor_config.json").string();
  write_file_atomic(cfg, R"({"feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128, "chunk_length": 10})");
  const AudioFeatureExtractor fx = AudioFeatureExtractor::load(dir.string());
  EXPECT_EQ(fx.options().n_mels, 128);
  EXPECT_EQ(fx.window_samples(), 160000);
  EXPECT_EQ(fx(std::vector<float>(1000, 0.1f)).shape(), (Shape{128, 1000}));
  write_file_atomic(cfg, R"({"feature_extractor_type": "ASTFeatureExtractor"})");
  EXPECT_NE(error_of([&] { AudioFeatureExtractor::load(dir.string()); }).find("is not WhisperFeatureExtractor"), std::string::npos);
  write_file_atomic(cfg, R"({"hop_length": 0})");
  EXPECT_NE(error_of([&] { AudioFeatureExtractor::load(dir.string()); }).find("'hop_length' must be a positive integer"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(Audio, NpyFilesAsNumpyWritesThem) {
  const auto path = (std::filesystem::temp_directory_path() / "tfm_test.npy").string();
  write_npy(path, Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3}));
  const std::string b = read_file(path);
  ASSERT_GE(b.size(), 10u);
  EXPECT_EQ(b.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header = static_cast<unsigned char>(b[8]) | static_cast<std::size_t>(static_cast<unsigned char>(b[9])) << 8;
  EXPECT_EQ((10 + header) % 64, 0u);
  EXPECT_NE(b.find("'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"), std::string::npos);
  ASSERT_EQ(b.size(), 10 + header + 24);
  float v[6];
  std::memcpy(v, b.data() + 10 + header, 24);
  EXPECT_EQ(v[5], 6.0f);
  write_npy(path, Tensor::from_floats({1, 2}, {2}));
  EXPECT_NE(read_file(path).find("'shape': (2,), }"), std::string::npos);
  std::filesystem::remove(path);
}
