// Speech models' embeddings (model_impl.h embed_audio): Whisper's stem, two convolutions of
// width 3 over the log-mel frames (the second of stride 2, halving 10 ms frames to 20 ms
// tokens), each followed by GELU, then the encoder's position table. Each convolution is one
// GEMM over the frames' windows, built from differentiable shape ops so training reaches the
// kernels through autograd.
#include "models/layout.h"
#include "models/model_impl.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::model_detail {

namespace {

// nn.Conv1d(kernel 3, padding 1, stride 1 or 2) over time-major x (B, T, Cin) with weight
// (Cout, Cin, 3): (B, (T - 1) / stride + 1, Cout).
Tensor conv1d_k3(const Tensor& x, const Tensor& w, const Tensor& b, std::int64_t stride) {
  const std::int64_t B = x.size(0), T = x.size(1), Cin = x.size(2), Cout = w.size(0);
  const std::int64_t out = (T - 1) / stride + 1;
  // Zero frames around the signal: one in front, behind as many as the last window reaches.
  const std::int64_t tail = stride * (out - 1) + 2 - T;
  std::vector<Tensor> parts{Tensor::zeros({B, 1, Cin}), x};
  if (tail > 0) parts.push_back(Tensor::zeros({B, tail, Cin}));
  const Tensor xp = concat(parts, 1);
  // (B, out, 3 Cin): output t reads padded frames stride t + 0, 1, 2, tap 0 first.
  std::vector<Tensor> taps;
  for (std::int64_t k = 0; k < 3; ++k) taps.push_back(slice(xp, 1, k, k + stride * (out - 1) + 1, stride));
  const Tensor windows = concat(taps, 2);
  // The kernel as (Cout, 3 Cin) with the taps outermost, matching the windows' columns.
  const Tensor kernel = reshape(contiguous(transpose(w, 1, 2)), {Cout, 3 * Cin});
  return linear(windows, kernel, b);
}

}  // namespace

Tensor embed_audio(const Model::Impl& m, const Tensor& features, nn::DropoutStream& rng) {
  const ModelConfig& c = m.cfg;
  const Layout& l = m.layout;
  TFM_CHECK(features.defined() && features.dim() == 3 && dtype_is_float(features.dtype()), "model",
            "input_features must be a (B, mel bins, frames) float tensor, got ",
            features.defined() ? features.str() : std::string("nothing"));
  TFM_CHECK(features.size(1) == c.num_mel_bins, "model", "input_features have ", features.size(1),
            " mel bins; the model reads ", c.num_mel_bins);
  const std::int64_t frames = features.size(2), tokens = (frames - 1) / 2 + 1;
  TFM_CHECK(frames >= 1 && tokens <= c.max_source_positions, "model", "input_features of ", frames,
            " frames; the model reads 1..", 2 * c.max_source_positions, " (max_source_positions ", c.max_source_positions, ")");
  TFM_CHECK(!features.requires_grad(), "model", "input_features are an input: no gradient flows into them");
  const Tensor x = contiguous(transpose(cast(features, DType::f32), 1, 2));  // (B, frames, mels)
  Tensor h = gelu(conv1d_k3(x, l.conv1_weight, l.conv1_bias, 1));
  h = gelu(conv1d_k3(h, l.conv2_weight, l.conv2_bias, 2));
  h = add(h, slice(l.source_pos_emb, 0, 0, tokens));  // (tokens, C) broadcast over the batch
  return rng.apply(h, c.embedding_dropout);
}

}  // namespace tfm::model_detail
