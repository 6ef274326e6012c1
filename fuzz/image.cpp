// Fuzz target: the PNG and JPEG decoders on arbitrary bytes (libpng and libjpeg-turbo behind
// tfm's error handling). Bad input must be a tfm::Error; a decoded image must hold exactly
// width x height RGB pixels (each read, so ASan sees an overrun), and its PNG must decode back
// to the same pixels. Seeds: fuzz/make_image_corpus.py.
#include <cstdint>
#include <span>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/image.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tfm::Image img;
  try {
    img = tfm::decode_image(std::span<const std::uint8_t>(data, size), "fuzz", 1 << 22);
  } catch (const tfm::Error&) {
    return 0;
  }
  tfm::fuzz::require(img.width > 0 && img.height > 0, "a decoded image has pixels");
  tfm::fuzz::require(img.rgb.size() == static_cast<std::size_t>(img.width * img.height * 3), "width x height x 3 bytes");
  unsigned sum = 0;
  for (const std::uint8_t b : img.rgb) sum += b;
  const std::string png = tfm::encode_png(img);
  const tfm::Image back = tfm::decode_image(
      std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(png.data()), png.size()), "fuzz png");
  tfm::fuzz::require(back.width == img.width && back.height == img.height && back.rgb == img.rgb,
                     "the PNG of a decoded image decodes to the same pixels");
  return static_cast<int>(sum & 0);
}
