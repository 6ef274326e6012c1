// qgemm's bf16 case (qgemm_bf16.h): round the activations once, then the native VDPBF16PS
// tiles or the ISA's f32 kernel over the rounded values, threaded over weight rows as the
// other compact types are (qgemm.cpp's run_rows), so results do not depend on the thread count.
#include "kernels/qgemm_bf16.h"

#include <algorithm>
#include <atomic>

#include "kernels/dispatch.h"
#include "kernels/gemm_bf16.h"
#include "kernels/parallel.h"
#include "tfm/runtime.h"

namespace tfm::kernels::qgemm_detail {
namespace {

std::atomic<bool> g_native_enabled{true};

// Tasks of >= 32 KiB of weights, as run_rows.
std::int64_t grain(std::size_t row_bytes) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>((32u << 10) / row_bytes));
}

}  // namespace

bool bf16_native_active() {
  return g_native_enabled.load() && bf16_rows_native != nullptr && active_isa() == Isa::avx512 &&
         cpu_info().avx512_bf16;
}
void set_bf16_native_enabled(bool enabled) { g_native_enabled.store(enabled); }

void qgemm_bf16(RowsFn emulated, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                const void* w, float* y, std::int64_t ldy) {
  const std::size_t row_bytes = dtype_row_bytes(DType::bf16, K);
  if (bf16_native_active()) {
    thread_local Bf16Acts buffer;
    bf16_prepare_native(M, K, x, ldx, buffer);
    // A plain reference for the workers (a thread_local named inside the lambda would be each
    // worker's own, empty, buffer).
    const Bf16Acts& acts = buffer;
    parallel_for(N, grain(row_bytes),
                 [&](std::int64_t n0, std::int64_t n1) { bf16_rows_native(M, n0, n1, K, acts, w, row_bytes, y, ldy); });
    return;
  }
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<std::size_t>(M * K));
  for (std::int64_t m = 0; m < M; ++m) {
    std::copy_n(x + m * ldx, K, buffer.data() + m * K);
    round_bf16_inplace(buffer.data() + m * K, K);
  }
  const float* xr = buffer.data();
  QuantizedActs none;
  quantize_acts(DType::bf16, M, K, xr, K, none);  // float weights: no int8 blocks (block 0)
  parallel_for(N, grain(row_bytes), [&](std::int64_t n0, std::int64_t n1) {
    emulated(DType::bf16, M, n0, n1, K, xr, K, none, w, row_bytes, y, ldy);
  });
}

}  // namespace tfm::kernels::qgemm_detail
