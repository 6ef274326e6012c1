// PNG writing (tfm/image.h): 8-bit RGB, no interlace, default compression.
#include <csetjmp>
#include <cstdio>

#include <png.h>

#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

struct PngWriteState {
  std::string* out = nullptr;
  char message[256] = {};
  std::jmp_buf jump;
};

void write_error(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngWriteState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", msg);
  std::longjmp(s->jump, 1);
}
void write_warning(png_structp, png_const_charp) {}
void write_bytes(png_structp png, png_bytep data, png_size_t n) {
  static_cast<PngWriteState*>(png_get_io_ptr(png))->out->append(reinterpret_cast<const char*>(data), n);
}
void flush_nothing(png_structp) {}

bool encode(const Image& img, PngWriteState& s) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, write_error, write_warning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (setjmp(s.jump)) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  if (info == nullptr) png_error(png, "libpng could not start");
  png_set_write_fn(png, &s, write_bytes, flush_nothing);
  png_set_IHDR(png, info, static_cast<png_uint_32>(img.width), static_cast<png_uint_32>(img.height), 8,
               PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (std::int64_t y = 0; y < img.height; ++y)
    png_write_row(png, const_cast<png_bytep>(img.rgb.data() + y * img.width * 3));
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

std::string encode_png(const Image& img) {
  TFM_CHECK(img.width > 0 && img.height > 0 && img.rgb.size() == static_cast<std::size_t>(img.width * img.height * 3),
            "png", "image of ", img.width, "x", img.height, " holds ", img.rgb.size(), " bytes");
  std::string out;
  PngWriteState s;
  s.out = &out;
  TFM_CHECK(encode(img, s), "png", "cannot encode: ", s.message);
  return out;
}

void write_png(const std::string& path, const Image& img) { write_file_atomic(path, encode_png(img)); }

}  // namespace tfm
