// ImageProcessor (tfm/image.h): transformers' ViT / DeiT / CLIP image processors as a list of
// 8-bit steps (resize, center crop) followed by rescale and normalise, in the order and with
// the arithmetic of transformers' BaseImageProcessor: the 8-bit image times rescale_factor in
// float64 rounded to float32, then (x - mean) / std in float32.
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"

namespace tfm {
namespace {

using json = nlohmann::json;

class ResizeTo : public ImageStep {
 public:
  ResizeTo(std::int64_t w, std::int64_t h, Resample r) : w_(w), h_(h), r_(r) {}
  Image apply(const Image& img) const override { return resize(img, w_, h_, r_); }
  std::string describe() const override {
    return "resize to " + std::to_string(w_) + "x" + std::to_string(h_) + " (resample " +
           std::to_string(static_cast<int>(r_)) + ")";
  }

 private:
  std::int64_t w_, h_;
  Resample r_;
};

// transformers' get_resize_output_image_size with default_to_square=False: the shorter side
// becomes `edge`, the longer int(edge * long / short).
class ResizeShortestEdge : public ImageStep {
 public:
  ResizeShortestEdge(std::int64_t edge, Resample r) : edge_(edge), r_(r) {}
  Image apply(const Image& img) const override {
    const bool portrait = img.width <= img.height;
    const std::int64_t s = portrait ? img.width : img.height, l = portrait ? img.height : img.width;
    const auto long_side = static_cast<std::int64_t>(static_cast<double>(edge_) * static_cast<double>(l) / static_cast<double>(s));
    return portrait ? resize(img, edge_, long_side, r_) : resize(img, long_side, edge_, r_);
  }
  std::string describe() const override {
    return "resize shortest edge to " + std::to_string(edge_) + " (resample " + std::to_string(static_cast<int>(r_)) + ")";
  }

 private:
  std::int64_t edge_;
  Resample r_;
};

class CenterCrop : public ImageStep {
 public:
  CenterCrop(std::int64_t w, std::int64_t h) : w_(w), h_(h) {}
  Image apply(const Image& img) const override { return center_crop(img, w_, h_); }
  std::string describe() const override { return "center crop " + std::to_string(w_) + "x" + std::to_string(h_); }

 private:
  std::int64_t w_, h_;
};

std::int64_t positive_int(const json& v, const std::string& key, const std::string& where) {
  TFM_CHECK(v.is_number_integer() && v.get<std::int64_t>() > 0 && v.get<std::int64_t>() <= (1 << 16), where, "key '", key,
            "' must be a positive integer (at most 65536), got ", v.dump());
  return v.get<std::int64_t>();
}

// {"height": h, "width": w} -> (w, h); {"shortest_edge": s} -> (s, 0); an int n -> (n, n), or
// (n, 0) when an int means the shortest edge (CLIP's older files).
std::pair<std::int64_t, std::int64_t> size_of(const json& v, const std::string& key, const std::string& where,
                                              bool int_is_shortest_edge) {
  if (v.is_number_integer()) {
    const std::int64_t n = positive_int(v, key, where);
    return int_is_shortest_edge ? std::pair{n, std::int64_t{0}} : std::pair{n, n};
  }
  TFM_CHECK(v.is_object(), where, "key '", key, "' must be an integer or an object, got ", v.dump());
  if (v.contains("shortest_edge")) {
    TFM_CHECK(v.size() == 1, where, "key '", key, "': shortest_edge alone is supported, got ", v.dump());
    return {positive_int(v["shortest_edge"], key + ".shortest_edge", where), 0};
  }
  TFM_CHECK(v.size() == 2 && v.contains("height") && v.contains("width"), where, "key '", key,
            "' must be {\"height\", \"width\"} or {\"shortest_edge\"}, got ", v.dump());
  return {positive_int(v["width"], key + ".width", where), positive_int(v["height"], key + ".height", where)};
}

void read_triple(const json& v, const std::string& key, const std::string& where, float out[3], bool positive) {
  TFM_CHECK(v.is_array() && v.size() == 3, where, "key '", key, "' must be a list of 3 numbers, got ", v.dump());
  for (int c = 0; c < 3; ++c) {
    TFM_CHECK(v[c].is_number() && std::isfinite(v[c].get<double>()) && (!positive || v[c].get<double>() > 0), where,
              "key '", key, "' must hold finite numbers", positive ? " > 0" : "", ", got ", v.dump());
    out[c] = static_cast<float>(v[c].get<double>());
  }
}

bool read_bool(const json& v, const std::string& key, const std::string& where) {
  TFM_CHECK(v.is_boolean(), where, "key '", key, "' must be true or false, got ", v.dump());
  return v.get<bool>();
}

}  // namespace

ImageProcessor ImageProcessor::from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(where, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object(), where, "an image processor config must be a JSON object");
  static const std::vector<std::string> known = {
      "do_resize", "size", "resample", "do_center_crop", "crop_size", "do_rescale", "rescale_factor", "do_normalize",
      "image_mean", "image_std", "do_convert_rgb", "image_processor_type", "feature_extractor_type",
      "processor_class", "_processor_class"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& k : known) ok = ok || k == it.key();
    const std::string closest = ok ? "" : closest_name(it.key(), known);
    TFM_CHECK(ok, where, "unknown key '", it.key(), "'", closest.empty() ? "" : " (did you mean '" + closest + "'?)");
  }
  const std::string type = j.value("image_processor_type", j.value("feature_extractor_type", std::string()));
  const bool clip = type.rfind("CLIP", 0) == 0;
  TFM_CHECK(!j.contains("do_convert_rgb") || j["do_convert_rgb"].is_null() || read_bool(j["do_convert_rgb"], "do_convert_rgb", where),
            where, "do_convert_rgb false is not supported: images are decoded to RGB");
  ImageProcessor p;
  p.source_json_ = j.dump(2);
  // The class defaults: ViT's and DeiT's processors resample bilinearly, CLIP's bicubically.
  Resample r = clip ? Resample::bicubic : Resample::bilinear;
  if (j.contains("resample")) {
    TFM_CHECK(j["resample"].is_number_integer(), where, "key 'resample' must be an integer, got ", j["resample"].dump());
    r = resample_from_id(j["resample"].get<std::int64_t>(), where);
  }
  if (!j.contains("do_resize") || read_bool(j["do_resize"], "do_resize", where)) {
    TFM_CHECK(j.contains("size"), where, "do_resize needs 'size'");
    const auto [w, h] = size_of(j["size"], "size", where, clip);
    if (h == 0) p.steps_.push_back(std::make_shared<ResizeShortestEdge>(w, r));
    else p.steps_.push_back(std::make_shared<ResizeTo>(w, h, r));
  }
  if (j.contains("do_center_crop") && read_bool(j["do_center_crop"], "do_center_crop", where)) {
    TFM_CHECK(j.contains("crop_size"), where, "do_center_crop needs 'crop_size'");
    const auto [w, h] = size_of(j["crop_size"], "crop_size", where, false);
    TFM_CHECK(h > 0, where, "crop_size must be {\"height\", \"width\"} or an integer");
    p.steps_.push_back(std::make_shared<CenterCrop>(w, h));
  }
  if (j.contains("do_rescale")) p.do_rescale = read_bool(j["do_rescale"], "do_rescale", where);
  if (j.contains("rescale_factor")) {
    TFM_CHECK(j["rescale_factor"].is_number() && std::isfinite(j["rescale_factor"].get<double>()), where,
              "key 'rescale_factor' must be a number, got ", j["rescale_factor"].dump());
    p.rescale_factor = j["rescale_factor"].get<double>();
  }
  if (j.contains("do_normalize")) p.do_normalize = read_bool(j["do_normalize"], "do_normalize", where);
  if (j.contains("image_mean")) read_triple(j["image_mean"], "image_mean", where, p.mean, false);
  if (j.contains("image_std")) read_triple(j["image_std"], "image_std", where, p.std, true);
  return p;
}

ImageProcessor ImageProcessor::load(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "preprocessor_config.json").string();
  return from_json(read_file(path), path);
}

Image ImageProcessor::prepare(const Image& img) const {
  Image x = img;
  for (const auto& s : steps_) x = s->apply(x);
  return x;
}

Tensor ImageProcessor::operator()(const Image& img) const {
  const Image x = prepare(img);
  Tensor out = Tensor::empty({3, x.height, x.width});
  to_pixels(x, out.data<float>());
  return out;
}

void ImageProcessor::to_pixels(const Image& x, float* o) const {
  const std::int64_t H = x.height, W = x.width;
  for (int c = 0; c < 3; ++c)
    for (std::int64_t y = 0; y < H; ++y)
      for (std::int64_t xx = 0; xx < W; ++xx) {
        float v = x.at(xx, y, c);
        if (do_rescale) v = static_cast<float>(static_cast<double>(x.at(xx, y, c)) * rescale_factor);
        if (do_normalize) v = (v - mean[c]) / std[c];
        o[(c * H + y) * W + xx] = v;
      }
}

std::string ImageProcessor::describe() const {
  std::string s;
  for (const auto& step : steps_) s += step->describe() + "; ";
  if (do_rescale) s += "rescale x" + std::to_string(rescale_factor) + "; ";
  if (do_normalize) s += "normalize";
  return s;
}

}  // namespace tfm
