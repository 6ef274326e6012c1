// plan_memory: weights from the parameter specs, the KV cache from KVCache::bytes_needed, and
// an activation estimate from the shapes.
#include "tfm/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "tfm/error.h"
#include "tfm/kv_cache.h"

namespace tfm {
namespace {

const char* part_of(const std::string& name) {
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("embed") || has("wte.") || has("wpe.") || name == "shared.weight") return "embeddings";
  if (has(".layers.") || has(".h.") || has(".layer.") || has(".block.") || has("relative_attention")) return "layers";
  return "heads and final norms";
}

// Activation estimate (f32 bytes) of one forward of `rows` new tokens through one layer, plus
// the logits. It counts the largest tensors live at once inside a layer as the engine runs it
// without autograd: the residual stream x and the normed input h (rows x C each), the q/k/v
// projections (rows x (H + 2 KV) x Dh), the attention output before o_proj (rows x H x Dh), the
// sublayer output added to x (rows x C), and the FFN hidden (rows x d_ff, twice for the
// activation's output, three times for gated FFNs: gate, up and their product). The fused
// attention kernel never materialises the T x T scores, so they are not counted. Layers run one
// after another, so one layer's worth is live at a time. logits_rows x V for the head's output
// (decode_cached returns the last position's logits per row only). An estimate: allocator
// slack, kernel scratch and temporaries of a few elementwise ops are not modelled.
std::int64_t activations(const ModelConfig& c, std::int64_t rows, std::int64_t logits_rows) {
  const std::int64_t C = c.d_model, Dh = c.dim_head(), H = c.n_heads, KV = c.kv_heads();
  const std::int64_t ffn = c.d_ff * (c.gated_ffn() ? 3 : 2);
  const std::int64_t per_row = 3 * C + (H + 2 * KV) * Dh + H * Dh + ffn;
  return 4 * (rows * per_row + logits_rows * c.vocab_size);
}

std::string mib(std::int64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1024.0 * 1024));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024.0);
  return buf;
}

// A vocabulary table of a parameter spec, which a tensor-parallel shard splits by rows
// (Model::shard_tensor_parallel): (V, C) tables other than positions, a head's (V) or (1, V) bias.
bool vocabulary_table(const ParamSpec& s, const ModelConfig& c) {
  if (s.name.find("pos") != std::string::npos || s.name.find("wpe") != std::string::npos) return false;  // positions
  const Shape& d = s.shape;
  return (d.size() == 2 && d[0] == c.vocab_size && d[1] == c.d_model) || (d.size() == 1 && d[0] == c.vocab_size) ||
         (d.size() == 2 && d[0] == 1 && d[1] == c.vocab_size);
}

}  // namespace

MemoryPlan plan_memory(const ModelConfig& c, std::int64_t ctx_size, std::int64_t batch, int vocab_shards) {
  TFM_CHECK(ctx_size >= 0, "info", "--ctx-size must be >= 0 (0: the model's ", c.max_positions, "), got ", ctx_size);
  TFM_CHECK(batch >= 1, "info", "--batch must be >= 1, got ", batch);
  TFM_CHECK(c.position != PositionKind::learned || ctx_size <= c.max_positions, "info", "--ctx-size ", ctx_size,
            " exceeds the model's learned position table of ", c.max_positions, " positions");
  MemoryPlan p;
  p.ctx_size = ctx_size > 0 ? ctx_size : c.max_positions;
  p.batch = batch;
  std::map<std::string, std::int64_t> parts;
  TFM_CHECK(vocab_shards >= 1, "info", "a vocabulary split over ", vocab_shards, " ranks");
  // As Model::shard_tensor_parallel: no split of a vocabulary smaller than the ranks (or none).
  const bool split = vocab_shards > 1 && c.vocab_size >= vocab_shards;
  const std::int64_t shard_rows = split ? (c.vocab_size + vocab_shards - 1) / vocab_shards : 0;  // the first shards'
  for (const auto& s : parameter_specs(c)) {
    const std::int64_t n = shape_numel(s.shape);
    parts[part_of(s.name)] += 4 * (split && vocabulary_table(s, c) ? n / c.vocab_size * shard_rows : n);
  }
  for (const auto& [name, b] : parts) {
    p.weights.emplace_back(name, b);
    p.weight_bytes += b;
  }
  if (c.architecture != Architecture::encoder_only) {
    const bool cross = c.architecture == Architecture::encoder_decoder;
    p.source_len = cross ? c.max_positions : 0;  // Translator: max_source defaults to max_positions
    p.kv_self_bytes = KVCache::bytes_needed(c, batch, p.ctx_size);
    p.kv_bytes = KVCache::bytes_needed(c, batch, p.ctx_size, cross ? batch : 0, p.source_len);
    p.kv_cross_bytes = p.kv_bytes - p.kv_self_bytes;
    // Prompts are prefilled one at a time (session.h); an encoder-decoder also encodes a source.
    p.prefill_bytes = std::max(activations(c, p.ctx_size, 1), cross ? activations(c, p.source_len, 0) : 0);
    p.decode_bytes = activations(c, batch, batch);
  } else {
    // Encoder-only: one forward of batch x ctx_size tokens, logits/classifier output negligible.
    p.prefill_bytes = activations(c, batch * p.ctx_size, 0);
  }
  p.total_bytes = p.weight_bytes + p.kv_bytes + std::max(p.prefill_bytes, p.decode_bytes);
  return p;
}

std::string summary(const MemoryPlan& p) {
  return "weights " + mib(p.weight_bytes) + " + KV cache " + mib(p.kv_bytes) + " + activations " +
         mib(std::max(p.prefill_bytes, p.decode_bytes)) + " = " + mib(p.total_bytes) + " (context " +
         std::to_string(p.ctx_size) + " x " + std::to_string(p.batch) + " sequence(s))";
}

std::string summary(const TrainingMemoryPlan& p) {
  return "weights " + mib(p.weight_bytes) + " + gradients " + mib(p.gradient_bytes) + " + optimizer state " +
         mib(p.optimizer_bytes) + " + activations " + mib(p.activation_bytes) + " (estimate, " + std::to_string(p.batch) +
         " x " + std::to_string(p.seq_len) + " tokens) = " + mib(p.total_bytes);
}

void check_memory_limit(std::int64_t total_bytes, std::int64_t max_bytes, const std::string& what,
                        const std::string& breakdown, const std::string& advice) {
  if (max_bytes <= 0 || total_bytes <= max_bytes) return;
  fail("--max-memory", what, " needs ", breakdown, ": more than the limit of ", max_bytes, " bytes (", mib(max_bytes),
       "); ", advice);
}

std::int64_t parse_byte_size(const std::string& text, const std::string& where) {
  std::size_t end = 0;
  double value = -1;
  try {
    value = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (auto& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "K" || unit == "KB" || unit == "KIB") scale = 1024.0;
  else if (unit == "M" || unit == "MB" || unit == "MIB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GB" || unit == "GIB") scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TB" || unit == "TIB") scale = 1024.0 * 1024 * 1024 * 1024;
  TFM_CHECK(end > 0 && scale > 0 && std::isfinite(value) && value > 0 && value * scale < 9.0e18, where,
            "expected a size in bytes such as 2000000000, 512M or 2G (K/M/G/T: powers of 1024), got '", text, "'");
  return static_cast<std::int64_t>(std::llround(value * scale));
}

}  // namespace tfm
