// PIL's resampling (Pillow 9's libImaging/Resample.c), written from its definition: for each
// output pixel a window of input pixels around the centre (x + 0.5) * scale, weighted by the
// filter at distance / max(scale, 1) (so reducing averages over the wider window: PIL's
// antialiasing), weights normalised to sum to 1 and turned into 22-bit fixed point; the
// horizontal pass writes 8-bit rows (only those the vertical pass reads), then the vertical
// pass. Nearest neighbour is PIL's affine transform: the input pixel under the output
// pixel's centre. Matching PIL's integer arithmetic is what makes the pixels equal, not just
// close.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tfm/error.h"
#include "tfm/image.h"

namespace tfm {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

struct Filter {
  double support;
  double (*weight)(double);
};

double box(double x) { return x > -0.5 && x <= 0.5 ? 1.0 : 0.0; }
double bilinear(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming(double x) {
  x = std::fabs(x);
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x *= std::numbers::pi;
  return std::sin(x) / x * (0.54f + 0.46f * std::cos(x));  // PIL's float constants
}
double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}
double sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= std::numbers::pi;
  return std::sin(x) / x;
}
double lanczos(double x) { return -3.0 <= x && x < 3.0 ? sinc(x) * sinc(x / 3) : 0.0; }

Filter filter_of(Resample r) {
  switch (r) {
    case Resample::box: return {0.5, box};
    case Resample::bilinear: return {1.0, bilinear};
    case Resample::hamming: return {1.0, hamming};
    case Resample::bicubic: return {2.0, bicubic};
    case Resample::lanczos: return {3.0, lanczos};
    case Resample::nearest: break;
  }
  return {1.0, bilinear};
}

// Per output position: the first input index, the count, and `ksize` fixed-point weights.
struct Coeffs {
  std::int64_t ksize = 0;
  std::vector<std::int64_t> first, count;
  std::vector<std::int32_t> k;
};

Coeffs precompute(std::int64_t in_size, std::int64_t out_size, const Filter& f) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = f.support * filterscale;
  Coeffs c;
  c.ksize = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
  c.first.resize(static_cast<std::size_t>(out_size));
  c.count.resize(static_cast<std::size_t>(out_size));
  c.k.assign(static_cast<std::size_t>(out_size * c.ksize), 0);
  std::vector<double> w(static_cast<std::size_t>(c.ksize));
  for (std::int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    std::int64_t xmin = static_cast<std::int64_t>(center - support + 0.5);  // C's truncation, as PIL
    if (xmin < 0) xmin = 0;
    std::int64_t xmax = static_cast<std::int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (std::int64_t x = 0; x < xmax; ++x) {
      w[static_cast<std::size_t>(x)] = f.weight((static_cast<double>(x + xmin) - center + 0.5) * ss);
      ww += w[static_cast<std::size_t>(x)];
    }
    for (std::int64_t x = 0; x < xmax; ++x) {
      double v = w[static_cast<std::size_t>(x)];
      if (ww != 0.0) v /= ww;
      const double fixed = v * static_cast<double>(1 << kPrecisionBits);
      c.k[static_cast<std::size_t>(xx * c.ksize + x)] = static_cast<std::int32_t>(v < 0 ? -0.5 + fixed : 0.5 + fixed);
    }
    c.first[static_cast<std::size_t>(xx)] = xmin;
    c.count[static_cast<std::size_t>(xx)] = xmax;
  }
  return c;
}

// PIL sums in 32-bit integers; with weights summing to 1 << 22 and 8-bit inputs the sums fit.
std::uint8_t clip8(std::int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Rows [y0, y0 + rows) of `in`, resampled horizontally to `out_w`.
Image horizontal(const Image& in, std::int64_t y0, std::int64_t rows, std::int64_t out_w, const Coeffs& c) {
  Image out;
  out.width = out_w;
  out.height = rows;
  out.rgb.resize(static_cast<std::size_t>(out_w * rows * 3));
  for (std::int64_t y = 0; y < rows; ++y) {
    const std::uint8_t* row = in.rgb.data() + (y0 + y) * in.width * 3;
    std::uint8_t* o = out.rgb.data() + y * out_w * 3;
    for (std::int64_t xx = 0; xx < out_w; ++xx) {
      const std::uint8_t* p = row + c.first[static_cast<std::size_t>(xx)] * 3;
      const std::int32_t* k = &c.k[static_cast<std::size_t>(xx * c.ksize)];
      std::int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (std::int64_t x = 0, n = c.count[static_cast<std::size_t>(xx)]; x < n; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      o[xx * 3 + 0] = clip8(s0);
      o[xx * 3 + 1] = clip8(s1);
      o[xx * 3 + 2] = clip8(s2);
    }
  }
  return out;
}

// `in` resampled vertically to `out_h`; coefficient rows are offset by `shift` (the rows the
// horizontal pass skipped). Each output row accumulates whole input rows (contiguous bytes).
Image vertical(const Image& in, std::int64_t out_h, const Coeffs& c, std::int64_t shift) {
  Image out;
  out.width = in.width;
  out.height = out_h;
  const std::int64_t row_bytes = in.width * 3;
  out.rgb.resize(static_cast<std::size_t>(row_bytes * out_h));
  std::vector<std::int32_t> acc(static_cast<std::size_t>(row_bytes));
  for (std::int64_t yy = 0; yy < out_h; ++yy) {
    const std::int64_t y0 = c.first[static_cast<std::size_t>(yy)] - shift, n = c.count[static_cast<std::size_t>(yy)];
    const std::int32_t* k = &c.k[static_cast<std::size_t>(yy * c.ksize)];
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    for (std::int64_t y = 0; y < n; ++y) {
      const std::uint8_t* p = in.rgb.data() + (y0 + y) * row_bytes;
      const std::int32_t w = k[y];
      for (std::int64_t i = 0; i < row_bytes; ++i) acc[static_cast<std::size_t>(i)] += p[i] * w;
    }
    std::uint8_t* o = out.rgb.data() + yy * row_bytes;
    for (std::int64_t i = 0; i < row_bytes; ++i) o[i] = clip8(acc[static_cast<std::size_t>(i)]);
  }
  return out;
}

Image nearest(const Image& in, std::int64_t w, std::int64_t h) {
  Image out;
  out.width = w;
  out.height = h;
  out.rgb.resize(static_cast<std::size_t>(w * h * 3));
  const double sx = static_cast<double>(in.width) / static_cast<double>(w);
  const double sy = static_cast<double>(in.height) / static_cast<double>(h);
  for (std::int64_t y = 0; y < h; ++y) {
    const std::int64_t iy = std::min<std::int64_t>(in.height - 1, static_cast<std::int64_t>((static_cast<double>(y) + 0.5) * sy));
    for (std::int64_t x = 0; x < w; ++x) {
      const std::int64_t ix = std::min<std::int64_t>(in.width - 1, static_cast<std::int64_t>((static_cast<double>(x) + 0.5) * sx));
      for (int c = 0; c < 3; ++c) out.rgb[static_cast<std::size_t>((y * w + x) * 3 + c)] = in.at(ix, iy, c);
    }
  }
  return out;
}

}  // namespace

Resample resample_from_id(std::int64_t id, const std::string& where) {
  TFM_CHECK(id >= 0 && id <= 5, where, "resample ", id,
            " is not one of PIL's filters (0 nearest, 1 lanczos, 2 bilinear, 3 bicubic, 4 box, 5 hamming)");
  return static_cast<Resample>(id);
}

Image resize(const Image& img, std::int64_t width, std::int64_t height, Resample filter) {
  TFM_CHECK(width > 0 && height > 0 && width <= (1 << 24) && height <= (1 << 24), "resize", "size ", width, "x",
            height, " is out of range");
  TFM_CHECK(img.width > 0 && img.height > 0, "resize", "the image is empty");
  if (filter == Resample::nearest) return nearest(img, width, height);
  const Filter f = filter_of(filter);
  const bool need_h = width != img.width, need_v = height != img.height;
  if (!need_h && !need_v) return img;
  const Coeffs ch = precompute(img.width, width, f), cv = precompute(img.height, height, f);
  // The input rows the vertical pass reads: only those are resampled horizontally.
  const std::int64_t first = cv.first[0];
  const std::int64_t last = cv.first[static_cast<std::size_t>(height - 1)] + cv.count[static_cast<std::size_t>(height - 1)];
  if (!need_v) return horizontal(img, 0, img.height, width, ch);
  if (!need_h) return vertical(img, height, cv, 0);
  return vertical(horizontal(img, first, last - first, width, ch), height, cv, first);
}

Image center_crop(const Image& img, std::int64_t width, std::int64_t height) {
  TFM_CHECK(width > 0 && height > 0, "center_crop", "crop size ", width, "x", height, " must be positive");
  // transformers' image_transforms.center_crop: floor division, zero padding when the crop is
  // larger than the image (centred with the extra pixel after: ceil for the leading pad).
  auto floor_div2 = [](std::int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  const std::int64_t new_h = std::max(height, img.height), new_w = std::max(width, img.width);
  const std::int64_t pad_top = (new_h - img.height + 1) / 2, pad_left = (new_w - img.width + 1) / 2;
  const std::int64_t top = floor_div2(img.height - height) + pad_top, left = floor_div2(img.width - width) + pad_left;
  const std::int64_t y0 = std::max<std::int64_t>(0, top), y1 = std::min(new_h, top + height);
  const std::int64_t x0 = std::max<std::int64_t>(0, left), x1 = std::min(new_w, left + width);
  Image out;
  out.width = x1 - x0;
  out.height = y1 - y0;
  out.rgb.assign(static_cast<std::size_t>(out.width * out.height * 3), 0);
  for (std::int64_t y = y0; y < y1; ++y)
    for (std::int64_t x = x0; x < x1; ++x) {
      const std::int64_t sy = y - pad_top, sx = x - pad_left;  // in the unpadded image
      if (sy < 0 || sy >= img.height || sx < 0 || sx >= img.width) continue;
      for (int c = 0; c < 3; ++c) out.rgb[static_cast<std::size_t>(((y - y0) * out.width + (x - x0)) * 3 + c)] = img.at(sx, sy, c);
    }
  return out;
}

}  // namespace tfm
