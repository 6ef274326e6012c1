// LM data: packing of the token stream into (block_size + 1)-token sequences, a seeded
// order per epoch, and the held-out split cut the same way without shuffling.
#include <numeric>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

void TokenStore::append(const std::vector<std::int32_t>& ids) {
  if (wide_) {
    i32_.insert(i32_.end(), ids.begin(), ids.end());
    return;
  }
  for (std::int32_t id : ids) {
    TFM_CHECK(id >= 0 && id < (1 << 16), "data", "token id ", id, " does not fit the 16-bit store");
    u16_.push_back(static_cast<std::uint16_t>(id));
  }
}

TokenStore TokenStore::slice(std::int64_t from, std::int64_t to) const {
  TokenStore out(wide_ ? (std::int64_t{1} << 31) - 1 : 1 << 16);
  if (wide_) out.i32_.assign(i32_.begin() + from, i32_.begin() + to);
  else out.u16_.assign(u16_.begin() + from, u16_.begin() + to);
  return out;
}

void TokenStore::truncate(std::int64_t n) {
  if (wide_) i32_.resize(static_cast<std::size_t>(n)), i32_.shrink_to_fit();
  else u16_.resize(static_cast<std::size_t>(n)), u16_.shrink_to_fit();
}

LmData::LmData(TokenStore train, TokenStore val, std::int64_t block_size, std::uint64_t seed)
    : train_(std::move(train)), val_(std::move(val)), block_(block_size), seed_(seed) {
  const std::int64_t n = train_.size();
  // Any shift in [0, block) still leaves per_epoch_ whole sequences of block + 1 tokens.
  per_epoch_ = n >= 2 * block_ + 1 ? (n - block_) / (block_ + 1) : 0;
  TFM_CHECK(per_epoch_ > 0 || n == 0, "data", "the training split has ", n, " tokens: too few for one sequence of ",
            block_ + 1, " (block_size + 1) tokens");
}

std::int64_t LmData::val_sequences() const {
  return val_.size() / (block_ + 1);
}

const std::vector<std::int64_t>& LmData::order(std::int64_t epoch) {
  if (epoch == cached_epoch_) return order_;
  std::uint64_t state = mix64(seed_ ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
  order_.resize(static_cast<std::size_t>(per_epoch_));
  std::iota(order_.begin(), order_.end(), std::int64_t{0});
  for (std::int64_t i = per_epoch_ - 1; i > 0; --i) {  // Fisher-Yates
    state = mix64(state);
    std::swap(order_[static_cast<std::size_t>(i)], order_[static_cast<std::size_t>(state % (i + 1))]);
  }
  shift_ = static_cast<std::int64_t>(mix64(state) % static_cast<std::uint64_t>(block_));
  cached_epoch_ = epoch;
  return order_;
}

void LmData::train_batch(std::int64_t cursor, std::int64_t batch, Tensor& x, Tensor& y, std::vector<std::int64_t>* starts) {
  TFM_CHECK(per_epoch_ > 0, "data", "held-out-only LM data has no training batches");
  x = Tensor::empty({batch, block_}, DType::i64);
  y = Tensor::empty({batch, block_}, DType::i64);
  auto* xd = x.data<std::int64_t>();
  auto* yd = y.data<std::int64_t>();
  if (starts != nullptr) starts->clear();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b;
    const auto& ord = order(c / per_epoch_);
    const std::int64_t start = shift_ + ord[static_cast<std::size_t>(c % per_epoch_)] * (block_ + 1);
    if (starts != nullptr) starts->push_back(start);
    for (std::int64_t t = 0; t < block_; ++t) {
      xd[b * block_ + t] = train_[start + t];
      yd[b * block_ + t] = train_[start + t + 1];
    }
  }
}

void LmData::val_batch(std::int64_t first, std::int64_t batch, Tensor& x, Tensor& y) const {
  TFM_CHECK(first >= 0 && first + batch <= val_sequences(), "data", "val batch [", first, ", ", first + batch,
            ") beyond the ", val_sequences(), " held-out sequences");
  x = Tensor::empty({batch, block_}, DType::i64);
  y = Tensor::empty({batch, block_}, DType::i64);
  auto* xd = x.data<std::int64_t>();
  auto* yd = y.data<std::int64_t>();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t start = (first + b) * (block_ + 1);
    for (std::int64_t t = 0; t < block_; ++t) {
      xd[b * block_ + t] = val_[start + t];
      yd[b * block_ + t] = val_[start + t + 1];
    }
  }
}

}  // namespace tfm::train_detail
