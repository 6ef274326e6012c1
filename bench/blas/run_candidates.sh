#!/usr/bin/env bash
# Compare the BLAS candidates (docs/benchmarks.md, "Choosing the BLAS"). Builds the three
# tiny programs of bench/blas/ and runs each; prints the load first because the figures are
# only meaningful on a quiet machine.   usage: bench/blas/run_candidates.sh [reps]
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(bench_blas_openblas bench_blas_blis bench_blas_onednn)
cmake --build build -j "${JOBS:-2}" --target "${targets[@]}" >/dev/null
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${targets[@]}"; do build/bin/$t "${1:-10}"; done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
