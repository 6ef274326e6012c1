// Images as the vision models read them, and the preprocessing Hugging Face's image processors
// do, step by step (docs/vision.md):
//
//   tfm::Image img = tfm::read_image("cat.jpg");                  // PNG or JPEG -> 8-bit RGB
//   tfm::ImageProcessor p = tfm::ImageProcessor::load("model/");   // preprocessor_config.json
//   tfm::Tensor x = p(img);                                       // (3, H, W) f32, normalised
//
// Decoding goes through libpng and libjpeg-turbo, the libraries PIL itself decodes with, so the
// pixels equal PIL's; resizing follows PIL's resampling (its filters, supports and 8-bit fixed
// point), so a processor's output equals transformers' on the same file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tfm/tensor.h"

namespace tfm {

// 8-bit RGB, rows top to bottom, pixels left to right: rgb[(y * width + x) * 3 + c].
struct Image {
  std::int64_t width = 0, height = 0;
  std::vector<std::uint8_t> rgb;
  std::uint8_t at(std::int64_t x, std::int64_t y, int c) const {
    return rgb[static_cast<std::size_t>((y * width + x) * 3 + c)];
  }
};

// PNG or JPEG bytes (told apart by their signature) as RGB: grey, grey + alpha, RGBA, palette
// and 16-bit PNGs as PIL's convert("RGB") gives them (alpha dropped, 16-bit to its high byte);
// a JPEG's EXIF orientation applied, as transformers' load_image does. A truncated, corrupt or
// oversized file (more than `max_pixels` pixels) is one tfm::Error naming `where`.
Image decode_image(std::span<const std::uint8_t> bytes, const std::string& where,
                   std::int64_t max_pixels = 1LL << 28);
Image read_image(const std::string& path, std::int64_t max_pixels = 1LL << 28);
// An image in an RFC 2397 data: URL ("data:image/png;base64,..."), as requests carry them;
// anything else (an http URL included: nothing is fetched) is an error naming `where`.
Image decode_data_url(std::string_view url, const std::string& where, std::int64_t max_pixels = 1LL << 28);
// PNG bytes of an RGB image (pictures the CLI writes: attention over an image).
std::string encode_png(const Image& img);
void write_png(const std::string& path, const Image& img);

// ---- labelled image sets ---------------------------------------------------------------
// An IDX array (LeCun's MNIST format; Fashion-MNIST's too), gzip-compressed or not: big-endian
// dimensions and unsigned bytes. Other element types, a short or long body, more than
// `max_bytes` once uncompressed: one tfm::Error naming the file.
struct IdxArray {
  std::vector<std::int64_t> dims;
  std::vector<std::uint8_t> data;
};
IdxArray read_idx(const std::string& path, std::int64_t max_bytes = 1LL << 31);
// Images with their class ids; label_names[id] names a class.
struct LabeledImages {
  std::vector<Image> images;
  std::vector<std::int64_t> labels;
  std::vector<std::string> label_names;
};
// An IDX image file (count, rows, columns) of grey pixels, as RGB, and its IDX label file;
// the classes are named "0".."N-1" (a config's labels name them).
LabeledImages read_idx_images(const std::string& images_path, const std::string& labels_path);
// root/<class>/<image>.png|.jpg: the classes are the sub-folders, sorted by name unless
// `classes` lists them (a model's id2label order); files in name order.
LabeledImages read_image_folder(const std::string& root, const std::vector<std::string>& classes = {});

// ---- augmentation primitives (the training data pipeline draws their arguments) ----------
Image pad_image(const Image& img, std::int64_t pad);  // zeros on every side
Image crop_image(const Image& img, std::int64_t left, std::int64_t top, std::int64_t width, std::int64_t height);
Image flip_horizontal(const Image& img);

// ---- preprocessing ---------------------------------------------------------------------
// PIL's resampling filters, with the ids transformers writes in preprocessor_config.json's
// "resample" (PIL.Image.Resampling).
enum class Resample { nearest = 0, lanczos = 1, bilinear = 2, bicubic = 3, box = 4, hamming = 5 };
Resample resample_from_id(std::int64_t id, const std::string& where);

// PIL's Image.resize(size, resample) on RGB: separable passes (horizontal, then vertical) with
// the filter's support widened by the scale when reducing (antialiasing), coefficients in
// 22-bit fixed point and 8-bit intermediate rows, as PIL computes them.
Image resize(const Image& img, std::int64_t width, std::int64_t height, Resample filter);
// transformers' center_crop: the (height, width) window at the centre, rounding as it does;
// a crop larger than the image pads with zeros.
Image center_crop(const Image& img, std::int64_t width, std::int64_t height);

// One step of an image processor's pipeline (like the tokenizer's normalizers).
class ImageStep {
 public:
  virtual ~ImageStep() = default;
  virtual Image apply(const Image& img) const = 0;
  virtual std::string describe() const = 0;
};

// Hugging Face's ViTImageProcessor / CLIPImageProcessor / DeiTImageProcessor as configured by
// preprocessor_config.json: convert to RGB, resize (to {height, width}, or so that the
// shortest edge has a length, keeping the aspect ratio), center crop, rescale and normalise.
// Unknown keys of the file are refused, each named.
class ImageProcessor {
 public:
  static ImageProcessor from_json(const std::string& json_text, const std::string& where);
  // DIR/preprocessor_config.json
  static ImageProcessor load(const std::string& dir);
  // The 8-bit steps (resize, crop) in order.
  const std::vector<std::shared_ptr<const ImageStep>>& steps() const { return steps_; }
  Image prepare(const Image& img) const;  // the 8-bit steps only
  // (3, H, W) f32: prepare(), then rescale and normalise per channel.
  Tensor operator()(const Image& img) const;
  // Rescale and normalise an image prepare() gave into out[(c * H + y) * W + x].
  void to_pixels(const Image& prepared, float* out) const;
  // The JSON it was read from (a trained model directory saves it as preprocessor_config.json).
  const std::string& source_json() const { return source_json_; }
  std::string describe() const;

  double rescale_factor = 1.0 / 255.0;
  bool do_rescale = true, do_normalize = true;
  float mean[3] = {0.5f, 0.5f, 0.5f}, std[3] = {0.5f, 0.5f, 0.5f};

 private:
  std::vector<std::shared_ptr<const ImageStep>> steps_;
  std::string source_json_;
};

}  // namespace tfm
