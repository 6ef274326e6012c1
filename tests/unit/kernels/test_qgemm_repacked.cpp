// q4_0, q8_0, q4_k and q6_k repacked in 16-row groups (DType::q4_0x16 ..., kernels/quant_repack.h):
// the repack is lossless (bytes and dequantized values), the kernels match the plain type's
// scalar twin within float reordering on every ISA (the k-quants' to the bit: they keep the
// twin's float steps), the ISA builds agree bit for bit, rows stay
// bit-identical at any M, tail rows stay plain and every row gathers, and shapes that do not
// fit the blocks are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/gemm_rows.h"
#include "kernels/qgemm.h"
#include "kernels/quant_repack.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {

const DType kPlain[] = {DType::q4_0, DType::q8_0, DType::q4_k, DType::q6_k};

// A width given in 32-element blocks as that many of the type's blocks (256 elements for the
// k-quants).
std::int64_t blocks(DType t, std::int64_t K) { return K / 32 * dtype_block_elems(t); }
bool k_quant(DType t) { return dtype_block_elems(t) == 256; }

std::vector<float> normal(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<unsigned char> plain_rows(DType t, std::int64_t N, std::int64_t K, unsigned seed) {
  const std::vector<float> w = normal(static_cast<std::size_t>(N * K), seed, 0.1f);
  std::vector<unsigned char> q(dtype_row_bytes(t, K) * static_cast<std::size_t>(N));
  kernels::quantize_rows(t, w.data(), q.data(), N, K);
  return q;
}

std::vector<unsigned char> repacked(DType t, std::vector<unsigned char> q, std::int64_t N, std::int64_t K) {
  kernels::repack_x16(t, q.data(), N, K);
  return q;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> out{Isa::generic};
  if (cpu_best_isa() == Isa::avx2 || cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx2);
  if (cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

struct IsaScope {
  Isa saved = active_isa();
  explicit IsaScope(Isa isa) { set_active_isa(isa); }
  ~IsaScope() { set_active_isa(saved); }
};

TEST(QgemmRepacked, RepackIsLosslessAndDequantizesLikeThePlainType) {
  for (DType t : kPlain) {
    const DType x16 = kernels::x16_type(t);
    const std::int64_t N = 48, K = blocks(t, 96);
    const auto q = plain_rows(t, N, K, 3);
    const auto r = repacked(t, q, N, K);
    EXPECT_NE(r, q) << dtype_name(t);  // the layout did change
    std::vector<unsigned char> back(q.size());
    kernels::unpack_x16(x16, r.data(), back.data(), N, K);
    EXPECT_EQ(back, q) << dtype_name(t);
    std::vector<float> want(static_cast<std::size_t>(N * K)), got(want.size());
    kernels::dequantize_rows(t, q.data(), want.data(), N, K);
    kernels::dequantize_rows(x16, r.data(), got.data(), N, K);
    EXPECT_EQ(got, want) << dtype_name(t);
    // the naive twin reads the repacked rows as the plain ones
    const std::vector<float> x = normal(static_cast<std::size_t>(3 * K), 4);
    std::vector<float> y0(static_cast<std::size_t>(3 * N)), y1(y0.size());
    kernels::qgemm_naive(t, 3, N, K, x.data(), K, q.data(), y0.data(), N);
    kernels::qgemm_naive(x16, 3, N, K, x.data(), K, r.data(), y1.data(), N);
    EXPECT_EQ(y1, y0) << dtype_name(t);
  }
}

// The kernels against the plain type's scalar twin on the same weights: the same integer block
// sums, the float terms summed in another order, so within a few ulps of Σ |terms|.
TEST(QgemmRepacked, EveryIsaMatchesThePlainTwinAtOddSizes) {
  for (DType t : kPlain)
    for (std::int64_t K32 : {32, 96, 288})
      for (std::int64_t N : {16, 29, 48})
        for (std::int64_t M : {1, 2, 5, 7, 33}) {
          const std::int64_t K = blocks(t, K32);
          const DType x16 = kernels::x16_type(t);
          const auto q = plain_rows(t, N, K, static_cast<unsigned>(M * 13 + N + K));
          const auto r = repacked(t, q, N, K);
          std::vector<float> x = normal(static_cast<std::size_t>(M * K), static_cast<unsigned>(K + M));
          x[0] = 3.0f;  // an outlier in the first activation block
          std::vector<float> twin(static_cast<std::size_t>(M * N)), fast(twin.size()), mag(twin.size());
          kernels::qgemm_twin(t, M, N, K, x.data(), K, q.data(), twin.data(), N);
          std::vector<float> deq(static_cast<std::size_t>(N * K)), ax(x.size());
          kernels::dequantize_rows(t, q.data(), deq.data(), N, K);
          for (float& v : deq) v = std::fabs(v);
          for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
          kernels::gemm_rows(true, M, N, K, 1.0f, ax.data(), K, deq.data(), K, 0.0f, mag.data(), N);
          kernels::qgemm_twin(x16, M, N, K, x.data(), K, r.data(), fast.data(), N);
          EXPECT_EQ(fast, twin) << "the " << dtype_name(x16) << " twin is the plain twin on the unpacked rows";
          for (Isa isa : available_isas()) {
            IsaScope scope(isa);
            kernels::qgemm(x16, M, N, K, x.data(), K, r.data(), fast.data(), N);
            for (std::int64_t i = 0; k_quant(t) && i < M * N; ++i)  // the grouped rows (the tail runs the plain kernel)
              if (i % N < N / 16 * 16) {
                ASSERT_EQ(fast[static_cast<std::size_t>(i)], twin[static_cast<std::size_t>(i)])
                    << dtype_name(x16) << " " << isa_name(isa) << " M=" << M << " N=" << N << " at " << i;
              }
            for (std::size_t i = 0; i < fast.size(); ++i)
              ASSERT_NEAR(fast[i], twin[i], 2e-6f * mag[i] + 1e-30f)
                  << dtype_name(x16) << " " << isa_name(isa) << " M=" << M << " N=" << N << " K=" << K << " at " << i;
          }
        }
}

// One kernel body over the vector types (qgemm_repacked_impl.h): exact integer block sums, then
// the same float steps per lane, so every ISA build gives the same bits (on an AVX-512 VNNI
// CPU this compares each type's AVX-512 and AVX2 builds; an AVX2 CPU has one fast build).
TEST(QgemmRepacked, TheIsaBuildsAgreeBitForBit) {
  const std::int64_t N = 48;
  for (DType t : kPlain) {
    const std::int64_t K = blocks(t, 288);
    const auto r = repacked(t, plain_rows(t, N, K, 21), N, K);
    for (std::int64_t M : {1, 3, 6}) {
      std::vector<float> x = normal(static_cast<std::size_t>(M * K), 22);
      x[5] = -4.0f;
      std::vector<float> first, y(static_cast<std::size_t>(M * N));
      for (Isa isa : available_isas()) {
        if (isa == Isa::generic) continue;  // the scalar twin sums its floats in another order
        IsaScope scope(isa);
        kernels::qgemm(kernels::x16_type(t), M, N, K, x.data(), K, r.data(), y.data(), N);
        if (first.empty()) first = y;
        else EXPECT_EQ(y, first) << dtype_name(t) << " " << isa_name(isa) << " M=" << M;
      }
    }
  }
}

TEST(QgemmRepacked, RowsAreIndependentOfTheBatch) {
  const std::int64_t N = 37;  // two groups and a tail
  for (DType t : kPlain) {
    const std::int64_t K = blocks(t, 160);
    const DType x16 = kernels::x16_type(t);
    const auto r = repacked(t, plain_rows(t, N, K, 9), N, K);
    for (Isa isa : available_isas()) {
      IsaScope scope(isa);
      for (std::int64_t M : {3, 5, 16, 40}) {
        const std::vector<float> x = normal(static_cast<std::size_t>(M * K), 10);
        std::vector<float> all(static_cast<std::size_t>(M * N)), one(static_cast<std::size_t>(N));
        kernels::qgemm(x16, M, N, K, x.data(), K, r.data(), all.data(), N);
        for (std::int64_t m = 0; m < M; ++m) {
          kernels::qgemm(x16, 1, N, K, x.data() + m * K, K, r.data(), one.data(), N);
          for (std::int64_t n = 0; n < N; ++n)
            ASSERT_EQ(one[static_cast<std::size_t>(n)], all[static_cast<std::size_t>(m * N + n)])
                << dtype_name(x16) << " " << isa_name(isa) << " M=" << M << " row " << m << " col " << n;
        }
      }
    }
  }
}

// N % 16 rows after the groups stay plain rows (a 50257-row vocabulary has one): their bytes
// are untouched, and every row still unpacks and gathers as it was.
TEST(QgemmRepacked, TailRowsStayPlainAndEveryRowGathers) {
  const std::int64_t N = 37;  // two groups and five tail rows
  for (DType t : kPlain) {
    const std::int64_t K = blocks(t, 96);
    const DType x16 = kernels::x16_type(t);
    const auto q = plain_rows(t, N, K, 5);
    const auto r = repacked(t, q, N, K);
    const auto tail = 5 * static_cast<std::ptrdiff_t>(dtype_row_bytes(t, K));
    EXPECT_TRUE(std::equal(q.end() - tail, q.end(), r.end() - tail)) << dtype_name(t);
    std::vector<unsigned char> back(q.size());
    kernels::unpack_x16(x16, r.data(), back.data(), N, K);
    EXPECT_EQ(back, q) << dtype_name(t);
    std::vector<float> want(static_cast<std::size_t>(K)), got(want.size());
    for (std::int64_t n = 0; n < N; ++n) {
      kernels::dequantize_rows(t, q.data() + static_cast<std::size_t>(n) * dtype_row_bytes(t, K), want.data(), 1, K);
      kernels::dequantize_x16_row(x16, r.data(), N, n, K, got.data());
      ASSERT_EQ(got, want) << dtype_name(t) << " row " << n;
    }
  }
}

TEST(QgemmRepacked, ShapesOutsideTheBlocksAreOneLineErrors) {
  std::vector<unsigned char> q = plain_rows(DType::q4_0, 17, 64, 1);
  for (int what = 0; what < 3; ++what) {
    try {
      if (what == 0) kernels::repack_x16(DType::q4_0, q.data(), 17, 48);
      else if (what == 1) kernels::dequantize_x16_row(DType::q4_0x16, q.data(), 17, 17, 64, nullptr);
      else kernels::repack_x16(DType::f16, q.data(), 1, 256);
      FAIL() << "no error for case " << what;
    } catch (const Error& e) {
      const std::string msg = e.what();
      const char* want[] = {"q4_0x16 holds rows of whole 32-element blocks; (17, 48)",
                            "row 17 of a q4_0x16 matrix of 17 rows", "f16 have no 16-row interleaved layout"};
      EXPECT_NE(msg.find(want[what]), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  }
}

}  // namespace
}  // namespace tfm
