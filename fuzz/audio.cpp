// Fuzz target: audio decoding (libsndfile behind tfm's error handling, through soxr to
// 16 kHz) on arbitrary bytes, then Whisper's log-mel front end on what came out. Bad input must
// be a tfm::Error; decoded audio must be finite, within the length limit, and give a
// spectrogram of n / hop frames of finite values. Seeds: fuzz/make_audio_corpus.sh.
#include <cmath>
#include <cstdint>
#include <span>

#include "fuzz_check.h"
#include "tfm/audio.h"
#include "tfm/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tfm::AudioReadOptions o;
  o.max_seconds = 20.0;
  tfm::Audio a;
  try {
    a = tfm::decode_audio(std::span<const std::uint8_t>(data, size), "fuzz", o);
  } catch (const tfm::Error&) {
    return 0;
  }
  tfm::fuzz::require(!a.samples.empty() && a.samples.size() <= 20 * 16000 + 1, "decoded audio fits the length limit");
  tfm::fuzz::require(a.sample_rate == 16000 && a.source_rate > 0 && a.source_channels > 0, "the rates and channels are set");
  for (float v : a.samples) tfm::fuzz::require(std::isfinite(v), "samples are finite");
  if (a.samples.size() > 200) {
    const std::size_t n = std::min<std::size_t>(a.samples.size(), 16000);
    const tfm::Tensor mel = tfm::log_mel_spectrogram(std::span<const float>(a.samples.data(), n));
    tfm::fuzz::require(mel.size(0) == 80 && mel.size(1) == static_cast<std::int64_t>(n / 160), "n / hop frames");
    const float* m = mel.data<float>();
    for (std::int64_t i = 0; i < mel.numel(); ++i) tfm::fuzz::require(std::isfinite(m[i]), "features are finite");
  }
  return 0;
}
