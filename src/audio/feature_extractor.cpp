// AudioFeatureExtractor (tfm/audio.h): Hugging Face's WhisperFeatureExtractor from its
// preprocessor_config.json — the audio padded with zeros (or cut) to one chunk, then the
// log-mel spectrogram over the whole chunk, so the clamp's maximum is the chunk's.
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

using json = nlohmann::json;

std::int64_t positive_int(const json& j, const char* key, std::int64_t fallback, const std::string& where) {
  if (!j.contains(key)) return fallback;
  TFM_CHECK(j[key].is_number_integer() && j[key].get<std::int64_t>() >= 1 && j[key].get<std::int64_t>() <= (1LL << 31), where,
            "key '", key, "' must be a positive integer, got ", j[key].dump());
  return j[key].get<std::int64_t>();
}

}  // namespace

AudioFeatureExtractor AudioFeatureExtractor::whisper(std::int64_t n_mels) {
  TFM_CHECK(n_mels >= 1, "feature extractor", "n_mels must be positive, got ", n_mels);
  AudioFeatureExtractor fx;
  fx.mel_.n_mels = n_mels;
  return fx;
}

AudioFeatureExtractor AudioFeatureExtractor::load(const std::string& dir, std::int64_t n_mels) {
  const std::string path = (std::filesystem::path(dir) / "preprocessor_config.json").string();
  if (!std::filesystem::exists(path)) return whisper(n_mels);
  return from_json(read_file(path), path, n_mels);
}

AudioFeatureExtractor AudioFeatureExtractor::from_json(const std::string& text, const std::string& path, std::int64_t n_mels) {
  AudioFeatureExtractor fx = whisper(n_mels);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), path, "must hold a JSON object");
  if (j.contains("feature_extractor_type"))
    TFM_CHECK(j["feature_extractor_type"] == "WhisperFeatureExtractor", path, "feature_extractor_type ",
              j["feature_extractor_type"].dump(), " is not WhisperFeatureExtractor, the only audio front end here");
  fx.mel_.n_mels = positive_int(j, "feature_size", n_mels, path);
  fx.mel_.sample_rate = positive_int(j, "sampling_rate", 16000, path);
  fx.mel_.hop = positive_int(j, "hop_length", 160, path);
  fx.mel_.n_fft = positive_int(j, "n_fft", 400, path);
  const std::int64_t chunk = positive_int(j, "chunk_length", 30, path);
  fx.n_samples_ = positive_int(j, "n_samples", chunk * fx.mel_.sample_rate, path);
  TFM_CHECK(fx.n_samples_ > fx.mel_.n_fft, path, "n_samples ", fx.n_samples_, " is shorter than one FFT");
  if (j.contains("padding_value"))
    TFM_CHECK(j["padding_value"].is_number() && j["padding_value"].get<double>() == 0.0, path,
              "padding_value must be 0.0 (Whisper pads with silence), got ", j["padding_value"].dump());
  return fx;
}

Tensor AudioFeatureExtractor::operator()(std::span<const float> samples) const {
  std::vector<float> chunk(static_cast<std::size_t>(n_samples_), 0.0f);
  std::copy_n(samples.begin(), std::min(samples.size(), chunk.size()), chunk.begin());
  return log_mel_spectrogram(chunk, mel_);
}

}  // namespace tfm
