// src/image: bad files are one-line errors naming the file, never a crash; the pixel limit
// holds before anything is allocated; PNG round trips; EXIF parsing survives malformed
// segments; crops pad like transformers'; a processor config's mistakes are named.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "image/exif.h"
#include "tfm/error.h"
#include "tfm/image.h"

using namespace tfm;

namespace {

std::vector<std::uint8_t> seed(const std::string& name) {
  const char* dir = std::getenv("TFM_SOURCE_DIR");
  std::ifstream f(std::string(dir ? dir : ".") + "/fuzz/corpus/image/" + name, std::ios::binary);
  EXPECT_TRUE(f.good()) << name;
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

Image gradient(std::int64_t w, std::int64_t h) {
  Image img;
  img.width = w;
  img.height = h;
  for (std::int64_t i = 0; i < w * h * 3; ++i) img.rgb.push_back(static_cast<std::uint8_t>(i * 7));
  return img;
}

}  // namespace

TEST(Image, BadFilesAreOneLineErrorsNamingTheFile) {
  for (const char* name : {"truncated.png", "truncated.jpg"}) {
    const auto bytes = seed(name);
    const std::string e = error_of([&] { decode_image(bytes, name); });
    EXPECT_EQ(e.find(name), 1u) << e;  // "[truncated.png] ..."
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  EXPECT_NE(error_of([] { decode_image({}, "empty.bin"); }).find("not a PNG or JPEG file"), std::string::npos);
  const std::vector<std::uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 0, 0};
  EXPECT_NE(error_of([&] { decode_image(gif, "x.gif"); }).find("unknown signature"), std::string::npos);
  EXPECT_NE(error_of([] { read_image("/nonexistent/cat.png"); }).find("cannot open"), std::string::npos);
  // Corrupt bytes in the middle of a valid PNG: libpng's CRC check, as an error.
  auto png = seed("rgb.png");
  png[png.size() / 2] ^= 0x5A;
  EXPECT_NE(error_of([&] { decode_image(png, "crc.png"); }).find("[crc.png] PNG:"), std::string::npos);
}

TEST(Image, PixelLimitHoldsBeforeDecoding) {
  const auto png = seed("rgb.png"), jpg = seed("baseline.jpg");  // 5 x 6
  EXPECT_EQ(decode_image(png, "ok", 30).width, 5);
  EXPECT_NE(error_of([&] { decode_image(png, "big.png", 29); }).find("more than the limit of 29"), std::string::npos);
  EXPECT_NE(error_of([&] { decode_image(jpg, "big.jpg", 29); }).find("more than the limit of 29"), std::string::npos);
}

TEST(Image, EveryColourTypeDecodesToRgb) {
  for (const char* name : {"rgb.png", "grey.png", "palette.png", "rgba.png", "bilevel.png", "grey16.png", "baseline.jpg",
                           "progressive.jpg", "grey.jpg"}) {
    const Image img = decode_image(seed(name), name);
    EXPECT_EQ(img.width, 5) << name;
    EXPECT_EQ(img.height, 6) << name;
    EXPECT_EQ(img.rgb.size(), 90u) << name;
  }
  const Image turned = decode_image(seed("orient6.jpg"), "orient6.jpg");  // rotated by EXIF
  EXPECT_EQ(turned.width, 6);
  EXPECT_EQ(turned.height, 5);
}

TEST(Image, PngRoundTrips) {
  const Image img = gradient(7, 3);
  const std::string png = encode_png(img);
  const Image back = decode_image({reinterpret_cast<const std::uint8_t*>(png.data()), png.size()}, "png");
  EXPECT_EQ(back.width, 7);
  EXPECT_EQ(back.height, 3);
  EXPECT_EQ(back.rgb, img.rgb);
}

TEST(Image, ExifOrientationSurvivesMalformedSegments) {
  // "Exif\0\0" + little-endian TIFF header + IFD0 with one entry: orientation 6.
  std::vector<std::uint8_t> ok = {'E', 'x', 'i', 'f', 0, 0, 'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0,
                                  0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(exif_orientation(ok.data(), ok.size()), 6);
  std::vector<std::uint8_t> big_endian = {'E', 'x', 'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                                          0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0};
  EXPECT_EQ(exif_orientation(big_endian.data(), big_endian.size()), 8);
  for (std::size_t n = 0; n < ok.size(); ++n) EXPECT_EQ(exif_orientation(ok.data(), n), n >= 28 ? 6 : 1) << n;  // the entry ends at byte 28
  auto bad = ok;
  bad[10] = 0xFF;  // IFD0 offset past the end
  EXPECT_EQ(exif_orientation(bad.data(), bad.size()), 1);
  bad = ok;
  bad[24] = 9;  // no such orientation
  EXPECT_EQ(exif_orientation(bad.data(), bad.size()), 1);
  bad = ok;
  bad[14] = 0xFF, bad[15] = 0xFF, bad[16] = 0x13;  // 65535 entries in a 32-byte segment, none the tag
  EXPECT_EQ(exif_orientation(bad.data(), bad.size()), 1);
}

TEST(Image, CenterCropPadsWhenLargerAndResizeKeepsTheSize) {
  const Image img = gradient(4, 3);
  const Image big = center_crop(img, 6, 5);  // 1 column and 1 row of zeros before, as transformers pads
  ASSERT_EQ(big.width, 6);
  ASSERT_EQ(big.height, 5);
  EXPECT_EQ(big.at(0, 0, 0), 0);
  EXPECT_EQ(big.at(1, 1, 0), img.at(0, 0, 0));
  EXPECT_EQ(big.at(4, 3, 2), img.at(3, 2, 2));
  EXPECT_EQ(resize(img, 4, 3, Resample::bicubic).rgb, img.rgb);
  EXPECT_NE(error_of([&] { resize(img, 0, 3, Resample::bilinear); }).find("out of range"), std::string::npos);
}

TEST(Image, ProcessorConfigErrorsNameTheKey) {
  std::string e = error_of([] { ImageProcessor::from_json(R"({"size": {"height": 8, "width": 8}, "image_men": [0, 0, 0]})", "p.json"); });
  EXPECT_NE(e.find("unknown key 'image_men' (did you mean 'image_mean'?)"), std::string::npos) << e;
  e = error_of([] { ImageProcessor::from_json(R"({"size": {"height": 8}})", "p.json"); });
  EXPECT_NE(e.find("key 'size'"), std::string::npos) << e;
  e = error_of([] { ImageProcessor::from_json(R"({"size": 8, "resample": 9})", "p.json"); });
  EXPECT_NE(e.find("resample 9"), std::string::npos) << e;
  e = error_of([] { ImageProcessor::from_json(R"({"size": 8, "image_std": [1, 0, 1]})", "p.json"); });
  EXPECT_NE(e.find("image_std"), std::string::npos) << e;
  const ImageProcessor p = ImageProcessor::from_json(R"({"size": 4, "do_normalize": false})", "p.json");
  const Tensor x = p(gradient(8, 8));
  EXPECT_EQ(x.shape(), (Shape{3, 4, 4}));
}
