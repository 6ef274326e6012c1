// Labelled image sets for training and evaluation: the IDX files MNIST and Fashion-MNIST ship
// as (optionally gzip-compressed; Debian's dataset-fashion-mnist installs them so), and image
// folders with one sub-folder per class (torchvision's ImageFolder layout).
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

// The whole file, gunzipped when it starts with gzip's magic bytes. zlib's gzread passes
// other bytes through unchanged, so one reader serves both; its errors name the file.
std::string read_maybe_gzip(const std::string& path, std::int64_t max_bytes) {
  TFM_CHECK(fs::is_regular_file(path), path, "file not found");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  TFM_CHECK(f != nullptr, path, "cannot open");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      fail(path, "corrupt gzip stream (", msg != nullptr ? msg : "unknown error", ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
    TFM_CHECK(static_cast<std::int64_t>(out.size()) <= max_bytes, path, "more than ", max_bytes, " bytes once uncompressed");
  }
  // gzread ends a gzip stream cut short like a whole one; the error state (Z_BUF_ERROR: the
  // input ended inside the stream) tells them apart.
  int code = 0;
  gzerror(f.get(), &code);
  TFM_CHECK(code == Z_OK, path, code == Z_BUF_ERROR ? "truncated gzip stream" : "corrupt gzip stream");
  return out;
}

std::uint32_t big_endian_u32(const std::string& s, std::size_t at) {
  return static_cast<std::uint32_t>(static_cast<unsigned char>(s[at])) << 24 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 1])) << 16 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 2])) << 8 |
         static_cast<std::uint32_t>(static_cast<unsigned char>(s[at + 3]));
}

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

}  // namespace

IdxArray read_idx(const std::string& path, std::int64_t max_bytes) {
  const std::string b = read_maybe_gzip(path, max_bytes);
  TFM_CHECK(b.size() >= 4 && b[0] == 0 && b[1] == 0, path, "not an IDX file (its first two bytes must be zero)");
  const auto type = static_cast<unsigned char>(b[2]);
  TFM_CHECK(type == 0x08, path, "IDX element type 0x", std::hex, static_cast<int>(type), std::dec,
            " is not supported (unsigned bytes, 0x08, are what image and label files hold)");
  const auto ndims = static_cast<std::size_t>(static_cast<unsigned char>(b[3]));
  TFM_CHECK(ndims >= 1 && ndims <= 4, path, "IDX with ", ndims, " dimensions (1 to 4 are supported)");
  TFM_CHECK(b.size() >= 4 + 4 * ndims, path, "truncated header: ", b.size(), " bytes for ", ndims, " dimensions");
  IdxArray a;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < ndims; ++i) {
    a.dims.push_back(big_endian_u32(b, 4 + 4 * i));
    TFM_CHECK(a.dims.back() > 0, path, "dimension ", i, " is zero");
    count *= a.dims.back();
    TFM_CHECK(count <= max_bytes, path, "dimensions hold more than ", max_bytes, " elements");
  }
  const std::size_t header = 4 + 4 * ndims;
  TFM_CHECK(b.size() - header == static_cast<std::size_t>(count), path, "holds ", b.size() - header,
            " data bytes; its header's dimensions need ", count);
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(header), b.end());
  return a;
}

LabeledImages read_idx_images(const std::string& images_path, const std::string& labels_path) {
  const IdxArray im = read_idx(images_path), lb = read_idx(labels_path);
  TFM_CHECK(im.dims.size() == 3, images_path, "IDX images must be (count, rows, columns), got ", im.dims.size(),
            " dimensions");
  TFM_CHECK(lb.dims.size() == 1, labels_path, "IDX labels must be one dimension (count), got ", lb.dims.size());
  TFM_CHECK(lb.dims[0] == im.dims[0], labels_path, "holds ", lb.dims[0], " labels for the ", im.dims[0], " images of ",
            images_path);
  LabeledImages out;
  const std::int64_t n = im.dims[0], h = im.dims[1], w = im.dims[2];
  std::int64_t classes = 0;
  for (std::uint8_t l : lb.data) classes = std::max<std::int64_t>(classes, l + 1);
  for (std::int64_t c = 0; c < classes; ++c) out.label_names.push_back(std::to_string(c));
  out.images.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    Image img;
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<std::size_t>(w * h * 3));
    const std::uint8_t* grey = im.data.data() + i * w * h;
    for (std::int64_t p = 0; p < w * h; ++p)  // grey to RGB as PIL's convert("RGB"): the value thrice
      std::fill_n(img.rgb.begin() + p * 3, 3, grey[p]);
    out.images.push_back(std::move(img));
    out.labels.push_back(lb.data[static_cast<std::size_t>(i)]);
  }
  return out;
}

LabeledImages read_image_folder(const std::string& root, const std::vector<std::string>& classes) {
  TFM_CHECK(fs::is_directory(root), root, "image folder not found (expected one sub-folder of images per class)");
  LabeledImages out;
  if (classes.empty()) {
    for (const auto& e : fs::directory_iterator(root))
      if (e.is_directory()) out.label_names.push_back(e.path().filename().string());
    std::sort(out.label_names.begin(), out.label_names.end());
  } else {
    out.label_names = classes;
  }
  TFM_CHECK(out.label_names.size() >= 2, root, "needs at least two class folders, found ", out.label_names.size());
  for (std::size_t c = 0; c < out.label_names.size(); ++c) {
    const fs::path dir = fs::path(root) / out.label_names[c];
    TFM_CHECK(fs::is_directory(dir), dir.string(), "class folder not found (the classes are: ", out.label_names.size(),
              " named by the model or the config)");
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && is_image_file(e.path())) files.push_back(e.path());
    std::sort(files.begin(), files.end());  // a fixed order: splits and epochs depend only on the seed
    for (const auto& f : files) {
      out.images.push_back(read_image(f.string()));
      out.labels.push_back(static_cast<std::int64_t>(c));
    }
  }
  TFM_CHECK(!out.images.empty(), root, "holds no .png or .jpg files in its class folders");
  return out;
}

Image pad_image(const Image& img, std::int64_t pad) {
  Image out;
  out.width = img.width + 2 * pad;
  out.height = img.height + 2 * pad;
  out.rgb.assign(static_cast<std::size_t>(out.width * out.height * 3), 0);
  for (std::int64_t y = 0; y < img.height; ++y)
    std::copy_n(img.rgb.begin() + y * img.width * 3, img.width * 3, out.rgb.begin() + ((y + pad) * out.width + pad) * 3);
  return out;
}

Image crop_image(const Image& img, std::int64_t left, std::int64_t top, std::int64_t width, std::int64_t height) {
  TFM_CHECK(left >= 0 && top >= 0 && width > 0 && height > 0 && left + width <= img.width && top + height <= img.height,
            "crop", "window (", left, ", ", top, ") ", width, "x", height, " lies outside the ", img.width, "x", img.height,
            " image");
  Image out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<std::size_t>(width * height * 3));
  for (std::int64_t y = 0; y < height; ++y)
    std::copy_n(img.rgb.begin() + ((top + y) * img.width + left) * 3, width * 3, out.rgb.begin() + y * width * 3);
  return out;
}

Image flip_horizontal(const Image& img) {
  Image out = img;
  for (std::int64_t y = 0; y < img.height; ++y)
    for (std::int64_t x = 0; x < img.width; ++x)
      std::copy_n(img.rgb.begin() + (y * img.width + x) * 3, 3, out.rgb.begin() + (y * img.width + img.width - 1 - x) * 3);
  return out;
}

}  // namespace tfm
