// qgemm: picks the compact-weight kernel for the active instruction set and threads it over
// weight rows (each output column is computed by one thread running the same code, so the
// result does not depend on the thread count either).
//
// Few rows (decode, M <= kRowInvariantMaxRows): activations are quantized once to int8 blocks
// (qgemm_act.h), then every weight row is streamed once per call and dotted with each row of
// activations by the ISA's integer kernel: y[m] depends on x[m] and W only.
// Many rows (prefill): block types on AVX-512 VNNI stay on the integer tiles (faster at every
// M measured); elsewhere weight tiles are dequantized to f32 and multiplied by the f32 GEMM,
// whose compute rate beats those integer kernels once each weight is reused by enough rows
// (docs/benchmarks.md, "`tfm bench qgemm`: compact-weight kernel rates"); batch invariance is not promised there.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/gemm_rows.h"
#include "kernels/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_act.h"
#include "kernels/qgemm_bf16.h"
#include "kernels/quant_repack.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace {

// -1: automatic (see qgemm.h); otherwise the row count set by a benchmark or test.
std::atomic<std::int64_t> g_dequant_min_rows{-1};

qgemm_detail::RowsFn pick_rows_fn() {
  switch (active_isa()) {
    case Isa::avx512:
      if (cpu_info().avx512_vnni && qgemm_detail::rows_avx512_vnni) return qgemm_detail::rows_avx512_vnni;
      [[fallthrough]];
    case Isa::avx2:
      if (qgemm_detail::rows_avx2) return qgemm_detail::rows_avx2;
      [[fallthrough]];
    default: return &qgemm_detail::rows_twin;
  }
}

void run_rows(qgemm_detail::RowsFn fn, DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x,
              std::int64_t ldx, const void* w, float* y, std::int64_t ldy) {
  thread_local qgemm_detail::QuantizedActs buffer;
  // A plain reference for the workers (naming the thread_local inside the lambda would give
  // each worker its own, empty, buffer).
  const qgemm_detail::QuantizedActs& acts = buffer;
  if (fn == qgemm_detail::rows_avx512_vnni && qgemm_detail::act_block(wtype) != 0)
    qgemm_detail::prepare_acts_avx512_vnni(wtype, M, K, x, ldx, buffer);
  else if (fn == qgemm_detail::rows_avx2)
    qgemm_detail::prepare_acts_avx2(wtype, M, K, x, ldx, buffer);  // vectorized, the same values
  else
    qgemm_detail::quantize_acts(wtype, M, K, x, ldx, buffer);
  const std::size_t row_bytes = dtype_row_bytes(wtype, K);
  // Tasks of >= 32 KiB of weights: enough to amortise the fork, small enough to split a
  // 768-column matrix over two threads.
  const std::int64_t grain = std::max<std::int64_t>(1, static_cast<std::int64_t>((32u << 10) / row_bytes));
  parallel_for(N, grain, [&](std::int64_t n0, std::int64_t n1) {
    fn(wtype, M, n0, n1, K, x, ldx, acts, w, row_bytes, y, ldy);
  });
}

// Prefill: tiles of weight rows dequantized (in parallel) into f32, then the f32 GEMM.
void dequant_gemm(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                  const void* w, float* y, std::int64_t ldy) {
  const std::size_t row_bytes = dtype_row_bytes(wtype, K);
  const std::int64_t tile = std::max<std::int64_t>(16, std::min<std::int64_t>(N, (std::int64_t{4} << 20) / (4 * K)));
  std::vector<float> buf(static_cast<std::size_t>(tile * K));
  for (std::int64_t n0 = 0; n0 < N; n0 += tile) {
    const std::int64_t rows = std::min(tile, N - n0);
    parallel_for(rows, 8, [&](std::int64_t r0, std::int64_t r1) {
      dequantize_rows(wtype, static_cast<const unsigned char*>(w) + static_cast<std::size_t>(n0 + r0) * row_bytes,
                      buf.data() + r0 * K, r1 - r0, K);
    });
    gemm(false, true, M, rows, K, 1.0f, x, ldx, buf.data(), K, 0.0f, y + n0, ldy);
  }
}

}  // namespace

std::int64_t qgemm_dequant_min_rows() { return g_dequant_min_rows.load(); }
void set_qgemm_dequant_min_rows(std::int64_t rows) {
  g_dequant_min_rows.store(rows < 0 ? -1 : std::max<std::int64_t>(rows, kRowInvariantMaxRows + 1));
}

void qgemm(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
           const void* w, float* y, std::int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  (void)dtype_row_bytes(wtype, K);  // one-line error for a K that does not fit the type's blocks
  if (wtype == DType::f32) {
    const auto* wf = static_cast<const float*>(w);
    if (M <= kRowInvariantMaxRows) return gemm_rows(true, M, N, K, 1.0f, x, ldx, wf, K, 0.0f, y, ldy);
    return gemm(false, true, M, N, K, 1.0f, x, ldx, wf, K, 0.0f, y, ldy);
  }
  if (dtype_is_x16(wtype)) return qgemm_x16(wtype, M, N, K, x, ldx, w, y, ldy, false);  // repacked (quant_repack.h)
  if (wtype != DType::bf16 && wtype != DType::f16 && qgemm_detail::act_block(wtype) == 0)
    fail("qgemm", "weights of type ", dtype_name(wtype), " are not supported");
  const qgemm_detail::RowsFn fn = pick_rows_fn();
  // Automatic: the AVX-512 VNNI tiles of block types and the VDPBF16PS tiles of bf16 beat
  // dequantized tiles + f32 GEMM at every M measured (32 to 512; bf16 32 and 128; docs/benchmarks.md) and keep
  // rows independent, so they run for all M; the other kernels hand prefill (M >= 32) to the
  // f32 GEMM.
  std::int64_t min_rows = qgemm_dequant_min_rows();
  if (min_rows < 0)
    min_rows = (fn == qgemm_detail::rows_avx512_vnni && qgemm_detail::act_block(wtype) != 0) ||
                       (wtype == DType::bf16 && qgemm_detail::bf16_native_active())
                   ? INT64_MAX
                   : 32;
  if (M >= min_rows) return dequant_gemm(wtype, M, N, K, x, ldx, w, y, ldy);
  // bf16: activations rounded to bf16, VDPBF16PS where the CPU has it (qgemm_bf16.h)
  if (wtype == DType::bf16) return qgemm_detail::qgemm_bf16(fn, M, N, K, x, ldx, w, y, ldy);
  run_rows(fn, wtype, M, N, K, x, ldx, w, y, ldy);
}

void qgemm_twin(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                const void* w, float* y, std::int64_t ldy) {
  if (M <= 0 || N <= 0) return;
  if (dtype_is_x16(wtype)) return qgemm_x16(wtype, M, N, K, x, ldx, w, y, ldy, true);
  qgemm_detail::QuantizedActs acts;
  qgemm_detail::quantize_acts(wtype, M, K, x, ldx, acts);
  qgemm_detail::rows_twin(wtype, M, 0, N, K, x, ldx, acts, w, dtype_row_bytes(wtype, K), y, ldy);
}

}  // namespace tfm::kernels
