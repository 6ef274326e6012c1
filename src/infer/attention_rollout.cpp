// Attention rollout (Abnar & Zuidema 2020) for image models, and the picture that shows it:
// how much of the [CLS] token's final state flows from each patch, through every layer.
// Each layer's attention, averaged over heads, is mixed half-and-half with the identity (the
// residual path carries the token itself), rows renormalised, and the layers multiplied from
// the first up; the [CLS] row of the product, without its own column, is the map.
#include <algorithm>
#include <cmath>

#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/inspect.h"
#include "tfm/ops.h"

namespace tfm {

std::vector<std::vector<float>> attention_rollout(Model& model, const Tensor& pixel_values) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.reads_images(), "attention", "attention rollout needs an image model (its patch grid)");
  NoGradGuard no_grad;
  model.set_training(false);
  std::vector<AttentionMap> maps;
  model.set_attention_capture(&maps);
  ModelInputs in;
  in.pixel_values = pixel_values;
  try {
    model.forward(in);
  } catch (...) {
    model.set_attention_capture(nullptr);
    throw;
  }
  model.set_attention_capture(nullptr);
  // T from the pictures' own grid (positions are resized for other sizes than image_size).
  const std::int64_t B = pixel_values.size(0), prefix = c.prefix_tokens(),
                     T = prefix + (pixel_values.size(2) / c.patch_size) * (pixel_values.size(3) / c.patch_size);
  std::vector<std::vector<float>> out;
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<double> rolled(static_cast<std::size_t>(T * T), 0.0), mixed(rolled.size()), next(rolled.size());
    for (std::int64_t i = 0; i < T; ++i) rolled[static_cast<std::size_t>(i * T + i)] = 1.0;
    for (const AttentionMap& a : maps) {
      const Tensor w = contiguous(a.weights);  // (B, H, T, T)
      TFM_CHECK(w.size(2) == T && w.size(3) == T, "attention", "layer ", a.layer, " attends over ", w.size(3),
                " tokens; the image has ", T);
      const std::int64_t H = w.size(1);
      const float* p = w.data<float>() + b * H * T * T;
      for (std::int64_t i = 0; i < T; ++i) {
        double row = 0;
        for (std::int64_t j = 0; j < T; ++j) {
          double mean = 0;
          for (std::int64_t h = 0; h < H; ++h) mean += p[(h * T + i) * T + j];
          const double v = 0.5 * mean / static_cast<double>(H) + (i == j ? 0.5 : 0.0);
          mixed[static_cast<std::size_t>(i * T + j)] = v;
          row += v;
        }
        for (std::int64_t j = 0; j < T; ++j) mixed[static_cast<std::size_t>(i * T + j)] /= row;
      }
      for (std::int64_t i = 0; i < T; ++i)  // next = mixed @ rolled: this layer after the ones below
        for (std::int64_t j = 0; j < T; ++j) {
          double s = 0;
          for (std::int64_t k = 0; k < T; ++k) s += mixed[static_cast<std::size_t>(i * T + k)] * rolled[static_cast<std::size_t>(k * T + j)];
          next[static_cast<std::size_t>(i * T + j)] = s;
        }
      rolled.swap(next);
    }
    // The [CLS] row over the patch columns; without [CLS] the classifier reads the patches'
    // mean, so the map is the mean of the patch rows.
    std::vector<float> map(static_cast<std::size_t>(T - prefix));
    const std::int64_t first_row = c.cls_token ? 0 : prefix, rows = c.cls_token ? 1 : T - prefix;
    for (std::int64_t j = prefix; j < T; ++j) {
      double s = 0;
      for (std::int64_t i = first_row; i < first_row + rows; ++i) s += rolled[static_cast<std::size_t>(i * T + j)];
      map[static_cast<std::size_t>(j - prefix)] = static_cast<float>(s / static_cast<double>(rows));
    }
    out.push_back(std::move(map));
  }
  return out;
}

ImageAttention attention_rollout(LoadedModel& m, const Image& img) {
  ImageAttention a;
  const Tensor pixels = pixel_values_for(m, {img});
  a.grid = pixels.size(2) / std::max<std::int64_t>(m.config.patch_size, 1);
  TFM_CHECK(pixels.size(3) / std::max<std::int64_t>(m.config.patch_size, 1) == a.grid, "attention",
            "the rollout picture needs a square patch grid; the preprocessor gives ", pixels.size(2), " x ", pixels.size(3));
  a.rollout = attention_rollout(m.model, pixels).at(0);
  a.seen = m.image_processor->prepare(img);
  return a;
}

namespace {

// A perceptual blue -> cyan -> yellow -> red ramp for v in [0, 1].
void heat_colour(double v, double rgb[3]) {
  static const double stops[5][3] = {{0.05, 0.05, 0.45}, {0.10, 0.40, 0.95}, {0.20, 0.85, 0.85}, {0.98, 0.90, 0.20},
                                     {0.85, 0.10, 0.05}};
  const double x = std::clamp(v, 0.0, 1.0) * 4.0;
  const int i = std::min(static_cast<int>(x), 3);
  const double f = x - i;
  for (int c = 0; c < 3; ++c) rgb[c] = stops[i][c] * (1 - f) + stops[i + 1][c] * f;
}

}  // namespace

Image attention_overlay(const ImageAttention& a, std::int64_t min_side) {
  TFM_CHECK(a.grid > 0 && static_cast<std::int64_t>(a.rollout.size()) == a.grid * a.grid, "attention",
            "a rollout of ", a.rollout.size(), " values is no ", a.grid, "x", a.grid, " grid");
  // The picture the model saw, enlarged so the patches show (bicubic, as PIL would).
  const std::int64_t side = std::min(a.seen.width, a.seen.height);
  const double scale = side < min_side ? static_cast<double>(min_side) / static_cast<double>(side) : 1.0;
  const auto W = static_cast<std::int64_t>(std::lround(static_cast<double>(a.seen.width) * scale));
  const auto H = static_cast<std::int64_t>(std::lround(static_cast<double>(a.seen.height) * scale));
  Image out = scale == 1.0 ? a.seen : resize(a.seen, W, H, Resample::bicubic);
  const float top = *std::max_element(a.rollout.begin(), a.rollout.end());
  const double g = static_cast<double>(a.grid);
  for (std::int64_t y = 0; y < H; ++y)
    for (std::int64_t x = 0; x < W; ++x) {
      // Bilinear between patch centres, clamped at the borders.
      const double gx = std::clamp((static_cast<double>(x) + 0.5) / static_cast<double>(W) * g - 0.5, 0.0, g - 1);
      const double gy = std::clamp((static_cast<double>(y) + 0.5) / static_cast<double>(H) * g - 0.5, 0.0, g - 1);
      const auto x0 = static_cast<std::int64_t>(gx), y0 = static_cast<std::int64_t>(gy);
      const std::int64_t x1 = std::min(x0 + 1, a.grid - 1), y1 = std::min(y0 + 1, a.grid - 1);
      const double fx = gx - static_cast<double>(x0), fy = gy - static_cast<double>(y0);
      auto at = [&](std::int64_t r, std::int64_t c) { return static_cast<double>(a.rollout[static_cast<std::size_t>(r * a.grid + c)]); };
      const double v = ((1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x1)) + fy * ((1 - fx) * at(y1, x0) + fx * at(y1, x1))) /
                       (top > 0 ? top : 1.0);
      double rgb[3];
      heat_colour(v, rgb);
      for (int c = 0; c < 3; ++c) {
        auto& px = out.rgb[static_cast<std::size_t>((y * W + x) * 3 + c)];
        px = static_cast<std::uint8_t>(std::lround(0.5 * px + 0.5 * 255.0 * rgb[c]));
      }
    }
  return out;
}

}  // namespace tfm
