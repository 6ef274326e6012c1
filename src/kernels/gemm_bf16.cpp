// bf16 GEMM: the path choice (the per-ISA packing and micro-kernels are in gemm_bf16_impl.h
// and gemm_bf16_native_avx512.cpp; gemm_packed.h runs them over blocks of C on the threads).
#include "kernels/gemm_bf16.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm_bf16_impl.h"
#include "kernels/gemm_packed.h"
#include "kernels/parallel.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace gemm_bf16_isa {
const Kernel emulated_generic = make_emulated<simd::Vec<simd::Generic>>();
}  // namespace gemm_bf16_isa

namespace {

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
      if (native_supported()) return packed::run(gemm_bf16_isa::native_avx512bf16, ta, tb, M, N, K, alpha, A, lda, B,
                                                ldb, beta, C, ldc, bias);
      break;
    case Bf16Path::onednn:
      gemm_bf16_onednn::run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      if (bias != nullptr) add_rows(M, N, bias, C, ldc);
      return;
    case Bf16Path::emulated: break;
  }
  packed::run(emulated_kernel(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, bias);
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
