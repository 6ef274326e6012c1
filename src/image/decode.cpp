// PNG and JPEG decoding (tfm/image.h). libpng and libjpeg report errors by longjmp out of
// their calls: each decoder keeps only plain C state between setjmp and the library calls,
// records the library's message, and throws once it is back in ordinary C++.
#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

// clang-format off
#include <png.h>
#include <jpeglib.h>
// clang-format on

#include "image/exif.h"
#include "tfm/error.h"
#include "tfm/image.h"

namespace tfm {
namespace {

void check_size(std::int64_t w, std::int64_t h, std::int64_t max_pixels, const std::string& where) {
  TFM_CHECK(w > 0 && h > 0, where, "image has no pixels (", w, "x", h, ")");
  TFM_CHECK(w <= max_pixels / h, where, "image is ", w, "x", h, " pixels, more than the limit of ", max_pixels);
}

// ---- PNG ---------------------------------------------------------------------------------
struct PngReadState {
  std::span<const std::uint8_t> bytes;
  std::size_t pos = 0;
  char message[256] = {};
  std::jmp_buf jump;
};

void png_error_fn(png_structp png, png_const_charp msg) {
  auto* s = static_cast<PngReadState*>(png_get_error_ptr(png));
  std::snprintf(s->message, sizeof s->message, "%s", msg);
  std::longjmp(s->jump, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}  // warnings (bad CRC in ancillary chunks, ...) are not errors

void png_read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* s = static_cast<PngReadState*>(png_get_io_ptr(png));
  if (n > s->bytes.size() - s->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, s->bytes.data() + s->pos, n);
  s->pos += n;
}

// Rows decoded to 8 bits per channel with 1 to 4 channels; palette expanded to RGB, 16-bit
// samples cut to their high byte (PIL's "RGB;16B"), transparency left out (PIL's
// convert("RGB") drops it).
struct PngRaw {
  png_uint_32 width = 0, height = 0;
  int channels = 0;
  std::vector<std::uint8_t> pixels;
};

// Returns false with state.message set on a libpng error. No C++ object with a destructor
// lives across the setjmp (raw is the caller's).
bool read_png_raw(PngReadState& state, PngRaw& raw, std::int64_t max_pixels) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &state, png_error_fn, png_warning_fn);
  if (png == nullptr) {
    std::snprintf(state.message, sizeof state.message, "libpng could not start");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  png_bytep* volatile rows = nullptr;  // volatile: read after a longjmp
  if (setjmp(state.jump)) {
    std::free(rows);
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  if (info == nullptr) png_error(png, "libpng could not start");
  png_set_read_fn(png, &state, png_read_fn);
  png_set_user_limits(png, 1u << 24, 1u << 24);
  png_set_chunk_malloc_max(png, 64u << 20);
  png_read_info(png, info);
  raw.width = png_get_image_width(png, info);
  raw.height = png_get_image_height(png, info);
  if (static_cast<std::int64_t>(raw.width) > max_pixels / std::max<std::int64_t>(1, raw.height)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return true;  // no pixels read: the caller's size check names the limit
  }
  const int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  raw.channels = png_get_channels(png, info);
  const png_size_t row_bytes = png_get_rowbytes(png, info);
  if (row_bytes != static_cast<png_size_t>(raw.width) * static_cast<png_size_t>(raw.channels))
    png_error(png, "unexpected row layout after the transforms");
  raw.pixels.resize(row_bytes * raw.height);  // no exception path: sizes are bounded by max_pixels
  rows = static_cast<png_bytep*>(std::malloc(sizeof(png_bytep) * raw.height));
  if (rows == nullptr) png_error(png, "out of memory");
  for (png_uint_32 y = 0; y < raw.height; ++y) rows[y] = raw.pixels.data() + y * row_bytes;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  std::free(rows);
  rows = nullptr;
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

Image decode_png(std::span<const std::uint8_t> bytes, const std::string& where, std::int64_t max_pixels) {
  PngReadState state;
  state.bytes = bytes;
  PngRaw raw;
  if (!read_png_raw(state, raw, max_pixels)) fail(where, "PNG: ", state.message);
  check_size(raw.width, raw.height, max_pixels, where);
  Image img;
  img.width = raw.width;
  img.height = raw.height;
  const std::size_t n = static_cast<std::size_t>(img.width * img.height);
  img.rgb.resize(n * 3);
  const int ch = raw.channels;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t* p = raw.pixels.data() + i * static_cast<std::size_t>(ch);
    std::uint8_t* o = img.rgb.data() + i * 3;
    if (ch >= 3) o[0] = p[0], o[1] = p[1], o[2] = p[2];  // RGB, RGBA: alpha dropped
    else o[0] = o[1] = o[2] = p[0];                      // grey, grey + alpha
  }
  return img;
}

// ---- JPEG --------------------------------------------------------------------------------
struct JpegError {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = {};
};

void jpeg_error_exit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  std::longjmp(e->jump, 1);
}
void jpeg_quiet(j_common_ptr, int) {}  // corrupt-data warnings: libjpeg recovers as PIL does

struct JpegRaw {
  JDIMENSION width = 0, height = 0;
  std::vector<std::uint8_t> rgb;
  int orientation = 1;
};

bool read_jpeg_raw(std::span<const std::uint8_t> bytes, JpegError& err, JpegRaw& raw, std::int64_t max_pixels) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_quiet;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&cinfo, TRUE);
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next)
    if (m->marker == JPEG_APP0 + 1) raw.orientation = exif_orientation(m->data, m->data_length);
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    std::snprintf(err.message, sizeof err.message, "CMYK JPEG files are not supported (convert to RGB)");
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  cinfo.out_color_space = JCS_RGB;
  if (static_cast<std::int64_t>(cinfo.image_width) > max_pixels / std::max<std::int64_t>(1, cinfo.image_height)) {
    // no pixels read: the caller's size check names the limit
    raw.width = cinfo.image_width;
    raw.height = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return true;
  }
  jpeg_start_decompress(&cinfo);
  raw.width = cinfo.output_width;
  raw.height = cinfo.output_height;
  if (cinfo.output_components != 3) {
    std::snprintf(err.message, sizeof err.message, "decoded to %d channels, expected 3", cinfo.output_components);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  raw.rgb.resize(static_cast<std::size_t>(raw.width) * raw.height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = raw.rgb.data() + static_cast<std::size_t>(cinfo.output_scanline) * raw.width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

// PIL's Image.Transpose for EXIF orientations 2..8 (ImageOps.exif_transpose's table).
// Taken by value: the common upright picture is moved through, not copied (a 1-megapixel copy
// cost a third of the JPEG decode, most of it in page faults).
Image orient(Image in, int orientation) {
  if (orientation < 2 || orientation > 8) return in;
  const bool swap = orientation >= 5;  // transpose, rotate 270, transverse, rotate 90
  Image out;
  out.width = swap ? in.height : in.width;
  out.height = swap ? in.width : in.height;
  out.rgb.resize(in.rgb.size());
  const std::int64_t w = in.width, h = in.height;
  for (std::int64_t y = 0; y < out.height; ++y)
    for (std::int64_t x = 0; x < out.width; ++x) {
      std::int64_t sx = x, sy = y;
      switch (orientation) {
        case 2: sx = w - 1 - x; break;                   // FLIP_LEFT_RIGHT
        case 3: sx = w - 1 - x, sy = h - 1 - y; break;   // ROTATE_180
        case 4: sy = h - 1 - y; break;                   // FLIP_TOP_BOTTOM
        case 5: sx = y, sy = x; break;                   // TRANSPOSE
        case 6: sx = y, sy = h - 1 - x; break;           // ROTATE_270 (clockwise)
        case 7: sx = w - 1 - y, sy = h - 1 - x; break;   // TRANSVERSE
        case 8: sx = w - 1 - y, sy = x; break;           // ROTATE_90 (counter-clockwise)
      }
      for (int c = 0; c < 3; ++c) out.rgb[static_cast<std::size_t>((y * out.width + x) * 3 + c)] = in.at(sx, sy, c);
    }
  return out;
}

Image decode_jpeg(std::span<const std::uint8_t> bytes, const std::string& where, std::int64_t max_pixels) {
  JpegError err;
  JpegRaw raw;
  if (!read_jpeg_raw(bytes, err, raw, max_pixels)) fail(where, "JPEG: ", err.message);
  check_size(raw.width, raw.height, max_pixels, where);
  Image img;
  img.width = raw.width;
  img.height = raw.height;
  img.rgb = std::move(raw.rgb);
  return orient(std::move(img), raw.orientation);
}

}  // namespace

Image decode_image(std::span<const std::uint8_t> bytes, const std::string& where, std::int64_t max_pixels) {
  static const std::uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), png_sig, 8) == 0) return decode_png(bytes, where, max_pixels);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF)
    return decode_jpeg(bytes, where, max_pixels);
  fail(where, "not a PNG or JPEG file (", bytes.size() < 4 ? "too short" : "unknown signature", ")");
}

Image read_image(const std::string& path, std::int64_t max_pixels) {
  std::ifstream f(path, std::ios::binary);
  TFM_CHECK(f.good(), path, "cannot open the image file");
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return decode_image(bytes, path, max_pixels);
}

}  // namespace tfm
