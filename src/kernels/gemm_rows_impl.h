// The body of gemm_rows, written once over simd::Vec<Isa> (see gemm_rows.h for why).
//
// trans_b (B is (N, K)): C[m, n] = dot(A[m, :], B[n, :]). Each dot keeps one vector
//   accumulator whose lane l sums k ≡ l (mod width) in increasing k, then reduce_add — the
//   same for every (m, n), whatever the blocking of rows and columns around it.
// otherwise (B is (K, N)): C[m, n0:n0+w] += A[m, k] * B[k, n0:n0+w] for k = 0..K-1 in order:
//   each element is a plain sequential sum over k.
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/gemm_rows.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::gemm_rows_isa {
// Internal linkage: each ISA's TU keeps its own copies (no cross-ISA inline sharing).
namespace {

template <class V, int MB, int NB>
void dot_block(std::int64_t K, const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float alpha,
               float beta, float* C, std::int64_t ldc) {
  using T = typename V::T;
  T acc[MB][NB];
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) acc[i][j] = V::zero();
  std::int64_t k = 0;
  for (; k + V::width <= K; k += V::width) {
    T b[NB];
    for (int j = 0; j < NB; ++j) b[j] = V::load(B + j * ldb + k);
    for (int i = 0; i < MB; ++i) {
      const T a = V::load(A + i * lda + k);
      for (int j = 0; j < NB; ++j) acc[i][j] = V::fma(a, b[j], acc[i][j]);
    }
  }
  if (const int rest = static_cast<int>(K - k)) {
    T b[NB];
    for (int j = 0; j < NB; ++j) b[j] = V::load_partial(B + j * ldb + k, rest);
    for (int i = 0; i < MB; ++i) {
      const T a = V::load_partial(A + i * lda + k, rest);
      for (int j = 0; j < NB; ++j) acc[i][j] = V::fma(a, b[j], acc[i][j]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j) {
      float& c = C[i * ldc + j];
      const float s = alpha * V::reduce_add(acc[i][j]);
      c = beta == 0.0f ? s : s + beta * c;
    }
}

// Rows of A in blocks of 4 (the remainder by 1), columns (rows of B) in blocks of 4: 16
// accumulators, 4 loads of B reused over 4 rows of A.
template <class V, int NB>
void dot_rows(std::int64_t M, std::int64_t K, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
              float alpha, float beta, float* C, std::int64_t ldc) {
  std::int64_t m = 0;
  for (; m + 4 <= M; m += 4) dot_block<V, 4, NB>(K, A + m * lda, lda, B, ldb, alpha, beta, C + m * ldc, ldc);
  for (; m < M; ++m) dot_block<V, 1, NB>(K, A + m * lda, lda, B, ldb, alpha, beta, C + m * ldc, ldc);
}

// One strip of NV vectors of columns for MB rows, over k in [k0, k1), continuing the sums
// held in acc (row stride ldacc): loading and storing a running sum between k-blocks leaves
// the chain of FMAs exactly as one unbroken loop would.
template <class V, int MB, int NV>
void axpy_block(std::int64_t k0, std::int64_t k1, int cols, const float* A, std::int64_t lda, const float* B,
                std::int64_t ldb, float* acc, std::int64_t ldacc) {
  using T = typename V::T;
  T r[MB][NV];
  if (cols == NV * V::width) {  // a full strip: no masks in the k loop
    for (int i = 0; i < MB; ++i)
      for (int j = 0; j < NV; ++j) r[i][j] = V::load(acc + i * ldacc + j * V::width);
    for (std::int64_t k = k0; k < k1; ++k) {
      const float* b = B + k * ldb;
      T bv[NV];
      for (int j = 0; j < NV; ++j) bv[j] = V::load(b + j * V::width);
      for (int i = 0; i < MB; ++i) {
        const T a = V::set1(A[i * lda + k]);
        for (int j = 0; j < NV; ++j) r[i][j] = V::fma(a, bv[j], r[i][j]);
      }
    }
    for (int i = 0; i < MB; ++i)
      for (int j = 0; j < NV; ++j) V::store(acc + i * ldacc + j * V::width, r[i][j]);
    return;
  }
  // The last, partial strip: one vector at a time, masked.
  for (int c = 0; c < cols; c += V::width) {
    const int n = cols - c < V::width ? cols - c : V::width;
    T q[MB];
    for (int i = 0; i < MB; ++i) q[i] = V::load_partial(acc + i * ldacc + c, n);
    for (std::int64_t k = k0; k < k1; ++k) {
      const T bv = V::load_partial(B + k * ldb + c, n);
      for (int i = 0; i < MB; ++i) q[i] = V::fma(V::set1(A[i * lda + k]), bv, q[i]);
    }
    for (int i = 0; i < MB; ++i) V::store_partial(acc + i * ldacc + c, q[i], n);
  }
}

// B (K, N): C[m, n] = sum over k in order of A[m, k] B[k, n]. The running sums live in a
// scratch strip of NS columns (M * NS floats, at most 32 KiB: in L1/L2) so alpha and beta apply
// once at the end. B is walked KB = 8 rows at a time, each of those rows left to right across the
// strip: KB sequential streams the hardware prefetcher follows, at the bandwidth of the
// transposed path. (Walking 256 rows down one 64-column strip first read 256 B per 4 KiB
// page and ran at 40-80% of that; KB = 4, 16, 32 and 64 measured slower or level at
// M = 1, 4 and 8.) Each KB x 64 block of B is reused from L1 by every row
// block of A. The order of the sums over k is the same whatever M, NS and KB are.
template <class V>
void axpy_rows(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  constexpr int NV = 4;
  constexpr std::int64_t KB = 8, step = NV * V::width;
  const std::int64_t NS = std::max<std::int64_t>(step, (std::int64_t{8192} / M) / step * step);
  thread_local std::vector<float> scratch;
  for (std::int64_t ns = n0; ns < n1; ns += NS) {
    const std::int64_t width = n1 - ns < NS ? n1 - ns : NS;
    scratch.assign(static_cast<std::size_t>(M * width), 0.0f);
    for (std::int64_t k0 = 0; k0 < K; k0 += KB) {
      const std::int64_t k1 = K - k0 < KB ? K : k0 + KB;
      for (std::int64_t c = 0; c < width; c += step) {
        const int cols = static_cast<int>(width - c < step ? width - c : step);
        std::int64_t m = 0;
        for (; m + 4 <= M; m += 4)
          axpy_block<V, 4, NV>(k0, k1, cols, A + m * lda, lda, B + ns + c, ldb, scratch.data() + m * width + c, width);
        for (; m < M; ++m)
          axpy_block<V, 1, NV>(k0, k1, cols, A + m * lda, lda, B + ns + c, ldb, scratch.data() + m * width + c, width);
      }
    }
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t j = 0; j < width; ++j) {
        float& out = C[m * ldc + ns + j];
        const float s = alpha * scratch[static_cast<std::size_t>(m * width + j)];
        out = beta == 0.0f ? s : s + beta * out;
      }
  }
}

template <class V>
void body(bool trans_b, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (!trans_b) return axpy_rows<V>(M, n0, n1, K, alpha, A, lda, B, ldb, beta, C, ldc);
  std::int64_t n = n0;
  for (; n + 4 <= n1; n += 4) dot_rows<V, 4>(M, K, A, lda, B + n * ldb, ldb, alpha, beta, C + n, ldc);
  for (; n < n1; ++n) dot_rows<V, 1>(M, K, A, lda, B + n * ldb, ldb, alpha, beta, C + n, ldc);
}

}  // namespace
}  // namespace tfm::kernels::gemm_rows_isa
