// attention_figure: one forward pass with attention capture on, cut into per-head heat maps.
#include "infer/inspect_util.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/inspect.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

std::vector<std::string> labels(const Tokenizer& tok, const std::vector<std::int32_t>& ids) {
  std::vector<std::string> out;
  for (std::int32_t id : ids) {
    const std::int32_t one[1] = {id};
    out.push_back(tok.is_special(id) ? tok.id_to_token(id) : visible_token(tok.decode(one)));
  }
  return out;
}

}  // namespace

AttentionFigure attention_figure(LoadedModel& m, const AttentionQuery& q) {
  const ModelConfig& c = m.config;
  const char* op = "attention";
  const bool enc_dec = c.architecture == Architecture::encoder_decoder;
  TFM_CHECK(!c.reads_images(), op, "this is an image model: draw its attention with --image FILE");
  TFM_CHECK(!q.prompt.empty(), op, "the prompt is empty");
  TFM_CHECK(q.stack.empty() || q.stack == "encoder" || q.stack == "decoder", op, "unknown stack '", q.stack,
            "' (allowed: encoder, decoder)");
  TFM_CHECK(q.kind.empty() || q.kind == "self" || q.kind == "cross", op, "unknown kind '", q.kind, "' (allowed: self, cross)");
  TFM_CHECK(enc_dec || q.target.empty(), op, "--target is for encoder-decoder models; this one is ", to_string(c.architecture));

  AttentionFigure f;
  f.stack = q.stack;
  f.kind = q.kind;
  if (f.stack.empty()) {
    if (c.architecture == Architecture::encoder_only) f.stack = "encoder";
    else if (c.architecture == Architecture::decoder_only) f.stack = "decoder";
    else f.stack = f.kind == "self" ? "encoder" : "decoder";  // enc-dec: cross attention by default
  }
  if (f.kind.empty()) f.kind = enc_dec && f.stack == "decoder" ? "cross" : "self";
  TFM_CHECK(f.stack != "encoder" || c.architecture != Architecture::decoder_only, op, "a decoder-only model has no encoder stack");
  TFM_CHECK(f.stack != "decoder" || c.architecture != Architecture::encoder_only, op, "an encoder-only model has no decoder stack");
  TFM_CHECK(f.kind != "cross" || enc_dec, op, "cross attention exists only in encoder-decoder models; this one is ",
            to_string(c.architecture));
  TFM_CHECK(f.kind != "cross" || f.stack == "decoder", op, "cross attention lives in the decoder stack, not the encoder");
  const bool needs_target = enc_dec && f.stack == "decoder";
  TFM_CHECK(!needs_target || !q.target.empty(), op, "decoder ", f.kind,
            "-attention needs --target TEXT (the decoder's text); --stack encoder shows the encoder's self-attention");

  const std::int64_t n_layers = f.stack == "encoder" || !enc_dec ? c.n_layers : c.decoder_layers();
  f.layer = q.layer == -1 ? n_layers - 1 : q.layer;
  TFM_CHECK(f.layer >= 0 && f.layer < n_layers, op, "layer ", q.layer, " is out of range: the ", f.stack, " has ", n_layers, " layers (0..",
            n_layers - 1, ")");
  TFM_CHECK(q.head >= -1 && q.head < c.n_heads, op, "head ", q.head, " is out of range: the model has ", c.n_heads,
            " heads (0..", c.n_heads - 1, ")");
  f.head = q.head;

  // Inputs, as training fed them.
  const std::vector<std::int32_t> src = input_ids_for(m, q.prompt);
  TFM_CHECK(!src.empty(), op, "the prompt gives no tokens");
  std::vector<std::int32_t> dec;
  if (needs_target) dec = decoder_ids_for(m, q.target);
  ModelInputs in;
  const auto p = inspect_detail::pad_batch(m, {src});
  in.input_ids = p.ids;
  if (!dec.empty()) in.decoder_input_ids = inspect_detail::pad_batch(m, {dec}).ids;
  else if (enc_dec) in.decoder_input_ids = inspect_detail::pad_batch(m, {decoder_ids_for(m, "")}).ids;

  std::vector<AttentionMap> maps;
  {
    NoGradGuard no_grad;
    m.model.set_training(false);
    m.model.set_attention_capture(&maps);
    try {
      if (enc_dec && !needs_target) m.model.encode(in);  // the encoder alone
      else m.model.forward(in);
    } catch (...) {
      m.model.set_attention_capture(nullptr);
      throw;
    }
    m.model.set_attention_capture(nullptr);
  }
  const AttentionMap* found = nullptr;
  for (const auto& a : maps)
    if (a.stack == f.stack && a.kind == f.kind && a.layer == f.layer) found = &a;
  TFM_CHECK(found != nullptr, op, "no ", f.stack, " ", f.kind, "-attention was recorded for layer ", f.layer);

  const Tensor w = contiguous(found->weights);  // (1, H, Tq, Tk)
  const std::int64_t H = w.size(1), Tq = w.size(2), Tk = w.size(3);
  const std::vector<float> v = w.to_floats();
  const auto& q_ids = f.stack == "decoder" && enc_dec ? dec : src;
  const auto& k_ids = f.kind == "cross" ? src : q_ids;
  const std::vector<std::string> rows = labels(m.tokenizer, q_ids), cols = labels(m.tokenizer, k_ids);
  TFM_CHECK(static_cast<std::int64_t>(rows.size()) == Tq && static_cast<std::int64_t>(cols.size()) == Tk, op,
            "captured weights ", shape_str(w.shape()), " do not match ", rows.size(), " x ", cols.size(), " tokens");
  for (std::int64_t h = 0; h < H; ++h) {
    if (f.head >= 0 && h != f.head) continue;
    HeatMap hm;
    hm.title = "head " + std::to_string(h);
    hm.row_labels = rows;
    hm.col_labels = cols;
    hm.values.assign(v.begin() + h * Tq * Tk, v.begin() + (h + 1) * Tq * Tk);
    f.maps.push_back(std::move(hm));
  }
  f.style.title = f.stack + " " + f.kind + "-attention, layer " + std::to_string(f.layer) +
                  (f.head >= 0 ? ", head " + std::to_string(f.head) : ", all " + std::to_string(H) + " heads");
  f.style.row_axis = f.stack == "decoder" && enc_dec ? "query (target)" : "query";
  f.style.col_axis = f.kind == "cross" ? "key (source)" : "key";
  return f;
}

}  // namespace tfm
