// Attention helpers shared by the naive and fused kernels: the mask interval of a row, the
// counter-based dropout decisions and the ALiBi slopes.
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/random.h"

namespace tfm::kernels {

void attention_key_range(const AttentionParams& p, std::int64_t b, std::int64_t i, std::int64_t* lo,
                         std::int64_t* hi) {
  const std::int64_t ip = i + p.shift();  // the query's position on the key axis
  std::int64_t l = 0, h = p.Tk;
  if (p.causal) h = std::min(h, ip + 1);
  if (p.window > 0) {  // |i' - j| < w (causal then keeps the w most recent keys)
    l = std::max<std::int64_t>(l, ip - p.window + 1);
    h = std::min(h, ip + p.window);
  }
  if (p.valid_lens != nullptr) h = std::min(h, p.valid_lens[b * p.vl_sb + i * p.vl_si]);
  *lo = l;
  *hi = std::max(h, l);
}

void attention_dropout_scales(std::uint64_t seed, float p, std::uint64_t first, std::int64_t n, float* out) {
  // Philox stream 2 (counter_hi) of the seed: element idx uses word idx % 4 of counter idx / 4,
  // the layout fill_uniform uses, on a stream of its own.
  constexpr std::uint64_t kAttentionStream = 2;
  const float keep_scale = 1.0f / (1.0f - p);
  const std::uint32_t keep_from = uniform_threshold(p);  // keep iff (word >> 8) >= keep_from
  for_each_philox_word(seed, kAttentionStream, first, n,
                       [&](std::int64_t t, std::uint32_t word) { out[t] = (word >> 8) >= keep_from ? keep_scale : 0.0f; });
}

std::vector<float> alibi_slopes(std::int64_t n_heads) {
  std::vector<float> out;
  if (n_heads <= 0) return out;
  // Largest power of two m <= n: slopes 2^(-8h/m), h = 1..m.
  std::int64_t m = 1;
  while (m * 2 <= n_heads) m *= 2;
  for (std::int64_t h = 1; h <= m; ++h) out.push_back(static_cast<float>(std::exp2(-8.0 * h / m)));
  // The rest: the odd-numbered slopes of 2m heads, 2^(-8h/2m) for h = 1, 3, 5, ...
  for (std::int64_t h = 1; static_cast<std::int64_t>(out.size()) < n_heads; h += 2)
    out.push_back(static_cast<float>(std::exp2(-8.0 * h / (2 * m))));
  return out;
}

}  // namespace tfm::kernels
