// Image models' embeddings (model_impl.h embed_patches): pixels cut into patches, one GEMM
// for the stride = kernel convolution, the [CLS] / distillation tokens, and the positions for
// the picture's patch grid (the learned table, resized when the grid differs; or a fixed 2-D
// sin-cos table).
#include <algorithm>
#include <cmath>

#include "models/layout.h"
#include "models/model_impl.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::model_detail {

namespace {

// The patches of (B, ch, H, W) pixels as rows (B, N, ch * p * p), in the order a convolution
// with stride = kernel visits them (row-major patches, each flattened channel, row, column
// like the kernel's (C, ch, p, p) weight), so one GEMM with the reshaped kernel computes it.
Tensor image_patches(const Tensor& pixels, std::int64_t p) {
  const Tensor x = pixels.dtype() == DType::f32 && pixels.is_contiguous() ? pixels : contiguous(cast(pixels, DType::f32));
  const std::int64_t B = x.size(0), ch = x.size(1), H = x.size(2), W = x.size(3), gh = H / p, gw = W / p;
  Tensor out = Tensor::empty({B, gh * gw, ch * p * p});
  const float* in = x.data<float>();
  float* o = out.data<float>();
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t py = 0; py < gh; ++py)
      for (std::int64_t px = 0; px < gw; ++px)
        for (std::int64_t c = 0; c < ch; ++c)
          for (std::int64_t y = 0; y < p; ++y)
            for (std::int64_t xx = 0; xx < p; ++xx)
              *o++ = in[((b * ch + c) * H + py * p + y) * W + px * p + xx];
  return out;
}

// PyTorch's bicubic interpolation (upsample_bicubic2d, align_corners=False, A = -0.75, an
// output size given) along one axis as an (out, in) matrix: row o weighs the four inputs
// around (o + 0.5) * in / out - 0.5, indices clamped at the borders.
std::vector<double> bicubic_matrix(std::int64_t in, std::int64_t out) {
  constexpr double A = -0.75;
  auto near = [](double x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };        // |x| <= 1
  auto far = [](double x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };  // 1 < |x| < 2
  std::vector<double> m(static_cast<std::size_t>(out * in), 0.0);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    const double src = (static_cast<double>(o) + 0.5) * scale - 0.5;
    const double f = std::floor(src), t = src - f;
    const double w[4] = {far(t + 1), near(t), near(1 - t), far(2 - t)};
    for (int k = 0; k < 4; ++k) {
      const std::int64_t i = std::clamp<std::int64_t>(static_cast<std::int64_t>(f) - 1 + k, 0, in - 1);
      m[static_cast<std::size_t>(o * in + i)] += w[k];
    }
  }
  return m;
}

// MAE's fixed 2-D sin-cos positions for a gh x gw grid (1, gh * gw, C): the first C/2 columns
// encode the patch's column, the last C/2 its row, each as sin then cos of pos * 10000^(-k/(C/4)).
Tensor sincos_2d_positions(std::int64_t gh, std::int64_t gw, std::int64_t C) {
  const std::int64_t q = C / 4;
  std::vector<float> t(static_cast<std::size_t>(gh * gw * C));
  for (std::int64_t y = 0; y < gh; ++y)
    for (std::int64_t x = 0; x < gw; ++x) {
      float* row = t.data() + (y * gw + x) * C;
      for (std::int64_t k = 0; k < q; ++k) {
        const double omega = 1.0 / std::pow(10000.0, static_cast<double>(k) / static_cast<double>(q));
        row[k] = static_cast<float>(std::sin(static_cast<double>(x) * omega));
        row[q + k] = static_cast<float>(std::cos(static_cast<double>(x) * omega));
        row[2 * q + k] = static_cast<float>(std::sin(static_cast<double>(y) * omega));
        row[3 * q + k] = static_cast<float>(std::cos(static_cast<double>(y) * omega));
      }
    }
  return Tensor::from_floats(t, {1, gh * gw, C});
}

// The positions of a gh x gw patch grid after the prefix tokens, (1, prefix + gh * gw, C), or
// undefined: the learned table as is for image_size pictures, else its patch part resized
// bicubically as Hugging Face's interpolate_pos_encoding does (one constant matrix, so the
// gradient reaches the table); the fixed 2-D table computed for the grid (prefix rows zero).
Tensor image_positions(const Model::Impl& m, std::int64_t gh, std::int64_t gw) {
  const ModelConfig& c = m.cfg;
  const std::int64_t C = c.d_model, prefix = c.prefix_tokens(), g = c.image_size / c.patch_size;
  if (c.position == PositionKind::sincos_2d) {
    const Tensor grid = sincos_2d_positions(gh, gw, C);
    return prefix == 0 ? grid : concat({Tensor::zeros({1, prefix, C}), grid}, 1);
  }
  if (!m.layout.pos_emb.defined()) return Tensor();
  const Tensor table = m.layout.pos_emb.dim() == 2 ? unsqueeze(m.layout.pos_emb, 0) : m.layout.pos_emb;  // CLIP's (T, C)
  if (gh == g && gw == g) return table;
  const std::vector<double> mh = bicubic_matrix(g, gh), mw = bicubic_matrix(g, gw);
  std::vector<float> k(static_cast<std::size_t>(gh * gw * g * g));  // kron(mh, mw): (gh gw, g g)
  for (std::int64_t i = 0; i < gh; ++i)
    for (std::int64_t j = 0; j < gw; ++j)
      for (std::int64_t a = 0; a < g; ++a)
        for (std::int64_t b = 0; b < g; ++b)
          k[static_cast<std::size_t>(((i * gw + j) * g + a) * g + b)] =
              static_cast<float>(mh[static_cast<std::size_t>(i * g + a)] * mw[static_cast<std::size_t>(j * g + b)]);
  const Tensor patches = reshape(slice(table, 1, prefix, prefix + g * g), {g * g, C});
  const Tensor resized = reshape(matmul(Tensor::from_floats(k, {gh * gw, g * g}), patches), {1, gh * gw, C});
  return prefix == 0 ? resized : concat({slice(table, 1, 0, prefix), resized}, 1);
}

}  // namespace

// ViT's embeddings: [CLS] (and DeiT's distillation token), then one token per patch, plus the
// positions. Pictures of another size than image_size get their positions interpolated.
Tensor embed_patches(const Model::Impl& m, const Tensor& pixels, nn::DropoutStream& rng) {
  const ModelConfig& c = m.cfg;
  const Layout& l = m.layout;
  TFM_CHECK(pixels.defined() && pixels.dim() == 4 && dtype_is_float(pixels.dtype()), "model",
            "pixel_values must be a (B, channels, H, W) float tensor, got ", pixels.defined() ? pixels.str() : std::string("nothing"));
  TFM_CHECK(pixels.size(1) == c.num_channels && pixels.size(2) >= c.patch_size && pixels.size(3) >= c.patch_size, "model",
            "pixel_values ", shape_str(pixels.shape()), " do not fit the model's ", c.num_channels, "-channel images of ",
            c.patch_size, " x ", c.patch_size, " patches or more");
  TFM_CHECK(!pixels.requires_grad(), "model", "pixel_values are an input: no gradient flows into them");
  const std::int64_t B = pixels.size(0), C = c.d_model, gh = pixels.size(2) / c.patch_size, gw = pixels.size(3) / c.patch_size;
  const Tensor kernel = reshape(l.patch_weight, {C, c.num_channels * c.patch_size * c.patch_size});
  Tensor x = linear(image_patches(pixels, c.patch_size), kernel, l.patch_bias);  // (B, N, C)
  std::vector<Tensor> prefix;
  if (l.cls_token.defined()) prefix.push_back(expand(reshape(l.cls_token, {1, 1, C}), {B, 1, C}));  // CLIP's is (C)
  if (l.dist_token.defined()) prefix.push_back(expand(l.dist_token, {B, 1, C}));
  if (!prefix.empty()) {
    prefix.push_back(x);
    x = concat(prefix, 1);
  }
  const Tensor positions = image_positions(m, gh, gw);
  if (positions.defined()) x = add(x, positions);  // (1, T, C) broadcast
  if (l.has_embed_norm) x = l.embed_norm(x);        // CLIP's pre_layrnorm
  return rng.apply(x, c.embedding_dropout);
}

}  // namespace tfm::model_detail
