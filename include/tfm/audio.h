// Sound as the speech models hear it, and the log-mel features Whisper computes from it
// (docs/speech.md):
//
//   tfm::Audio a = tfm::read_audio("talk.flac");               // any rate/channels -> 16 kHz mono
//   tfm::AudioFeatureExtractor fx = tfm::AudioFeatureExtractor::load("model/");
//   tfm::Tensor feats = fx(a.samples);                          // (80, 3000) f32, 30 s window
//
// Decoding goes through libsndfile (WAV, FLAC, OGG/Vorbis, Opus, MP3 and the rest it reads),
// resampling through libsoxr at its "high quality" setting (librosa.load's default resampler),
// the down-mix to mono is the channels' mean (librosa's to_mono; ffmpeg's -ac 1 for stereo).
// The spectrogram's FFT is FFTW3's.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

// Mono samples in [-1, 1] (integer formats scaled by 1 / 2^(bits-1), as libsndfile and
// soundfile do), at sample_rate; source_rate and source_channels describe the file.
struct Audio {
  std::vector<float> samples;
  std::int64_t sample_rate = 0;
  std::int64_t source_rate = 0, source_channels = 0;
  std::string format;  // libsndfile's name of the container, e.g. "WAV (Microsoft)"
  double seconds() const { return sample_rate > 0 ? static_cast<double>(samples.size()) / static_cast<double>(sample_rate) : 0.0; }
};

struct AudioReadOptions {
  std::int64_t sample_rate = 16000;  // 0: keep the file's rate
  double max_seconds = 4 * 3600.0;   // longer files are refused (hostile headers cannot claim more)
};

// The file is decoded block by block through the resampler, so memory holds only the output.
// A file that is not audio, truncated or corrupt, or longer than max_seconds: one tfm::Error
// naming `where` (the path for read_audio) and libsndfile's reason.
Audio decode_audio(std::span<const std::uint8_t> bytes, const std::string& where, const AudioReadOptions& opt = {});
Audio read_audio(const std::string& path, const AudioReadOptions& opt = {});

// soxr's high-quality resampling of mono samples from one rate to another.
std::vector<float> resample_audio(std::span<const float> samples, std::int64_t from_rate, std::int64_t to_rate);

// ---- Whisper's log-mel front end --------------------------------------------------------
// Slaney-scale mel filters with Slaney's area normalisation (librosa.filters.mel, htk=False,
// norm="slaney"; torchaudio's melscale_fbanks(norm="slaney", mel_scale="slaney")), from 0 Hz
// to sample_rate / 2: (n_mels, n_fft / 2 + 1) f32.
Tensor mel_filters(std::int64_t n_mels, std::int64_t n_fft, std::int64_t sample_rate);

struct LogMelOptions {
  std::int64_t n_mels = 80, n_fft = 400, hop = 160, sample_rate = 16000;
};
// Whisper's log_mel_spectrogram: a centred STFT (reflect padding of n_fft / 2, periodic Hann
// window), the power spectrum without its last frame, the mel filters, log10 with a 1e-10
// floor, clamped at the maximum - 8, then (x + 4) / 4. (n_mels, samples / hop) f32. Needs more
// than n_fft / 2 samples (the reflection), else an error.
Tensor log_mel_spectrogram(std::span<const float> samples, const LogMelOptions& opt = {});

// Hugging Face's WhisperFeatureExtractor (preprocessor_config.json): the audio padded with
// zeros, or cut, to chunk_length seconds, then its log-mel spectrogram (n_mels, nb_max_frames).
class AudioFeatureExtractor {
 public:
  AudioFeatureExtractor() = default;
  // dir/preprocessor_config.json; absent, Whisper's defaults for `n_mels` bins.
  static AudioFeatureExtractor load(const std::string& dir, std::int64_t n_mels = 80);
  // preprocessor_config.json's text (`where` names it in errors).
  static AudioFeatureExtractor from_json(const std::string& text, const std::string& where, std::int64_t n_mels = 80);
  static AudioFeatureExtractor whisper(std::int64_t n_mels);
  const LogMelOptions& options() const { return mel_; }
  std::int64_t window_samples() const { return n_samples_; }  // 480000 for Whisper's 30 s
  std::int64_t window_frames() const { return n_samples_ / mel_.hop; }
  Tensor operator()(std::span<const float> samples) const;  // (n_mels, window_frames())

 private:
  LogMelOptions mel_;
  std::int64_t n_samples_ = 480000;
};

// NumPy's .npy format (version 1.0, little-endian '<f4', C order) of a float tensor.
void write_npy(const std::string& path, const Tensor& t);

}  // namespace tfm
