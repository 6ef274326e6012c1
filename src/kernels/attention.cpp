// Attention helpers shared by the naive and fused kernels: the mask interval of a row, the
// counter-based dropout decisions and the ALiBi slopes.
#include <algorithm>
#include <cmath>
#include <vector>

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

namespace {
// splitmix64 (Steele, Lea, Flood 2014): the sparse pattern's generator, chosen because it is a
// few lines that any reference (tools/reference/ref_attention.py) reproduces exactly.
std::uint64_t splitmix64_next(std::uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  std::uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Appends [lo, hi) to the sorted span list (lo ascending), merging it into the last span when
// they overlap or touch.
void push_span(std::int64_t lo, std::int64_t hi, std::int64_t* slo, std::int64_t* shi, std::int64_t& n) {
  if (lo >= hi) return;
  if (n > 0 && lo <= shi[n - 1]) {
    shi[n - 1] = std::max(shi[n - 1], hi);
    return;
  }
  slo[n] = lo;
  shi[n] = hi;
  ++n;
}
}  // namespace

std::int64_t attention_random_key_blocks(const AttentionParams& p, std::int64_t h, std::int64_t qblock,
                                         std::int64_t key_end, std::int64_t* out) {
  if (p.random_blocks <= 0 || p.block_size <= 0) return 0;
  const std::int64_t nb = (std::min(key_end, p.Tk) + p.block_size - 1) / p.block_size;
  const std::int64_t n = p.causal ? std::min(qblock, nb - 1) + 1 : nb;  // candidate blocks 0 .. n-1
  const std::int64_t m = std::min(p.random_blocks, n);
  if (m <= 0) return 0;
  std::uint64_t seed_state = p.random_seed;
  std::uint64_t state =
      splitmix64_next(seed_state) ^ (static_cast<std::uint64_t>(p.head_offset + h) << 32 | (static_cast<std::uint64_t>(qblock) & 0xFFFFFFFFull));
  // Floyd's algorithm: m distinct values of 0 .. n-1, each subset equally likely.
  std::int64_t count = 0;
  for (std::int64_t top = n - m; top < n; ++top) {
    const auto t = static_cast<std::int64_t>(splitmix64_next(state) % static_cast<std::uint64_t>(top + 1));
    const bool taken = std::find(out, out + count, t) != out + count;
    out[count++] = taken ? top : t;
  }
  std::sort(out, out + count);
  return count;
}

bool attention_is_global(const AttentionParams& p, std::int64_t j) {
  return p.n_global > 0 && std::binary_search(p.global_pos, p.global_pos + p.n_global, j);
}

std::int64_t attention_max_spans(const AttentionParams& p) { return p.sparse() ? 1 + p.random_blocks + p.n_global : 1; }

std::int64_t attention_key_spans(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i,
                                 std::int64_t* lo, std::int64_t* hi) {
  if (!p.sparse()) {
    attention_key_range(p, b, i, &lo[0], &hi[0]);
    return lo[0] < hi[0] ? 1 : 0;
  }
  const std::int64_t ip = i + p.shift();
  const std::int64_t key_end = p.valid_lens != nullptr ? std::min(p.Tk, p.valid_lens[b * p.vl_sb + i * p.vl_si]) : p.Tk;
  const std::int64_t base_hi = p.causal ? std::min(key_end, ip + 1) : key_end;  // causal and padding: [0, base_hi)
  if (base_hi <= 0) return 0;
  std::int64_t n = 0;
  if (p.window <= 0 || attention_is_global(p, ip)) {  // dense local part, or a global query
    push_span(0, base_hi, lo, hi, n);
    return n;
  }
  // Three sorted streams merged by lower end: the window, the random blocks and the global
  // keys. The random blocks are parked at the tail of hi[]: every output index stays below
  // the next unread one (at most one output per input), so they are read before overwritten.
  const std::int64_t max_spans = attention_max_spans(p);
  std::int64_t* rnd = hi + (max_spans - p.random_blocks);
  const std::int64_t n_rnd = p.random_blocks > 0 ? attention_random_key_blocks(p, h, ip / p.block_size, key_end, rnd) : 0;
  const std::int64_t w_lo = std::max<std::int64_t>(0, ip - p.window + 1), w_hi = std::min(p.Tk, ip + p.window);
  bool window_done = false;
  std::int64_t ri = 0, gi = 0;
  while (!window_done || ri < n_rnd || gi < p.n_global) {
    const std::int64_t r_lo = ri < n_rnd ? rnd[ri] * p.block_size : p.Tk + 1;
    const std::int64_t g_lo = gi < p.n_global ? p.global_pos[gi] : p.Tk + 1;
    const std::int64_t wl = window_done ? p.Tk + 1 : w_lo;
    std::int64_t s_lo = 0, s_hi = 0;
    if (wl <= r_lo && wl <= g_lo) {
      s_lo = w_lo, s_hi = w_hi, window_done = true;
    } else if (r_lo <= g_lo) {
      s_lo = r_lo, s_hi = std::min(p.Tk, r_lo + p.block_size), ++ri;
    } else {
      s_lo = g_lo, s_hi = g_lo + 1, ++gi;
    }
    push_span(s_lo, std::min(s_hi, base_hi), lo, hi, n);
  }
  return n;
}

QueryBlockSpans::QueryBlockSpans(const AttentionParams& p, std::int64_t rows, std::int64_t bc)
    : p_(p), rows_(rows), bc_(bc), max_spans_(attention_max_spans(p)) {
  const std::int64_t nkb = (p.Tk + bc - 1) / bc;
  lo_ = new std::int64_t[static_cast<std::size_t>(rows * max_spans_)];
  hi_ = new std::int64_t[static_cast<std::size_t>(rows * max_spans_)];
  count_ = new std::int64_t[static_cast<std::size_t>(rows)];
  blocks_ = new std::int64_t[static_cast<std::size_t>(std::max<std::int64_t>(nkb, 1))];
  scratch_ = new std::int64_t[static_cast<std::size_t>(rows * max_spans_)];
}

QueryBlockSpans::~QueryBlockSpans() {
  delete[] lo_;
  delete[] hi_;
  delete[] count_;
  delete[] blocks_;
  delete[] scratch_;
}

void QueryBlockSpans::fill(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t nr) {
  // Block intervals [first, last] of every span, packed first << 32 | last and sorted, then
  // merged: a cost proportional to the spans, not to the number of key blocks.
  std::int64_t n_iv = 0;
  for (std::int64_t r = 0; r < nr; ++r) {
    count_[r] = attention_key_spans(p_, b, h, i0 + r, lo_ + r * max_spans_, hi_ + r * max_spans_);
    for (std::int64_t s = 0; s < count_[r]; ++s)
      scratch_[n_iv++] = (lo(r)[s] / bc_) << 32 | ((hi(r)[s] - 1) / bc_);
  }
  std::sort(scratch_, scratch_ + n_iv);
  n_blocks_ = 0;
  std::int64_t next = 0;  // first block not yet listed
  for (std::int64_t t = 0; t < n_iv; ++t) {
    const std::int64_t first = std::max(next, scratch_[t] >> 32), last = scratch_[t] & 0xFFFFFFFF;
    for (std::int64_t kb = first; kb <= last; ++kb) blocks_[n_blocks_++] = kb;
    next = std::max(next, last + 1);
  }
}

KeyBlockVisitors::KeyBlockVisitors(const AttentionParams& p, std::int64_t br, std::int64_t bc)
    : nkb_((p.Tk + bc - 1) / bc), Hkv_(p.Hkv) {
  const std::int64_t nqb = (p.Tq + br - 1) / br, G = p.Hq / p.Hkv;
  const std::int64_t n_keys = p.B * p.Hkv * nkb_;
  std::vector<std::int64_t> pairs;  // (key slot, visitor) in visiting order
  QueryBlockSpans spans(p, br, bc);
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t h = 0; h < p.Hq; ++h)
      for (std::int64_t qb = 0; qb < nqb; ++qb) {
        spans.fill(b, h, qb * br, std::min(br, p.Tq - qb * br));
        for (std::int64_t t = 0; t < spans.n_blocks(); ++t) {
          pairs.push_back((b * p.Hkv + h / G) * nkb_ + spans.blocks()[t]);
          pairs.push_back(h * nqb + qb);
        }
      }
  // Counting sort by key slot keeps each slot's visitors in ascending (h, qb) order.
  ptr_ = new std::int64_t[static_cast<std::size_t>(n_keys + 1)]();
  items_ = new std::int64_t[std::max<std::size_t>(pairs.size() / 2, 1)];
  for (std::size_t t = 0; t < pairs.size(); t += 2) ++ptr_[pairs[t] + 1];
  for (std::int64_t s = 0; s < n_keys; ++s) ptr_[s + 1] += ptr_[s];
  std::vector<std::int64_t> fill(ptr_, ptr_ + n_keys);
  for (std::size_t t = 0; t < pairs.size(); t += 2) items_[fill[static_cast<std::size_t>(pairs[t])]++] = pairs[t + 1];
}

KeyBlockVisitors::~KeyBlockVisitors() {
  delete[] ptr_;
  delete[] items_;
}

std::int64_t KeyBlockVisitors::count(std::int64_t b, std::int64_t hk, std::int64_t kb) const {
  const std::int64_t s = (b * Hkv_ + hk) * nkb_ + kb;
  return ptr_[s + 1] - ptr_[s];
}

const std::int64_t* KeyBlockVisitors::items(std::int64_t b, std::int64_t hk, std::int64_t kb) const {
  return items_ + ptr_[(b * Hkv_ + hk) * nkb_ + kb];
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
