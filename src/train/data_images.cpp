// Image classifier data: seeded epochs, per-example augmentation draws, the processor's
// pixels packed into one (B, 3, H, W) batch.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {
namespace {

// Random erasing (Zhong et al. 2017, with torchvision's defaults): a rectangle of 2-33% of the
// picture, of aspect ratio 0.3-3.3 (drawn on a log scale), filled with random values, so the
// model cannot rely on any one part of the object. A grey picture gets grey noise (one value per
// pixel), as the paper erases Fashion-MNIST; ten tries to fit the rectangle, as torchvision.
template <class Uniform>
void erase_rectangle(Image& img, Uniform&& uniform) {
  bool grey = true;
  for (std::size_t i = 0; grey && i < img.rgb.size(); i += 3) grey = img.rgb[i] == img.rgb[i + 1] && img.rgb[i] == img.rgb[i + 2];
  const double area = static_cast<double>(img.width * img.height);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (0.02 + 0.31 * uniform());
    const double ratio = std::exp(std::log(0.3) + (std::log(1 / 0.3) - std::log(0.3)) * uniform());
    const auto h = static_cast<std::int64_t>(std::lround(std::sqrt(target * ratio)));
    const auto w = static_cast<std::int64_t>(std::lround(std::sqrt(target / ratio)));
    if (h < 1 || w < 1 || h >= img.height || w >= img.width) continue;
    const auto top = static_cast<std::int64_t>(uniform() * static_cast<double>(img.height - h + 1));
    const auto left = static_cast<std::int64_t>(uniform() * static_cast<double>(img.width - w + 1));
    for (std::int64_t y = top; y < top + h; ++y)  // top <= height - h: the rectangle fits
      for (std::int64_t x = left; x < left + w; ++x) {
        std::uint8_t* p = img.rgb.data() + (y * img.width + x) * 3;
        for (int c = 0; c < 3; ++c) p[c] = grey && c > 0 ? p[0] : static_cast<std::uint8_t>(uniform() * 256.0);
      }
    return;
  }
}

// The augmented copy of training example number `cursor`: its draws come from a generator
// seeded by (seed, cursor), so a resumed run sees the same pixels.
Image augmented(const Image& img, const ImageAugment& a, std::uint64_t seed, std::int64_t cursor) {
  std::uint64_t state = mix64(seed ^ mix64(static_cast<std::uint64_t>(cursor) + 0x1A6E5ull));
  auto draw = [&state](std::uint64_t n) {
    state = mix64(state);
    return static_cast<std::int64_t>(state % n);
  };
  Image out = img;
  if (a.crop_padding > 0) {
    const std::uint64_t span = static_cast<std::uint64_t>(2 * a.crop_padding + 1);
    const std::int64_t left = draw(span), top = draw(span);
    out = crop_image(pad_image(img, a.crop_padding), left, top, img.width, img.height);
  }
  if (a.horizontal_flip && draw(2) == 1) out = flip_horizontal(out);
  if (a.random_erasing > 0) {
    const auto uniform = [&state] { return static_cast<double>((state = mix64(state)) >> 11) * 0x1.0p-53; };
    if (uniform() < a.random_erasing) erase_rectangle(out, uniform);
  }
  return out;
}

}  // namespace

ImageData::ImageData(LabeledImages train, LabeledImages test, ImageProcessor processor, ImageAugment augment,
                     std::uint64_t seed)
    : train_(std::move(train)), test_(std::move(test)), processor_(std::move(processor)), augment_(augment), seed_(seed) {}

std::pair<std::int64_t, std::int64_t> ImageData::pixel_size() const {
  const Image& first = train_.images.empty() ? test_.images.at(0) : train_.images[0];
  const Image x = processor_.prepare(first);
  return {x.height, x.width};
}

namespace {

// Images of differing sizes are fine as long as the processor brings them to one size.
void pack(const ImageProcessor& p, const std::vector<Image>& images, const std::vector<std::int64_t>& ys,
          const std::string& split, Tensor& pixels, Tensor& labels) {
  const auto B = static_cast<std::int64_t>(images.size());
  labels = Tensor::empty({B}, DType::i64);
  for (std::int64_t b = 0; b < B; ++b) {
    const Image x = p.prepare(images[static_cast<std::size_t>(b)]);
    if (b == 0) pixels = Tensor::empty({B, 3, x.height, x.width});
    TFM_CHECK(x.height == pixels.size(2) && x.width == pixels.size(3), split,
              "the image processor gives images of different sizes (", x.width, "x", x.height, " and ", pixels.size(3), "x",
              pixels.size(2), "); give it a resize to one size");
    p.to_pixels(x, pixels.data<float>() + b * 3 * x.height * x.width);
    labels.data<std::int64_t>()[b] = ys[static_cast<std::size_t>(b)];
  }
}

}  // namespace

void ImageData::train_batch(std::int64_t cursor, std::int64_t batch, Tensor& pixels, Tensor& labels) {
  const std::int64_t n = train_size();
  std::vector<Image> images;
  std::vector<std::int64_t> ys;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b, epoch = c / n;
    if (epoch != cached_epoch_) {
      order_ = seeded_permutation(n, seed_ ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
      cached_epoch_ = epoch;
    }
    const auto i = static_cast<std::size_t>(order_[static_cast<std::size_t>(c % n)]);
    images.push_back(augmented(train_.images[i], augment_, seed_, c));
    ys.push_back(train_.labels[i]);
  }
  pack(processor_, images, ys, "training images", pixels, labels);
}

void ImageData::test_batch(std::int64_t first, std::int64_t batch, Tensor& pixels, Tensor& labels) const {
  const std::int64_t last = std::min(first + batch, test_size());
  const std::vector<Image> images(test_.images.begin() + first, test_.images.begin() + last);
  const std::vector<std::int64_t> ys(test_.labels.begin() + first, test_.labels.begin() + last);
  pack(processor_, images, ys, "test images", pixels, labels);
}

}  // namespace tfm::train_detail
