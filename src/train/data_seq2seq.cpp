// Seq2seq data (length-bucketed, seeded batches with padding masks) and corpus BLEU.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "tfm/error.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

Seq2SeqData::Seq2SeqData(std::vector<PairExample> train, std::vector<PairExample> test, std::uint64_t seed,
                         std::int32_t pad_id, std::int32_t bos_id, std::int64_t batch)
    : train_(std::move(train)), test_(std::move(test)), seed_(seed), pad_(pad_id), bos_(bos_id), batch_(batch) {}

void Seq2SeqData::pack(const std::vector<const PairExample*>& ex, Tensor& src, Tensor& src_lens, Tensor& dec_in,
                       Tensor& labels) const {
  const auto B = static_cast<std::int64_t>(ex.size());
  std::int64_t S = 1, T = 1;
  for (const auto* e : ex) {
    S = std::max<std::int64_t>(S, static_cast<std::int64_t>(e->src.size()));
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(e->tgt.size()));
  }
  src = Tensor::empty({B, S}, DType::i64);
  src_lens = Tensor::empty({B}, DType::i64);
  dec_in = Tensor::empty({B, T}, DType::i64);
  labels = Tensor::empty({B, T}, DType::i64);
  auto *s = src.data<std::int64_t>(), *d = dec_in.data<std::int64_t>(), *l = labels.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& e = *ex[static_cast<std::size_t>(b)];
    const auto ns = static_cast<std::int64_t>(e.src.size()), nt = static_cast<std::int64_t>(e.tgt.size());
    for (std::int64_t t = 0; t < S; ++t) s[b * S + t] = t < ns ? e.src[static_cast<std::size_t>(t)] : pad_;
    for (std::int64_t t = 0; t < T; ++t) {
      d[b * T + t] = t == 0 ? bos_ : t < nt ? e.tgt[static_cast<std::size_t>(t - 1)] : pad_;
      l[b * T + t] = t < nt ? e.tgt[static_cast<std::size_t>(t)] : -100;
    }
    src_lens.data<std::int64_t>()[b] = ns;
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

std::vector<std::string> bleu_tokens(const std::string& text) {
  std::vector<std::string> out;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) out.push_back(word);
    word.clear();
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {  // one UTF-8 code point
      const std::size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      flush();
      out.push_back(text.substr(i, len));
      i += len;
      continue;
    }
    if (std::isspace(c)) flush();
    else if (std::ispunct(c)) flush(), out.emplace_back(1, static_cast<char>(c));
    else word += static_cast<char>(c);
    ++i;
  }
  flush();
  return out;
}

double corpus_bleu(const std::vector<std::vector<std::string>>& hyps, const std::vector<std::vector<std::string>>& refs) {
  TFM_CHECK(hyps.size() == refs.size(), "bleu", hyps.size(), " hypotheses for ", refs.size(), " references");
  double correct[4] = {0, 0, 0, 0}, total[4] = {0, 0, 0, 0}, hyp_len = 0, ref_len = 0;
  for (std::size_t k = 0; k < hyps.size(); ++k) {
    const auto &h = hyps[k], &r = refs[k];
    hyp_len += static_cast<double>(h.size());
    ref_len += static_cast<double>(r.size());
    for (std::size_t n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, int> ref_counts;
      for (std::size_t i = 0; i + n <= r.size(); ++i) ++ref_counts[std::vector<std::string>(r.begin() + i, r.begin() + i + n)];
      std::map<std::vector<std::string>, int> hyp_counts;
      for (std::size_t i = 0; i + n <= h.size(); ++i) ++hyp_counts[std::vector<std::string>(h.begin() + i, h.begin() + i + n)];
      for (const auto& [g, cnt] : hyp_counts) {
        const auto it = ref_counts.find(g);
        correct[n - 1] += std::min(cnt, it == ref_counts.end() ? 0 : it->second);  // clipped counts
        total[n - 1] += cnt;
      }
    }
  }
  if (hyp_len == 0) return 0;
  double log_sum = 0, smooth = 1;
  for (int n = 0; n < 4; ++n) {
    if (total[n] == 0) return 0;
    double p = correct[n] / total[n];
    if (correct[n] == 0) p = 1.0 / ((smooth *= 2) * total[n]);  // sacreBLEU 'exp' smoothing
    log_sum += std::log(p);
  }
  const double bp = hyp_len < ref_len ? std::exp(1.0 - ref_len / hyp_len) : 1.0;
  return 100.0 * bp * std::exp(log_sum / 4.0);
}

}  // namespace tfm::train_detail
