// Audio files to mono samples at the model's rate (tfm/audio.h). libsndfile decodes (from a
// file or, through its virtual I/O, from bytes in memory: uploads), soxr resamples; both run
// block by block, so a long file never sits in memory at its own rate and channel count.
#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "tfm/audio.h"
#include "tfm/error.h"

namespace tfm {
namespace {

constexpr sf_count_t kBlockFrames = 16384;

// A soxr stream from one rate to another (mono float32), fed block by block.
class Resampler {
 public:
  Resampler(double from, double to, const std::string& where) {
    if (from == to) return;
    soxr_error_t err = nullptr;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    s_ = soxr_create(from, to, 1, &err, &io, &q, nullptr);
    TFM_CHECK(err == nullptr && s_ != nullptr, where, "cannot resample ", from, " Hz to ", to, " Hz: ",
              err != nullptr ? err : "soxr_create failed");
    ratio_ = to / from;
  }
  ~Resampler() {
    if (s_ != nullptr) soxr_delete(s_);
  }
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  // Appends the output for `in` (an empty span with flush: the stream's tail) to out.
  void push(std::span<const float> in, std::vector<float>& out, bool flush, const std::string& where) {
    if (s_ == nullptr) {
      out.insert(out.end(), in.begin(), in.end());
      return;
    }
    std::size_t used = 0;
    do {
      const std::size_t room = static_cast<std::size_t>(std::ceil(static_cast<double>(in.size() - used) * ratio_)) + 1024;
      const std::size_t at = out.size();
      out.resize(at + room);
      std::size_t idone = 0, odone = 0;
      const soxr_error_t err = soxr_process(s_, flush ? nullptr : in.data() + used, flush ? 0 : in.size() - used,
                                            &idone, out.data() + at, room, &odone);
      TFM_CHECK(err == nullptr, where, "resampling failed: ", err);
      out.resize(at + odone);
      used += idone;
      if (flush && odone == 0) break;   // the tail is out
      if (!flush && used >= in.size() && odone < room) break;
    } while (true);
  }

 private:
  soxr_t s_ = nullptr;
  double ratio_ = 1.0;
};

// libsndfile's virtual I/O over bytes in memory.
struct MemoryFile {
  std::span<const std::uint8_t> bytes;
  sf_count_t pos = 0;
};
sf_count_t mem_length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }
sf_count_t mem_seek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const auto size = static_cast<sf_count_t>(m->bytes.size());
  sf_count_t to = whence == SEEK_SET ? offset : whence == SEEK_CUR ? m->pos + offset : size + offset;
  m->pos = std::clamp<sf_count_t>(to, 0, size);
  return m->pos;
}
sf_count_t mem_read(void* ptr, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryFile*>(user);
  const sf_count_t n = std::clamp<sf_count_t>(static_cast<sf_count_t>(m->bytes.size()) - m->pos, 0, count);
  if (n > 0) std::memcpy(ptr, m->bytes.data() + m->pos, static_cast<std::size_t>(n));
  m->pos += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};

std::string format_name(int format) {
  SF_FORMAT_INFO info{};
  info.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof info) == 0 && info.name != nullptr) return info.name;
  return "unknown";
}

// Reads an open file through the down-mix and the resampler.
Audio decode_open(SNDFILE* raw, const SF_INFO& info, const std::string& where, const AudioReadOptions& opt) {
  std::unique_ptr<SNDFILE, SndCloser> f(raw);
  TFM_CHECK(info.channels >= 1 && info.channels <= 256, where, "audio has ", info.channels, " channels");
  TFM_CHECK(info.samplerate >= 1 && info.samplerate <= 1'536'000, where, "audio sample rate ", info.samplerate,
            " Hz is out of range");
  Audio a;
  a.source_rate = info.samplerate;
  a.source_channels = info.channels;
  a.sample_rate = opt.sample_rate > 0 ? opt.sample_rate : info.samplerate;
  a.format = format_name(info.format);
  const auto limit = static_cast<std::size_t>(opt.max_seconds * static_cast<double>(a.sample_rate)) + 1;
  // The same limit on the frames read, checked before they are resampled: a file that claims a
  // rate of a few hertz would otherwise expand each block thousands of times over first.
  const auto source_limit = static_cast<std::size_t>(opt.max_seconds * static_cast<double>(info.samplerate)) + 1;
  std::size_t frames_read = 0;
  Resampler rs(info.samplerate, static_cast<double>(a.sample_rate), where);
  const std::size_t ch = static_cast<std::size_t>(info.channels);
  std::vector<float> block(static_cast<std::size_t>(kBlockFrames) * ch), mono(static_cast<std::size_t>(kBlockFrames));
  while (true) {
    const sf_count_t n = sf_readf_float(f.get(), block.data(), kBlockFrames);
    if (n <= 0) break;
    const auto frames = static_cast<std::size_t>(n);
    frames_read += frames;
    TFM_CHECK(frames_read <= source_limit, where, "audio is longer than the limit of ", opt.max_seconds, " s");
    for (std::size_t i = 0; i < frames; ++i) {
      float s = 0.0f;
      for (std::size_t c = 0; c < ch; ++c) s += block[i * ch + c];
      mono[i] = ch == 1 ? s : s / static_cast<float>(ch);
    }
    rs.push(std::span<const float>(mono.data(), frames), a.samples, false, where);
    TFM_CHECK(a.samples.size() <= limit, where, "audio is longer than the limit of ", opt.max_seconds, " s");
  }
  // A decoder error mid-stream (a truncated or corrupt body) is reported, not taken as the end.
  const int err = sf_error(f.get());
  TFM_CHECK(err == SF_ERR_NO_ERROR, where, "cannot decode audio: ", sf_error_number(err));
  rs.push({}, a.samples, true, where);
  TFM_CHECK(a.samples.size() <= limit, where, "audio is longer than the limit of ", opt.max_seconds, " s");
  TFM_CHECK(!a.samples.empty(), where, "audio has no samples");
  // Float files may exceed full scale a little; values far beyond it are a corrupt file, and
  // their power would overflow the spectrogram.
  for (float v : a.samples)
    TFM_CHECK(std::isfinite(v) && std::abs(v) <= 1e4f, where, "audio holds a sample of ", v,
              ", far outside [-1, 1] (a corrupt file?)");
  return a;
}

}  // namespace

Audio decode_audio(std::span<const std::uint8_t> bytes, const std::string& where, const AudioReadOptions& opt) {
  TFM_CHECK(!bytes.empty(), where, "audio file is empty");
  MemoryFile mem{bytes, 0};
  SF_VIRTUAL_IO io{mem_length, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SNDFILE* f = sf_open_virtual(&io, SFM_READ, &info, &mem);
  TFM_CHECK(f != nullptr, where, "not a readable audio file: ", sf_strerror(nullptr));
  return decode_open(f, info, where, opt);
}

Audio read_audio(const std::string& path, const AudioReadOptions& opt) {
  SF_INFO info{};
  SNDFILE* f = sf_open(path.c_str(), SFM_READ, &info);
  TFM_CHECK(f != nullptr, path, "not a readable audio file: ", sf_strerror(nullptr));
  return decode_open(f, info, path, opt);
}

std::vector<float> resample_audio(std::span<const float> samples, std::int64_t from_rate, std::int64_t to_rate) {
  TFM_CHECK(from_rate > 0 && to_rate > 0, "resample", "rates must be positive, got ", from_rate, " and ", to_rate);
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(static_cast<double>(samples.size()) * static_cast<double>(to_rate) /
                                       static_cast<double>(from_rate)) + 16);
  Resampler rs(static_cast<double>(from_rate), static_cast<double>(to_rate), "resample");
  rs.push(samples, out, false, "resample");
  rs.push({}, out, true, "resample");
  return out;
}

}  // namespace tfm
