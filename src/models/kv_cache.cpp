// KV cache storage: see include/tfm/kv_cache.h for the layout.
#include "tfm/kv_cache.h"

#include <cstring>

#include "kernels/qgemm.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {
std::int64_t decoder_layers(const ModelConfig& c) {
  return c.architecture == Architecture::encoder_decoder ? c.decoder_layers() : c.n_layers;
}
}  // namespace

std::int64_t KVCache::bytes_needed(const ModelConfig& c, std::int64_t slots, std::int64_t max_T, std::int64_t sources,
                                   std::int64_t max_S, DType type) {
  const std::int64_t per_head = c.dim_head() % dtype_block_elems(type) == 0
                                    ? static_cast<std::int64_t>(dtype_row_bytes(type, c.dim_head())) : c.dim_head() * 4;
  const std::int64_t per_pos = decoder_layers(c) * 2 * c.kv_heads();
  return per_pos * (slots * max_T * per_head + sources * max_S * c.dim_head() * 4);
}

KVCache::KVCache(const ModelConfig& c, std::int64_t slots, std::int64_t max_T, std::int64_t sources, std::int64_t max_S,
                 DType type)
    : slots_(slots), max_T_(max_T), sources_(sources), max_S_(max_S), layers_(decoder_layers(c)),
      kv_heads_(c.kv_heads()), head_dim_(c.dim_head()), type_(type) {
  TFM_CHECK(type == DType::f32 || type == DType::f16 || type == DType::q8_0, "kv_cache", "cache type ",
            dtype_name(type), " is not supported (f32, f16, q8_0)");
  TFM_CHECK(head_dim_ % dtype_block_elems(type) == 0, "kv_cache", "a ", dtype_name(type), " cache stores head_dim in blocks of ",
            dtype_block_elems(type), "; this model's head_dim is ", head_dim_);
  row_bytes_ = static_cast<std::int64_t>(dtype_row_bytes(type, head_dim_));
  TFM_CHECK(c.architecture != Architecture::encoder_only, "kv_cache", "an encoder-only model does not decode");
  TFM_CHECK(slots >= 1 && max_T >= 1, "kv_cache", "need at least one slot of one position, got ", slots, " x ", max_T);
  TFM_CHECK(c.architecture != Architecture::encoder_decoder || (sources >= 1 && max_S >= 1), "kv_cache",
            "an encoder-decoder model needs room for at least one source sentence");
  self_ = type == DType::f32 ? Tensor::zeros({slots, layers_, 2, kv_heads_, max_T, head_dim_})
                             : Tensor::zeros({slots, layers_, 2, kv_heads_, max_T, row_bytes_}, DType::u8);
  if (sources > 0) cross_ = Tensor::zeros({sources, layers_, 2, kv_heads_, max_S, head_dim_});
  length_.assign(static_cast<std::size_t>(slots), 0);
  source_of_.assign(static_cast<std::size_t>(slots), 0);
  source_length_.assign(static_cast<std::size_t>(sources), 0);
  retro_tokens_.resize(static_cast<std::size_t>(slots));
  retro_chunks_.resize(static_cast<std::size_t>(slots));
}

std::int64_t KVCache::bytes() const {
  return static_cast<std::int64_t>(self_.nbytes() + (cross_.defined() ? cross_.nbytes() : 0));
}

void KVCache::check_slot(std::int64_t slot, const char* what) const {
  TFM_CHECK(slot >= 0 && slot < slots_, "kv_cache", what, ": slot ", slot, " out of range [0, ", slots_, ")");
}

std::int64_t KVCache::length(std::int64_t slot) const {
  check_slot(slot, "length");
  return length_[static_cast<std::size_t>(slot)];
}

void KVCache::set_length(std::int64_t slot, std::int64_t n) {
  check_slot(slot, "set_length");
  TFM_CHECK(n >= 0 && n <= max_T_, "kv_cache", "length ", n, " exceeds the context size ", max_T_);
  length_[static_cast<std::size_t>(slot)] = n;
}

void KVCache::reset(std::int64_t slot) {
  set_length(slot, 0);
  retro_tokens_[static_cast<std::size_t>(slot)].clear();
  retro_chunks_[static_cast<std::size_t>(slot)].clear();
}

std::vector<std::int64_t>& KVCache::retro_tokens(std::int64_t slot) {
  check_slot(slot, "retro_tokens");
  return retro_tokens_[static_cast<std::size_t>(slot)];
}

std::map<std::int64_t, KVCache::RetroChunk>& KVCache::retro_chunks(std::int64_t slot) {
  check_slot(slot, "retro_chunks");
  return retro_chunks_[static_cast<std::size_t>(slot)];
}

void KVCache::set_prefix_positions(std::int64_t P) {
  TFM_CHECK(P >= 0, "kv_cache", "prefix of ", P, " positions");
  if (P == prefix_) return;
  for (std::int64_t n : length_)
    TFM_CHECK(n == 0, "kv_cache", "the prefix size can change only while every slot is empty");
  self_ = Tensor();  // free the old buffer first
  self_ = type_ == DType::f32 ? Tensor::zeros({slots_, layers_, 2, kv_heads_, P + max_T_, head_dim_})
                              : Tensor::zeros({slots_, layers_, 2, kv_heads_, P + max_T_, row_bytes_}, DType::u8);
  prefix_ = P;
}

void KVCache::reorder(const std::vector<std::int64_t>& parents) {
  TFM_CHECK(static_cast<std::int64_t>(parents.size()) <= slots_, "kv_cache", parents.size(), " rows for ", slots_,
            " slots");
  bool identity = true;
  for (std::size_t r = 0; r < parents.size(); ++r) {
    check_slot(parents[r], "reorder");
    identity = identity && parents[r] == static_cast<std::int64_t>(r);
  }
  if (identity) return;
  // Copy the distinct parents' used prefixes out first (only the filled positions of each
  // (layer, k/v, head) block), so every copy reads the old contents.
  // In bytes, so every cache type moves the same way (a position is row_bytes_ per head).
  const std::int64_t blocks = layers_ * 2 * kv_heads_, block_bytes = (prefix_ + max_T_) * row_bytes_;
  const std::int64_t slot_bytes = blocks * block_bytes;
  std::vector<unsigned char> saved;
  std::vector<std::int64_t> where(static_cast<std::size_t>(slots_), -1);
  auto* base = static_cast<unsigned char*>(self_.raw_data());
  for (std::int64_t p : parents) {
    if (where[static_cast<std::size_t>(p)] >= 0) continue;
    where[static_cast<std::size_t>(p)] = static_cast<std::int64_t>(saved.size());
    const std::int64_t used = (prefix_ + length_[static_cast<std::size_t>(p)]) * row_bytes_;
    for (std::int64_t blk = 0; blk < blocks; ++blk) {
      const unsigned char* from = base + p * slot_bytes + blk * block_bytes;
      saved.insert(saved.end(), from, from + used);
    }
  }
  const std::vector<std::int64_t> old_len = length_, old_src = source_of_;
  const auto old_tokens = retro_tokens_;
  const auto old_chunks = retro_chunks_;
  for (std::size_t r = 0; r < parents.size(); ++r) {
    const std::int64_t p = parents[r], used = (prefix_ + old_len[static_cast<std::size_t>(p)]) * row_bytes_;
    const unsigned char* from = saved.data() + where[static_cast<std::size_t>(p)];
    unsigned char* to = base + static_cast<std::int64_t>(r) * slot_bytes;
    for (std::int64_t blk = 0; blk < blocks; ++blk)
      std::memcpy(to + blk * block_bytes, from + blk * used, static_cast<std::size_t>(used));
    length_[r] = old_len[static_cast<std::size_t>(p)];
    source_of_[r] = old_src[static_cast<std::size_t>(p)];
    retro_tokens_[r] = old_tokens[static_cast<std::size_t>(p)];
    retro_chunks_[r] = old_chunks[static_cast<std::size_t>(p)];
  }
}

std::vector<unsigned char> KVCache::copy_out(std::int64_t slot, std::int64_t pos, std::int64_t n) const {
  check_slot(slot, "copy_out");
  TFM_CHECK(pos >= 0 && n >= 0 && pos + n <= max_T_, "kv_cache", "positions [", pos, ", ", pos + n, ") outside the ", max_T_, " of a slot");
  const std::int64_t blocks = layers_ * 2 * kv_heads_, block_bytes = (prefix_ + max_T_) * row_bytes_;
  const auto* base = static_cast<const unsigned char*>(self_.raw_data()) + slot * blocks * block_bytes + (prefix_ + pos) * row_bytes_;
  std::vector<unsigned char> out;
  out.reserve(static_cast<std::size_t>(blocks * n * row_bytes_));
  for (std::int64_t blk = 0; blk < blocks; ++blk) out.insert(out.end(), base + blk * block_bytes, base + blk * block_bytes + n * row_bytes_);
  return out;
}

void KVCache::copy_in(std::int64_t slot, std::int64_t pos, std::int64_t n, const std::vector<unsigned char>& rows) {
  check_slot(slot, "copy_in");
  TFM_CHECK(pos >= 0 && n >= 0 && pos + n <= max_T_, "kv_cache", "positions [", pos, ", ", pos + n, ") outside the ", max_T_, " of a slot");
  TFM_CHECK(static_cast<std::int64_t>(rows.size()) == n * bytes_per_position(), "kv_cache", rows.size(), " bytes for ", n,
            " positions of ", bytes_per_position(), " bytes");
  const std::int64_t blocks = layers_ * 2 * kv_heads_, block_bytes = (prefix_ + max_T_) * row_bytes_;
  auto* base = static_cast<unsigned char*>(self_.raw_data()) + slot * blocks * block_bytes + (prefix_ + pos) * row_bytes_;
  for (std::int64_t blk = 0; blk < blocks; ++blk)
    std::memcpy(base + blk * block_bytes, rows.data() + blk * n * row_bytes_, static_cast<std::size_t>(n * row_bytes_));
}

Tensor KVCache::view(const Tensor& buf, std::int64_t outer, std::int64_t layer, std::int64_t kv, std::int64_t T) const {
  TFM_CHECK(layer >= 0 && layer < layers_, "kv_cache", "layer ", layer, " out of range [0, ", layers_, ")");
  // buf (outer, layers, 2, H, T, D), contiguous -> the (1, H, T, D) block at [outer, layer, kv]
  const std::int64_t block = kv_heads_ * T * head_dim_;
  return buf.as_strided({1, kv_heads_, T, head_dim_}, {block, T * head_dim_, head_dim_, 1},
                        ((outer * layers_ + layer) * 2 + kv) * block);
}

void KVCache::store(std::int64_t slot, std::int64_t layer, int kv, std::int64_t pos, const Tensor& x) {
  check_slot(slot, "store");
  const std::int64_t T = x.size(2);
  const std::int64_t cap = prefix_ + max_T_;  // positions: the prefix's, then the tokens'
  TFM_CHECK(pos >= 0 && pos + T <= cap, "kv_cache", "positions ", pos, "..", pos + T - 1, " exceed ", cap);
  if (type_ == DType::f32) {
    slice(view(self_, slot, layer, kv, cap), 2, pos, pos + T).copy_(x);
    return;
  }
  TFM_CHECK(layer >= 0 && layer < layers_, "kv_cache", "layer ", layer, " out of range [0, ", layers_, ")");
  const Tensor xc = x.is_contiguous() ? x : x.clone();  // (1, H, T, D)
  const float* src = xc.data<float>();
  auto* base = static_cast<unsigned char*>(self_.raw_data()) +
               ((slot * layers_ + layer) * 2 + kv) * kv_heads_ * cap * row_bytes_;
  for (std::int64_t h = 0; h < kv_heads_; ++h)
    kernels::quantize_rows(type_, src + h * T * head_dim_, base + (h * cap + pos) * row_bytes_, T, head_dim_);
}

Tensor KVCache::load(std::int64_t slot, std::int64_t layer, int kv, std::int64_t n) const {
  check_slot(slot, "load");
  const std::int64_t cap = prefix_ + max_T_;
  TFM_CHECK(n >= 0 && n <= cap, "kv_cache", "load of ", n, " positions exceeds ", cap);
  if (type_ == DType::f32) return slice(view(self_, slot, layer, kv, cap), 2, 0, n);
  TFM_CHECK(layer >= 0 && layer < layers_, "kv_cache", "layer ", layer, " out of range [0, ", layers_, ")");
  Tensor out = Tensor::empty({1, kv_heads_, n, head_dim_});
  float* dst = out.data<float>();
  const auto* base = static_cast<const unsigned char*>(self_.raw_data()) +
                     ((slot * layers_ + layer) * 2 + kv) * kv_heads_ * cap * row_bytes_;
  for (std::int64_t h = 0; h < kv_heads_; ++h)
    kernels::dequantize_rows(type_, base + h * cap * row_bytes_, dst + h * n * head_dim_, n, head_dim_);
  return out;
}

Tensor KVCache::keys(std::int64_t slot, std::int64_t layer) const {
  TFM_CHECK(type_ == DType::f32, "kv_cache", "keys(): a ", dtype_name(type_), " cache is read with load()");
  check_slot(slot, "keys");
  return view(self_, slot, layer, 0, prefix_ + max_T_);
}
Tensor KVCache::values(std::int64_t slot, std::int64_t layer) const {
  TFM_CHECK(type_ == DType::f32, "kv_cache", "values(): a ", dtype_name(type_), " cache is read with load()");
  check_slot(slot, "values");
  return view(self_, slot, layer, 1, prefix_ + max_T_);
}

void KVCache::bind_source(std::int64_t slot, std::int64_t source) {
  check_slot(slot, "bind_source");
  TFM_CHECK(source >= 0 && source < sources_, "kv_cache", "source ", source, " out of range [0, ", sources_, ")");
  source_of_[static_cast<std::size_t>(slot)] = source;
}
std::int64_t KVCache::source_of(std::int64_t slot) const {
  check_slot(slot, "source_of");
  return source_of_[static_cast<std::size_t>(slot)];
}
std::int64_t KVCache::source_length(std::int64_t source) const {
  TFM_CHECK(source >= 0 && source < sources_, "kv_cache", "source ", source, " out of range [0, ", sources_, ")");
  return source_length_[static_cast<std::size_t>(source)];
}
void KVCache::set_source_length(std::int64_t source, std::int64_t n) {
  TFM_CHECK(source >= 0 && source < sources_, "kv_cache", "source ", source, " out of range [0, ", sources_, ")");
  TFM_CHECK(n >= 0 && n <= max_S_, "kv_cache", "source of ", n, " tokens exceeds the cache's ", max_S_);
  source_length_[static_cast<std::size_t>(source)] = n;
}
Tensor KVCache::cross_keys(std::int64_t source, std::int64_t layer) const {
  TFM_CHECK(source >= 0 && source < sources_, "kv_cache", "source ", source, " out of range [0, ", sources_, ")");
  return view(cross_, source, layer, 0, max_S_);
}
Tensor KVCache::cross_values(std::int64_t source, std::int64_t layer) const {
  TFM_CHECK(source >= 0 && source < sources_, "kv_cache", "source ", source, " out of range [0, ", sources_, ")");
  return view(cross_, source, layer, 1, max_S_);
}

}  // namespace tfm
