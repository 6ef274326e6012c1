// tfm info CONFIG.json: the architecture in words, the parameter count and weight memory.
#include "model_summary.h"

#include <cstdio>
#include <map>

namespace tfm::cli {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string human_count(double n) {
  char buf[32];
  if (n >= 1e9) std::snprintf(buf, sizeof buf, "%.2fB", n / 1e9);
  else if (n >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  else if (n >= 1e3) std::snprintf(buf, sizeof buf, "%.1fK", n / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", n);
  return buf;
}

void print_model_summary(const ModelConfig& c, const std::string& source) {
  std::int64_t total = 0;
  std::map<std::string, std::int64_t> by_part;  // embeddings / layers / heads and final norms
  for (const auto& p : parameter_specs(c)) {
    const std::int64_t n = shape_numel(p.shape);
    total += n;
    const auto has = [&](const char* s) { return p.name.find(s) != std::string::npos; };
    const char* part = has("embed") || has("wte.") || has("wpe.") || p.name == "shared.weight" ? "embeddings"
                       : has(".layers.") || has(".h.") || has(".layer.") || has(".block.") || has("relative_attention")
                           ? "layers"
                           : "heads and final norms";
    by_part[part] += n;
  }
  std::printf("model:        %s (model_type %s)\n", source.c_str(), c.model_type.c_str());
  std::printf("architecture: %s", to_string(c.architecture));
  if (c.architecture == Architecture::encoder_decoder)
    std::printf(", %lld encoder + %lld decoder layers\n", static_cast<long long>(c.n_layers),
                static_cast<long long>(c.decoder_layers()));
  else
    std::printf(", %lld layers\n", static_cast<long long>(c.n_layers));
  if (c.reads_images()) {
    std::printf("width:        d_model %lld, d_ff %lld\n", static_cast<long long>(c.d_model), static_cast<long long>(c.d_ff));
    const std::string prefix = c.cls_token && c.distillation_token ? " with [CLS] and distillation"
                               : c.cls_token                        ? " with [CLS]"
                                                                    : "";
    std::printf("images:       %lld x %lld x %lld, %lldx%lld patches: %lld tokens%s\n",
                static_cast<long long>(c.num_channels), static_cast<long long>(c.image_size),
                static_cast<long long>(c.image_size), static_cast<long long>(c.patch_size),
                static_cast<long long>(c.patch_size), static_cast<long long>(c.image_tokens()), prefix.c_str());
    if (c.text_tower.enabled()) {  // CLIP: the figures above are the vision tower's
      const TextTowerConfig& t = c.text_tower;
      std::printf("text tower:   %lld layers, d_model %lld, d_ff %lld, %lld heads, vocab %lld, max positions %lld, %s\n",
                  static_cast<long long>(t.n_layers), static_cast<long long>(t.d_model), static_cast<long long>(t.d_ff),
                  static_cast<long long>(t.n_heads), static_cast<long long>(t.vocab_size),
                  static_cast<long long>(t.max_positions), to_string(t.activation));
      std::printf("shared space: %lld numbers, logit scale exp(%g) at init\n", static_cast<long long>(t.projection_dim),
                  t.logit_scale_init);
    }
  } else {
    std::printf("width:        d_model %lld, d_ff %lld, vocab %lld, max positions %lld\n",
                static_cast<long long>(c.d_model), static_cast<long long>(c.d_ff), static_cast<long long>(c.vocab_size),
                static_cast<long long>(c.max_positions));
  }
  std::printf("attention:    %lld heads x %lld dims, %lld kv heads (%s)%s%s\n", static_cast<long long>(c.n_heads),
              static_cast<long long>(c.dim_head()), static_cast<long long>(c.kv_heads()),
              c.kv_heads() == c.n_heads ? "multi-head" : c.kv_heads() == 1 ? "multi-query" : "grouped-query",
              c.sliding_window > 0 ? ", sliding window " : "",
              c.sliding_window > 0 ? std::to_string(c.sliding_window).c_str() : "");
  std::printf("norm:         %s, %s-norm, eps %g%s\n", to_string(c.norm), to_string(c.norm_placement), c.norm_eps,
              c.final_norm ? ", final norm" : "");
  std::printf("ffn:          %s%s\n", to_string(c.activation), c.bias ? ", with biases" : ", no biases");
  std::printf("positions:    %s", to_string(c.position));
  if (c.position == PositionKind::rope) std::printf(" (%s pairs, base %g)", to_string(c.rope_pairing), c.rope_base);
  if (c.position == PositionKind::t5_relative)
    std::printf(" (%lld buckets, max distance %lld)", static_cast<long long>(c.relative_buckets),
                static_cast<long long>(c.relative_max_distance));
  std::printf("%s\n", c.scale_embeddings ? ", embeddings x sqrt(d_model)" : "");
  if (c.reads_images())
    std::printf("head:         %s%s\n", to_string(c.head),
                c.head != HeadKind::classifier ? ""
                : c.distillation_head          ? " on [CLS] and on the distillation token, their mean"
                : c.pooling == Pooling::mean   ? " on the patches' mean"
                                               : " on [CLS]");
  else
    std::printf("head:         %s%s\n", to_string(c.head), c.tie_embeddings ? " (tied to the token embedding)" : "");
  if (c.retrieval.enabled()) {
    const RetrievalConfig& r = c.retrieval;
    std::string layers;
    for (std::int64_t l : r.layers) layers += (layers.empty() ? "" : ", ") + std::to_string(l);
    std::printf("retrieval:    RETRO: chunks of %lld, %lld neighbours of %lld tokens, chunked cross-attention in layer(s) %s, "
                "%lld-layer neighbours' encoder\n",
                static_cast<long long>(r.chunk_size), static_cast<long long>(r.neighbours), static_cast<long long>(r.length()),
                layers.c_str(), static_cast<long long>(r.encoder_layers));
  }
  std::printf("parameters:   %lld (%s)\n", static_cast<long long>(total), human_count(static_cast<double>(total)).c_str());
  for (const auto& [part, n] : by_part)
    std::printf("  %-24s %14lld\n", part.c_str(), static_cast<long long>(n));
  const double n = static_cast<double>(total);
  std::printf("weights:      %s in f32, %s in bf16/f16, %s in int8\n", human_bytes(4 * n).c_str(),
              human_bytes(2 * n).c_str(), human_bytes(n).c_str());
  std::printf("training:     ~%s for weights + gradients + AdamW moments (f32), before activations\n",
              human_bytes(16 * n).c_str());
}

}  // namespace tfm::cli
