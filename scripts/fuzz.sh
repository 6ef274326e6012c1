#!/usr/bin/env bash
# The libFuzzer targets of fuzz/ (docs/reliability.md): build them with clang in build-fuzz/
# (ASan + UBSan + coverage), then run each for a bounded time on its committed seed corpus.
# Every target runs (JOBS at a time); the script exits non-zero when any had a crash, sanitizer report, failed
# property, timeout or memory blow-up (the input that did it is saved as
# build-fuzz/artifacts/<target>-crash-<sha1>), and its last line counts the targets.
#   scripts/fuzz.sh                    every target, FUZZ_SECONDS (default 20) each
#   scripts/fuzz.sh safetensors ...    only these targets
#   FUZZ_SECONDS=1800 scripts/fuzz.sh  a long run (docs/reliability.md records one)
# New inputs that reach new code go to build-fuzz/corpus/<target>/, never into fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
SECS=${FUZZ_SECONDS:-20}
# -O1 -g1, as the sanitizers' authors advise and as the ASan stage of scripts/test.sh builds:
# the build is most of a 20-second-per-target run, and -O1 compiles in ~60% of -O2's time.
CC=${FUZZ_CC:-clang-14} CXX=${FUZZ_CXX:-clang++-14} \
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DTFM_FUZZ=ON > /dev/null
cmake --build build-fuzz -j "$JOBS"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi
mkdir -p build-fuzz/artifacts
symbolizer=$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}${symbolizer:+:external_symbolizer_path=$symbolizer}
# Leaks inside the system libraries on their own error paths (tests/lsan.supp says which) are
# theirs, not the engine's.
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/tests/lsan.supp}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# One target: prints its report; its exit status is whether it failed.
run_target() {
  local t=$1 bin=build-fuzz/fuzz/fuzz_$1 log=build-fuzz/fuzz-$1.log
  if [ ! -x "$bin" ]; then
    echo "fuzz: no target '$t' (fuzz/$t.cpp + a tfm_fuzz_target line in fuzz/CMakeLists.txt)"
    return 1
  fi
  mkdir -p "build-fuzz/corpus/$t"
  # The first directory receives new inputs; the committed seeds (and the regression inputs
  # among them) are read, and every one of them is run before any mutation.
  if ! "$bin" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/artifacts/$t-" ${FUZZ_ARGS:-} "build-fuzz/corpus/$t" "fuzz/corpus/$t" > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: $t FAILED (log: $log; input: build-fuzz/artifacts/$t-*)"
    return 1
  fi
  local runs rate cov
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
  echo "fuzz: $t ok: ${runs:-?} executions in ${SECS} s (${rate:-?}/s), $cov"
}
# libFuzzer runs a target on one thread: JOBS targets at once, each for its SECS on a core of its
# own (the same effort per target as one at a time, in 1/JOBS of the wall time). Reports are
# printed in the targets' order.
ok=0 failed=0
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
  ( if run_target "$t" > "build-fuzz/fuzz-$t.report" 2>&1; then echo ok; else echo failed; fi > "build-fuzz/fuzz-$t.status" ) &
done
wait
for t in "${targets[@]}"; do
  cat "build-fuzz/fuzz-$t.report"
  if [ "$(cat "build-fuzz/fuzz-$t.status" 2> /dev/null)" = ok ]; then ok=$((ok + 1)); else failed=$((failed + 1)); fi
done
echo "fuzz targets: $ok ok, $failed failed"
[ "$failed" -eq 0 ]
