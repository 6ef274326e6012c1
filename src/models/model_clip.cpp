// CLIP's two towers (families/clip.cpp wires them): the vision tower is the image encoder
// (embed_patches with its pre-LayerNorm, the encoder stack), the text tower the decoder
// stack run causally without cross-attention. Each tower's pooled state goes through its
// projection into the shared space.
#include <cmath>

#include "models/layout.h"
#include "models/model_impl.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {

using namespace model_detail;

namespace {

void check_contrastive(const Model::Impl& m, const char* what) {
  TFM_CHECK(m.cfg.text_tower.enabled(), "model", what, " needs a contrastive image-text model (CLIP); this is a ",
            m.cfg.model_type, " model");
}

// x / ||x|| along the last dimension (differentiable).
Tensor unit_rows(const Tensor& x) { return div(x, sqrt(sum(mul(x, x), -1, true))); }

// Where each row's text embedding is read: the first end-of-text token within its valid
// length. Configs whose eos_token_id is 2 predate the key being right, and transformers then
// takes the largest id (the end token has the largest id of CLIP's vocabulary). A row without
// the token reads position 0, as transformers' argmax does.
std::vector<std::int64_t> end_positions(const ModelConfig& c, const Tensor& ids, const Tensor& valid_lens) {
  const std::int64_t B = ids.size(0), T = ids.size(1);
  const std::vector<std::int64_t> v = ids.to_ints();
  const std::vector<std::int64_t> lens = valid_lens.defined() ? valid_lens.to_ints() : std::vector<std::int64_t>();
  std::vector<std::int64_t> at(static_cast<std::size_t>(B), 0);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t n = lens.empty() ? T : std::clamp<std::int64_t>(lens[static_cast<std::size_t>(b)], 1, T);
    const std::int64_t* row = v.data() + b * T;
    std::int64_t& pos = at[static_cast<std::size_t>(b)];
    if (c.text_tower.eos_token_id == 2) {
      for (std::int64_t t = 1; t < n; ++t)
        if (row[t] > row[pos]) pos = t;
      continue;
    }
    for (std::int64_t t = 0; t < n; ++t)
      if (row[t] == c.text_tower.eos_token_id) {
        pos = t;
        break;
      }
  }
  return at;
}

}  // namespace

Tensor Model::image_features(const Tensor& pixel_values) {
  const Impl& m = *impl_;
  check_contrastive(m, "image_features");
  ModelInputs in;
  in.pixel_values = pixel_values;
  const Tensor hidden = encode(in);  // (B, T, C): the last layer's states, no final norm
  return m.layout.image_projection(m.layout.pooled_norm(squeeze(slice(hidden, 1, 0, 1), 1)));
}

Tensor Model::text_features(const Tensor& ids, const Tensor& valid_lens) {
  Impl& m = *impl_;
  check_contrastive(m, "text_features");
  check_ids(ids, "input_ids");
  const TextTowerConfig& t = m.cfg.text_tower;
  const Layout& l = m.layout;
  const std::int64_t B = ids.size(0), T = ids.size(1);
  TFM_CHECK(T >= 1 && T <= t.max_positions, "model", "a text of ", T, " tokens does not fit the text tower's ",
            t.max_positions, " positions");
  TFM_CHECK(!valid_lens.defined() || (valid_lens.dim() == 1 && valid_lens.size(0) == B), "model",
            "valid_lens must be (", B, "), got ", valid_lens.str());
  nn::DropoutStream rng = m.stream();
  Tensor x = add(embedding(ids, l.tok_emb), embedding(position_ids(T, 0), l.text_pos_emb));
  x = rng.apply(x, m.cfg.embedding_dropout);
  const nn::AttentionSetup setup = self_setup(m, l.decoder, true, T, 0, valid_lens);
  const Tensor hidden = run_self_stack(m, l.decoder, x, setup, rng);  // final_layer_norm included
  std::vector<std::int64_t> rows = end_positions(m.cfg, ids, valid_lens);
  for (std::int64_t b = 0; b < B; ++b) rows[static_cast<std::size_t>(b)] += b * T;
  const Tensor pooled = embedding(Tensor::from_ints(rows, {B}), reshape(hidden, {B * T, t.d_model}));  // (B, C)
  return l.text_projection(pooled);
}

double Model::logit_scale() const {
  check_contrastive(*impl_, "logit_scale");
  return std::exp(static_cast<double>(impl_->layout.logit_scale.to_floats().at(0)));
}

ModelOutputs Model::contrastive_forward(const ModelInputs& in) {
  TFM_CHECK(in.pixel_values.defined() || in.input_ids.defined(), "model",
            "a CLIP model reads pixel_values, input_ids or both; neither was given");
  ModelOutputs out;
  if (in.pixel_values.defined()) out.image_embeds = unit_rows(image_features(in.pixel_values));
  if (in.input_ids.defined()) out.text_embeds = unit_rows(text_features(in.input_ids, in.valid_lens));
  if (out.image_embeds.defined() && out.text_embeds.defined()) {
    const Tensor scale = reshape(exp(impl_->layout.logit_scale), {1, 1});
    out.logits = mul(matmul(out.image_embeds, transpose(out.text_embeds, 0, 1)), scale);  // (B_images, B_texts)
  }
  return out;
}

}  // namespace tfm
