#!/usr/bin/env bash
# The whole test suite: install dependencies, build (Release, and ASan+UBSan for the unit
# tests), run every test — unit and PyTorch parity — then the suite again with the portable
# kernels (TFM_ISA=generic).
#   scripts/test.sh            everything
#   JOBS=N scripts/test.sh     parallel build/test jobs (default: all cores)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

JOBS=${JOBS:-$(nproc)}
# ctest runs JOBS test processes at once, each with its own OpenMP team: idle OpenMP threads
# must sleep rather than spin, or the teams starve one another (measured: 5x slower).
export OMP_WAIT_POLICY=passive
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_BUILD_BENCH=ON >/dev/null
cmake --build build -j "$JOBS"

echo "== tests (native kernels: $(build/bin/tfm info | sed -n 's/^kernels: *\([a-z0-9]*\).*/\1/p'))"
ctest --test-dir build -j "$JOBS" --output-on-failure

# Tests labelled isa_independent (file formats, tokenizers, metrics: no kernel runs in them)
# gain nothing from a second run with other kernels.
echo "== tests (TFM_ISA=generic)"
TFM_ISA=generic ctest --test-dir build -j "$JOBS" --output-on-failure -LE isa_independent

echo "== unit tests under ASan+UBSan"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFM_SANITIZE=ON -DTFM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$JOBS" --target tfm_unit_tests tfm_metrics_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j "$JOBS" --output-on-failure -L unit

echo "== fuzz targets (libFuzzer under ASan+UBSan, ${FUZZ_SECONDS:-30} s each)"
JOBS=$JOBS scripts/fuzz.sh
