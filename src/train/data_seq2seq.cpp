// Seq2seq data: length-bucketed, seeded batches with padding masks. (BLEU: src/metrics.)
#include <algorithm>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

Seq2SeqData::Seq2SeqData(std::vector<PairExample> train, std::vector<PairExample> test, std::uint64_t seed,
                         std::int32_t pad_id, std::int32_t bos_id, std::int64_t batch)
    : train_(std::move(train)), test_(std::move(test)), seed_(seed), pad_(pad_id), bos_(bos_id), batch_(batch) {}

void Seq2SeqData::pack(const std::vector<const PairExample*>& ex, Tensor& src, Tensor& src_lens, Tensor& dec_in,
                       Tensor& labels) const {
  const auto B = static_cast<std::int64_t>(ex.size());
  // The encoder's rows: each example's source, or its fused parts in turn.
  std::vector<const std::vector<std::int32_t>*> rows;
  for (const auto* e : ex) {
    TFM_CHECK(static_cast<std::int64_t>(e->parts.size()) == fused_parts_ || (fused_parts_ == 0 && e->parts.empty()), "seq2seq",
              "an example holds ", e->parts.size(), " fused parts where every example holds ", fused_parts_);
    if (fused_parts_ == 0) rows.push_back(&e->src);
    for (const auto& p : e->parts) rows.push_back(&p);
  }
  const auto R = static_cast<std::int64_t>(rows.size());
  std::int64_t S = 1, T = 1;
  for (const auto* r : rows) S = std::max<std::int64_t>(S, static_cast<std::int64_t>(r->size()));
  for (const auto* e : ex) T = std::max<std::int64_t>(T, static_cast<std::int64_t>(e->tgt.size()));
  src = Tensor::empty({R, S}, DType::i64);
  src_lens = Tensor::empty({R}, DType::i64);
  dec_in = Tensor::empty({B, T}, DType::i64);
  labels = Tensor::empty({B, T}, DType::i64);
  auto *s = src.data<std::int64_t>(), *d = dec_in.data<std::int64_t>(), *l = labels.data<std::int64_t>();
  for (std::int64_t r = 0; r < R; ++r) {
    const auto& row = *rows[static_cast<std::size_t>(r)];
    const auto ns = static_cast<std::int64_t>(row.size());
    for (std::int64_t t = 0; t < S; ++t) s[r * S + t] = t < ns ? row[static_cast<std::size_t>(t)] : pad_;
    src_lens.data<std::int64_t>()[r] = ns;
  }
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& e = *ex[static_cast<std::size_t>(b)];
    const auto nt = static_cast<std::int64_t>(e.tgt.size());
    for (std::int64_t t = 0; t < T; ++t) {
      d[b * T + t] = t == 0 ? bos_ : t < nt ? e.tgt[static_cast<std::size_t>(t - 1)] : pad_;
      l[b * T + t] = t < nt ? e.tgt[static_cast<std::size_t>(t)] : -100;
    }
  }
}

void Seq2SeqData::train_batch(std::int64_t cursor, std::int64_t batch, Tensor& src, Tensor& src_lens, Tensor& dec_in,
                              Tensor& labels) {
  const std::int64_t n = train_size();
  std::vector<const PairExample*> ex;
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b, epoch = c / n;
    if (epoch != cached_epoch_) {
      order_ = seeded_permutation(n, seed_ ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
      const std::int64_t window = 50 * batch_;
      for (std::int64_t w = 0; w < n; w += window) {
        std::stable_sort(order_.begin() + w, order_.begin() + std::min(n, w + window), [&](std::int64_t a, std::int64_t z) {
          return train_[static_cast<std::size_t>(a)].src.size() < train_[static_cast<std::size_t>(z)].src.size();
        });
      }
      cached_epoch_ = epoch;
    }
    ex.push_back(&train_[static_cast<std::size_t>(order_[static_cast<std::size_t>(c % n)])]);
  }
  pack(ex, src, src_lens, dec_in, labels);
}

}  // namespace tfm::train_detail
