// The packed GEMM driver (gemm_packed.h): buffers, blocking and threading.
#include "kernels/gemm_packed.h"

#include <algorithm>
#include <vector>

#include "kernels/parallel.h"
#include "tfm/runtime.h"

namespace tfm::kernels::packed {
namespace {

constexpr std::int64_t kBlockBPanels = 4;
// Stored rows per step when packing column strips (even, so every step starts a new pair).
constexpr std::int64_t kStripK = 32;

// Packing buffers, grown on demand and kept per thread (a training step calls this with the
// same few shapes over and over).
struct Buffers {
  // 8-byte words: any pair_bytes divides them. a: one block row; b: all of B (shared with the
  // other threads); block_b: one block's B panels (this thread's)
  std::vector<std::uint64_t> a, b, block_b;
};
thread_local Buffers t_buffers;

void* sized(std::vector<std::uint64_t>& v, std::int64_t bytes) {
  const std::size_t words = static_cast<std::size_t>((bytes + 7) / 8);
  if (v.size() < words) v.resize(words);
  return v.data();
}

}  // namespace

void run(const Kernel& k, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
         const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
         const float* bias) {
  const std::int64_t P = (K + 1) / 2;
  const std::int64_t na = (M + k.mr - 1) / k.mr, nb = (N + k.nr - 1) / k.nr;
  const std::int64_t a_panel = P * k.mr * k.pair_bytes, b_panel = P * k.nr * k.pair_bytes;  // bytes
  const std::int64_t kBlockAPanels = k.block_a_panels;
  const std::int64_t bm = (na + kBlockAPanels - 1) / kBlockAPanels;
  // With one block row (M <= block_a_panels x mr: a short batch against a large weight) every
  // B panel is used by that row only, so the thread that runs a block packs its B panel just
  // before, into its own buffer, where it is still in cache when the products read it: B is
  // read from memory once. Packed up front instead, B would be read, its packed copy written
  // out and read back (three passes over a matrix that does not fit the caches, for few
  // products per element). Blocks of one B panel there (measured: 5% faster than 4 at 34 rows
  // of BERT-base's FFN, the panel in use staying in L1 and L2 beside the row's A panels).
  const bool pack_per_block = bm == 1;
  const std::int64_t b_panels = pack_per_block ? 1 : kBlockBPanels;  // per block
  const std::int64_t bn = (nb + b_panels - 1) / b_panels;
  // A panel of op(A) = Aᵀ (or of op(B) = B) is a strip of columns of the stored matrix: packed
  // one panel at a time it would walk all K stored rows per panel, a new page per row when the
  // rows are long (the dW products: K = batch x tokens). So those are packed kStripK rows of
  // every panel at a time: the rows stay in cache and are read along their length.
  const std::int64_t ka = ta ? kStripK : K, kb = tb ? K : kStripK;
  const auto pack_b_panels = [&](std::int64_t j0, std::int64_t j1, std::uint8_t* out) {  // B panels [j0, j1) to out
    for (std::int64_t k0 = 0; k0 < K; k0 += kb)
      for (std::int64_t j = j0; j < j1; ++j)
        k.pack_b(tb, B + k0 * ldb, ldb, j * k.nr, std::min<std::int64_t>(k.nr, N - j * k.nr), std::min(kb, K - k0),
                 out + (j - j0) * b_panel + k0 / 2 * k.nr * k.pair_bytes);
  };
  std::uint8_t* bbuf = nullptr;
  if (!pack_per_block) {
    bbuf = static_cast<std::uint8_t*>(sized(t_buffers.b, nb * b_panel));
    const std::int64_t pack_shares = std::min<std::int64_t>(num_threads(), nb);
    parallel_for(pack_shares, 1, [&](std::int64_t s0, std::int64_t s1) {
      for (std::int64_t s = s0; s < s1; ++s) {
        const std::int64_t j0 = nb * s / pack_shares, j1 = nb * (s + 1) / pack_shares;
        pack_b_panels(j0, j1, bbuf + j0 * b_panel);
      }
    });
  }
  // K in blocks of k.block_pairs: the partial sums wait in C between blocks (exact, see
  // Kernel::micro); beta != 0 needs C intact until the end.
  const std::int64_t kp = beta == 0.0f ? k.block_pairs : P;
  // The blocks (row-major over bm x bn) are shared out by their micro-tile counts, not by
  // number: the last block row and column are short (M = 4096 is 341 1/3 panels of 12 rows),
  // and an even split by blocks left one of two threads up to 3% more tiles to run.
  const auto tiles_of = [&](std::int64_t t) {
    return (std::min(na, (t / bn + 1) * kBlockAPanels) - t / bn * kBlockAPanels) *
           (std::min(nb, (t % bn + 1) * b_panels) - t % bn * b_panels);
  };
  const std::int64_t shares = std::min<std::int64_t>(num_threads(), bm * bn);
  std::vector<std::int64_t> first_block(static_cast<std::size_t>(shares + 1), bm * bn);
  first_block[0] = 0;
  for (std::int64_t t = 0, done = 0, s = 1; t < bm * bn && s < shares; ++t) {
    done += tiles_of(t);  // share s starts after the block that reaches s/shares of the tiles
    while (s < shares && done * shares >= na * nb * s) first_block[static_cast<std::size_t>(s++)] = t + 1;
  }
  // A's panels are packed by the thread that runs them, one block row at a time when it
  // reaches the row, into its own buffer: they are still in its cache when the micro-kernels
  // read them, and one thread's reads of A overlap the other's products instead of both
  // threads streaming A at once. A block row two threads share is packed by each of them.
  parallel_for(shares, 1, [&](std::int64_t s0, std::int64_t s1) {
    auto* arow = static_cast<std::uint8_t*>(sized(t_buffers.a, kBlockAPanels * a_panel));
    auto* bblock = pack_per_block ? static_cast<std::uint8_t*>(sized(t_buffers.block_b, b_panels * b_panel)) : nullptr;
    std::int64_t packed_row = -1;
    for (std::int64_t t = first_block[static_cast<std::size_t>(s0)]; t < first_block[static_cast<std::size_t>(s1)]; ++t) {
      const std::int64_t i_first = t / bn * kBlockAPanels, j_first = t % bn * b_panels;
      const std::int64_t i_last = std::min(na, i_first + kBlockAPanels), j_last = std::min(nb, j_first + b_panels);
      if (t / bn != packed_row) {
        packed_row = t / bn;
        for (std::int64_t k0 = 0; k0 < K; k0 += ka)
          for (std::int64_t i = i_first; i < i_last; ++i)
            k.pack_a(ta, A + k0 * lda, lda, i * k.mr, std::min<std::int64_t>(k.mr, M - i * k.mr), std::min(ka, K - k0),
                     arow + (i - i_first) * a_panel + k0 / 2 * k.mr * k.pair_bytes);
      }
      if (pack_per_block) pack_b_panels(j_first, j_last, bblock);
      for (std::int64_t p0 = 0; p0 < P; p0 += kp) {
        const std::int64_t np = std::min(kp, P - p0);
        const bool first = p0 == 0, last = p0 + np == P;
        for (std::int64_t j = j_first; j < j_last; ++j) {
          const int cols = static_cast<int>(std::min<std::int64_t>(k.nr, N - j * k.nr));
          const std::uint8_t* bp =
              (pack_per_block ? bblock + (j - j_first) * b_panel : bbuf + j * b_panel) + p0 * k.nr * k.pair_bytes;
          for (std::int64_t i = i_first; i < i_last; ++i) {
            const int rows = static_cast<int>(std::min<std::int64_t>(k.mr, M - i * k.mr));
            k.micro(np, arow + (i - i_first) * a_panel + p0 * k.mr * k.pair_bytes, bp, alpha, beta,
                    C + i * k.mr * ldc + j * k.nr, ldc, rows, cols, !first, last,
                    last && bias != nullptr ? bias + j * k.nr : nullptr);
          }
        }
      }
    }
  });
}

}  // namespace tfm::kernels::packed
