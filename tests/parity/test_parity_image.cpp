// Images against Debian's python3-pil (tools/reference/ref_image.py): decoding PNG (every colour
// type) and JPEG (baseline, 4:4:4, progressive, grey, every EXIF orientation) gives PIL's
// pixels exactly; resizing with each of PIL's filters, up and down, gives PIL's pixels
// exactly; center crop and the ViT / DeiT / CLIP image processors give transformers' arrays.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

using namespace tfm;
using namespace tfm::test;

namespace {

std::string image_path(const std::string& file) {
  const char* dir = std::getenv("TFM_FIXTURE_DIR");
  return std::string(dir ? dir : "fixtures") + "/image/" + file;
}

const SafetensorsFile& fx() {
  static const SafetensorsFile f = load_fixture("image");
  return f;
}

// Pixels equal to the reference's (H, W, 3) u8, reporting the first difference.
void expect_pixels(const Image& img, const std::string& key) {
  const Tensor& want = fx().tensors.at(key);
  ASSERT_EQ(img.height, want.size(0)) << key;
  ASSERT_EQ(img.width, want.size(1)) << key;
  const auto* w = static_cast<const std::uint8_t*>(want.raw_data());
  std::size_t diffs = 0, first = 0;
  for (std::size_t i = 0; i < img.rgb.size(); ++i)
    if (img.rgb[i] != w[i] && diffs++ == 0) first = i;
  EXPECT_EQ(diffs, 0u) << key << ": " << diffs << " of " << img.rgb.size() << " bytes differ; first at pixel "
                       << first / 3 << " channel " << first % 3 << ": " << int(img.rgb[first]) << " vs " << int(w[first]);
}

}  // namespace

TEST(ImageParity, DecodesAsPil) {
  for (const char* name : {"rgb.png", "rgba.png", "grey.png", "grey_alpha.png", "palette.png", "bilevel.png",
                           "q90.jpg", "q75_444.jpg", "progressive.jpg", "grey.jpg"}) {
    std::string key = std::string(name);
    key = "decode." + key.substr(0, key.find('.')) + (key.ends_with(".jpg") && key.starts_with("grey") ? "_jpg" : "");
    expect_pixels(read_image(image_path(name)), key);
  }
  expect_pixels(read_image(image_path("playground.png")), "decode.playground");  // docs/img's screenshot
}

TEST(ImageParity, AppliesEveryExifOrientation) {
  for (int o = 1; o <= 8; ++o) {
    const std::string name = "orient" + std::to_string(o);
    expect_pixels(read_image(image_path(name + ".jpg")), "decode." + name);
  }
}

TEST(ImageParity, ResizesAsPilWithEveryFilter) {
  const std::vector<std::pair<std::string, Resample>> filters = {
      {"nearest", Resample::nearest}, {"bilinear", Resample::bilinear}, {"bicubic", Resample::bicubic},
      {"box", Resample::box}, {"hamming", Resample::hamming}, {"lanczos", Resample::lanczos}};
  for (const auto& [src, file] : std::vector<std::pair<std::string, std::string>>{{"rgb", "rgb.png"}, {"tiny", "tiny.png"}}) {
    const Image img = read_image(image_path(file));
    for (const auto& [fname, f] : filters)
      for (const auto& [w, h] : std::vector<std::pair<int, int>>{{32, 32}, {17, 29}, {61, 20}, {128, 90}, {1, 1}, {7, 45}})
        expect_pixels(resize(img, w, h, f), "resize." + src + "." + fname + "." + std::to_string(w) + "x" + std::to_string(h));
  }
  const Image photo = read_image(image_path("playground.png"));  // 1 MP down to 224 x 224: the wide antialias
  expect_pixels(resize(photo, 224, 224, Resample::bilinear), "resize.playground.bilinear.224x224");
  expect_pixels(resize(photo, 224, 224, Resample::bicubic), "resize.playground.bicubic.224x224");
}

TEST(ImageParity, CenterCropsAsTransformers) {
  const Image img = read_image(image_path("rgb.png"));
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{32, 32}, {61, 45}, {70, 50}, {20, 60}})
    expect_pixels(center_crop(img, w, h), "crop.rgb." + std::to_string(w) + "x" + std::to_string(h));
}

TEST(ImageParity, ProcessorsGiveTransformersArrays) {
  for (const char* cfg : {"vit", "deit", "clip"}) {
    const ImageProcessor p = ImageProcessor::from_json(fx().metadata.at(std::string("config.") + cfg), cfg);
    for (const char* src : {"rgb", "portrait"}) {
      const Tensor got = p(read_image(image_path(std::string(src) + ".png")));
      const Tensor& want = fx().tensors.at(std::string("proc.") + cfg + "." + src);
      // Same float32 operations in the same order: equal up to the last bit.
      expect_close(got, want, 0, 1e-6, std::string(cfg) + "." + src);
    }
  }
}
