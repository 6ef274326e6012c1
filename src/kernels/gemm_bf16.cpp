// bf16 GEMM: path choice, packing buffers and threading (the per-ISA packing and
// micro-kernels are in gemm_bf16_impl.h and gemm_bf16_native_avx512.cpp).
//
// Both operands are packed into panels (A: mr rows, B: nr columns, K in pairs): B once per
// call, A one block row at a time by the thread that runs it. The (M/mr) x (N/nr) grid of
// micro-tiles is cut into blocks of 8 A-panels by 4 B-panels that the threads share out. A
// B-panel (K/2 x nr words) stays in L1/L2 while the block's A-panels pass over it. Each C
// element is one micro-kernel's full-K chain, so the blocking and the thread count never
// change a result.
#include "kernels/gemm_bf16.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm_bf16_impl.h"
#include "kernels/parallel.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace gemm_bf16_isa {
const Kernel emulated_generic = make_emulated<simd::Vec<simd::Generic>>();
}  // namespace gemm_bf16_isa

namespace {

constexpr std::int64_t kBlockAPanels = 8, kBlockBPanels = 4;
// K is walked in blocks of this many pairs (512 k) when beta == 0, so a B sub-panel (nr x
// 256 pairs: 32 KiB native) stays in L1/L2 while the block's A-panels pass over it; the
// partial sums wait in C between blocks (exact, see Kernel::micro).
constexpr std::int64_t kBlockPairs = 256;
// Stored rows per step when packing column strips (even, so every step starts a new pair).
constexpr std::int64_t kStripK = 32;

std::atomic<int> g_path{-1};

bool native_supported() { return active_isa() == Isa::avx512 && cpu_info().avx512_bf16; }

Bf16Path default_path() {
  const char* env = std::getenv("TFM_BF16");
  if (env != nullptr && *env != '\0') {
    const std::string s = env;
    Bf16Path want;
    if (s == "native") want = Bf16Path::native;
    else if (s == "onednn") want = Bf16Path::onednn;
    else if (s == "emulated") want = Bf16Path::emulated;
    else fail("TFM_BF16", "unknown bf16 path '", s, "' (allowed: native, onednn, emulated)");
    TFM_CHECK(bf16_path_available(want), "TFM_BF16", "path '", s, "' is not available on this CPU/build (",
              s == "native" ? "needs AVX512_BF16 and TFM_ISA=avx512" : "needs a oneDNN build", ")");
    return want;
  }
  return native_supported() ? Bf16Path::native : Bf16Path::emulated;
}

const gemm_bf16_isa::Kernel& emulated_kernel() {
  switch (active_isa()) {
    case Isa::avx512: return gemm_bf16_isa::emulated_avx512;
    case Isa::avx2: return gemm_bf16_isa::emulated_avx2;
    default: return gemm_bf16_isa::emulated_generic;
  }
}

// Packing buffers, grown on demand and kept per thread (a training step calls this with the
// same few shapes over and over).
struct Buffers {
  std::vector<std::uint64_t> a, b;  // 8-byte words: any pair_bytes divides them; a: one block row
};
thread_local Buffers t_buffers;

void* sized(std::vector<std::uint64_t>& v, std::int64_t bytes) {
  const std::size_t words = static_cast<std::size_t>((bytes + 7) / 8);
  if (v.size() < words) v.resize(words);
  return v.data();
}

void run_packed(const gemm_bf16_isa::Kernel& k, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                std::int64_t ldc, const float* bias) {
  const std::int64_t P = (K + 1) / 2;
  const std::int64_t na = (M + k.mr - 1) / k.mr, nb = (N + k.nr - 1) / k.nr;
  const std::int64_t a_panel = P * k.mr * k.pair_bytes, b_panel = P * k.nr * k.pair_bytes;  // bytes
  auto* bbuf = static_cast<std::uint8_t*>(sized(t_buffers.b, nb * b_panel));
  // A panel of op(A) = Aᵀ (or of op(B) = B) is a strip of columns of the stored matrix: packed
  // one panel at a time it would walk all K stored rows per panel, a new page per row when the
  // rows are long (the dW products: K = batch x tokens). So those are packed kStripK rows of
  // every panel at a time: the rows stay in cache and are read along their length.
  const std::int64_t ka = ta ? kStripK : K, kb = tb ? K : kStripK;
  const std::int64_t pack_shares = std::min<std::int64_t>(num_threads(), nb);
  parallel_for(pack_shares, 1, [&](std::int64_t s0, std::int64_t s1) {
    for (std::int64_t s = s0; s < s1; ++s)
      for (std::int64_t k0 = 0; k0 < K; k0 += kb)
        for (std::int64_t j = nb * s / pack_shares; j < nb * (s + 1) / pack_shares; ++j)
          k.pack_b(tb, B + k0 * ldb, ldb, j * k.nr, std::min<std::int64_t>(k.nr, N - j * k.nr), std::min(kb, K - k0),
                   bbuf + j * b_panel + k0 / 2 * k.nr * k.pair_bytes);
  });
  const std::int64_t bm = (na + kBlockAPanels - 1) / kBlockAPanels, bn = (nb + kBlockBPanels - 1) / kBlockBPanels;
  const std::int64_t kp = beta == 0.0f ? kBlockPairs : P;  // beta != 0 needs C intact until the end
  // The blocks (row-major over bm x bn) are shared out by their micro-tile counts, not by
  // number: the last block row and column are short (M = 4096 is 341 1/3 panels of 12 rows),
  // and an even split by blocks left one of two threads up to 3% more tiles to run.
  const auto tiles_of = [&](std::int64_t t) {
    return (std::min(na, (t / bn + 1) * kBlockAPanels) - t / bn * kBlockAPanels) *
           (std::min(nb, (t % bn + 1) * kBlockBPanels) - t % bn * kBlockBPanels);
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
    std::int64_t packed_row = -1;
    for (std::int64_t t = first_block[static_cast<std::size_t>(s0)]; t < first_block[static_cast<std::size_t>(s1)]; ++t) {
      const std::int64_t i_first = t / bn * kBlockAPanels, j_first = t % bn * kBlockBPanels;
      const std::int64_t i_last = std::min(na, i_first + kBlockAPanels), j_last = std::min(nb, j_first + kBlockBPanels);
      if (t / bn != packed_row) {
        packed_row = t / bn;
        for (std::int64_t k0 = 0; k0 < K; k0 += ka)
          for (std::int64_t i = i_first; i < i_last; ++i)
            k.pack_a(ta, A + k0 * lda, lda, i * k.mr, std::min<std::int64_t>(k.mr, M - i * k.mr), std::min(ka, K - k0),
                     arow + (i - i_first) * a_panel + k0 / 2 * k.mr * k.pair_bytes);
      }
      for (std::int64_t p0 = 0; p0 < P; p0 += kp) {
        const std::int64_t np = std::min(kp, P - p0);
        const bool first = p0 == 0, last = p0 + np == P;
        for (std::int64_t j = j_first; j < j_last; ++j) {
          const int cols = static_cast<int>(std::min<std::int64_t>(k.nr, N - j * k.nr));
          const std::uint8_t* bp = bbuf + j * b_panel + p0 * k.nr * k.pair_bytes;
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

void scale_c(std::int64_t M, std::int64_t N, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

float at(const float* X, std::int64_t ld, bool trans, std::int64_t i, std::int64_t k) {
  return trans ? X[k * ld + i] : X[i * ld + k];
}

}  // namespace

const char* bf16_path_name(Bf16Path path) {
  switch (path) {
    case Bf16Path::native: return "native";
    case Bf16Path::onednn: return "onednn";
    case Bf16Path::emulated: return "emulated";
  }
  return "?";
}

bool bf16_path_available(Bf16Path path) {
  switch (path) {
    case Bf16Path::native: return native_supported();
    case Bf16Path::onednn: return gemm_bf16_onednn::available();
    case Bf16Path::emulated: return true;
  }
  return false;
}

Bf16Path bf16_path() {
  int p = g_path.load(std::memory_order_relaxed);
  if (p < 0) {
    p = static_cast<int>(default_path());
    g_path.store(p, std::memory_order_relaxed);
  }
  return static_cast<Bf16Path>(p);
}

void set_bf16_path(Bf16Path path) {
  TFM_CHECK(bf16_path_available(path), "bf16", "path '", bf16_path_name(path), "' is not available on this CPU/build");
  g_path.store(static_cast<int>(path), std::memory_order_relaxed);
}

const char* bf16_path_description() {
  thread_local std::string s;
  switch (bf16_path()) {
    case Bf16Path::native: s = "native vdpbf16ps (avx512_bf16)"; break;
    case Bf16Path::onednn: s = "oneDNN bf16 matmul"; break;
    case Bf16Path::emulated:
      s = std::string("emulated (bf16-rounded operands, fp32 FMA, ") + isa_name(active_isa()) + ")";
      break;
  }
  return s.c_str();
}

namespace {

void add_rows(std::int64_t M, std::int64_t N, const float* bias, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) C[i * ldc + j] += bias[j];
}

void gemm_bf16_run(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                   std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                   const float* bias) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scale_c(M, N, beta, C, ldc);
    if (bias != nullptr) add_rows(M, N, bias, C, ldc);
    return;
  }
  switch (bf16_path()) {
    case Bf16Path::native:
      // A path chosen before TFM_ISA was lowered by a test falls back rather than fault.
      if (native_supported()) return run_packed(gemm_bf16_isa::native_avx512bf16, ta, tb, M, N, K, alpha, A, lda, B,
                                                ldb, beta, C, ldc, bias);
      break;
    case Bf16Path::onednn:
      gemm_bf16_onednn::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      if (bias != nullptr) add_rows(M, N, bias, C, ldc);
      return;
    case Bf16Path::emulated: break;
  }
  run_packed(emulated_kernel(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
}

}  // namespace

void gemm_bf16(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  gemm_bf16_run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr);
}

void gemm_bf16_bias(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, const float* bias, float* C, std::int64_t ldc) {
  gemm_bf16_run(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc, bias);
}

void gemm_bf16_batched(bool ta, bool tb, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K,
                       float alpha, const float* A, std::int64_t lda, std::int64_t stride_a, const float* B,
                       std::int64_t ldb, std::int64_t stride_b, float beta, float* C, std::int64_t ldc,
                       std::int64_t stride_c) {
  for (std::int64_t b = 0; b < batch; ++b)
    gemm_bf16(ta, tb, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta, C + b * stride_c, ldc);
}

float round_bf16(float x) { return gemm_bf16_isa::bf16_value(x); }

void round_bf16_inplace(float* x, std::int64_t n) {
  parallel_for(n, std::int64_t{1} << 15, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) x[i] = gemm_bf16_isa::bf16_value(x[i]);
  });
}

void gemm_bf16_naive(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                     std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        acc += static_cast<double>(round_bf16(at(A, lda, ta, i, k))) * round_bf16(at(B, ldb, !tb, j, k));
      float& c = C[i * ldc + j];
      c = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c));
    }
}

void gemm_bf16_ordered(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                       const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                       std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; k += 2) {
        if (k + 1 < K) acc += round_bf16(at(A, lda, ta, i, k + 1)) * round_bf16(at(B, ldb, !tb, j, k + 1));
        else acc += 0.0f;  // the zero pad: acc + 0 (keeps -0 + 0 = +0 as the kernels do)
        acc += round_bf16(at(A, lda, ta, i, k)) * round_bf16(at(B, ldb, !tb, j, k));
      }
      float& c = C[i * ldc + j];
      const float s = alpha * acc;
      c = beta == 0.0f ? s : s + beta * c;
    }
}

}  // namespace tfm::kernels

namespace tfm {
const char* bf16_path_description() { return kernels::bf16_path_description(); }
}  // namespace tfm
