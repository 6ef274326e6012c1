// Image decoding candidates (docs/vision.md, "Choosing the decoders"): libpng and libjpeg-turbo
// through tfm's decoder (src/image) against stb_image (Debian's libstb) on the same files, and
// the processors' resize. PIL's side is bench/peers/pil/bench_pil_image.py on the same files.
//   TFM_BENCH_IMAGES=build/fixtures/image build/bin/bench_image_decode
// (the directory ref_image.py writes: playground.png, a 1 MP RGBA screenshot, and
// playground.jpg, the same at quality 90).
#include <benchmark/benchmark.h>
#include <stb/stb_image.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tfm/image.h"

namespace {

std::vector<std::uint8_t> file_bytes(const std::string& name) {
  const char* dir = std::getenv("TFM_BENCH_IMAGES");
  std::ifstream f(std::string(dir ? dir : "build/fixtures/image") + "/" + name, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void tfm_decode(benchmark::State& state, const char* name) {
  const auto bytes = file_bytes(name);
  if (bytes.empty()) return state.SkipWithError("no input file (set TFM_BENCH_IMAGES)");
  std::int64_t pixels = 0;
  for (auto _ : state) {
    const tfm::Image img = tfm::decode_image(bytes, name);
    pixels = img.width * img.height;
    benchmark::DoNotOptimize(img.rgb.data());
  }
  state.counters["MP/s"] = benchmark::Counter(static_cast<double>(pixels) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}

void stb_decode(benchmark::State& state, const char* name) {
  const auto bytes = file_bytes(name);
  if (bytes.empty()) return state.SkipWithError("no input file (set TFM_BENCH_IMAGES)");
  std::int64_t pixels = 0;
  for (auto _ : state) {
    int w = 0, h = 0, c = 0;
    unsigned char* p = stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, 3);
    pixels = static_cast<std::int64_t>(w) * h;
    benchmark::DoNotOptimize(p);
    stbi_image_free(p);
  }
  state.counters["MP/s"] = benchmark::Counter(static_cast<double>(pixels) * 1e-6, benchmark::Counter::kIsIterationInvariantRate);
}

void tfm_resize(benchmark::State& state, tfm::Resample r) {
  const auto bytes = file_bytes("playground.png");
  if (bytes.empty()) return state.SkipWithError("no input file (set TFM_BENCH_IMAGES)");
  const tfm::Image img = tfm::decode_image(bytes, "playground.png");
  for (auto _ : state) benchmark::DoNotOptimize(tfm::resize(img, 224, 224, r).rgb.data());
}

// The whole path of one file to the model's input: decode, then ViT's processor (resize to
// 224 x 224 bilinear, rescale, normalise) or CLIP's (shortest edge 224 bicubic, center crop,
// rescale, normalise), into (3, 224, 224) floats. PIL + NumPy's twin: bench_pil_image.py.
const char* kVitProcessor = R"({"image_processor_type": "ViTImageProcessor", "do_resize": true, "size": {"height": 224, "width": 224},
  "resample": 2, "do_rescale": true, "rescale_factor": 0.00392156862745098, "do_normalize": true,
  "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]})";
const char* kClipProcessor = R"({"image_processor_type": "CLIPImageProcessor", "do_resize": true, "size": {"shortest_edge": 224},
  "resample": 3, "do_center_crop": true, "crop_size": {"height": 224, "width": 224}, "do_rescale": true,
  "rescale_factor": 0.00392156862745098, "do_normalize": true, "do_convert_rgb": true,
  "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]})";

void tfm_pipeline(benchmark::State& state, const char* name, const char* processor) {
  const auto bytes = file_bytes(name);
  if (bytes.empty()) return state.SkipWithError("no input file (set TFM_BENCH_IMAGES)");
  const tfm::ImageProcessor p = tfm::ImageProcessor::from_json(processor, "bench");
  for (auto _ : state) benchmark::DoNotOptimize(p(tfm::decode_image(bytes, name)).data<float>());
}

BENCHMARK_CAPTURE(tfm_pipeline, png_vit, "playground.png", kVitProcessor)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_pipeline, jpeg_vit, "playground.jpg", kVitProcessor)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_pipeline, jpeg_clip, "playground.jpg", kClipProcessor)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_decode, png, "playground.png")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(stb_decode, png, "playground.png")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_decode, jpeg, "playground.jpg")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(stb_decode, jpeg, "playground.jpg")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_resize, bilinear_224, tfm::Resample::bilinear)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tfm_resize, bicubic_224, tfm::Resample::bicubic)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
