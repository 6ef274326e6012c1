#!/usr/bin/env bash
# The whole test suite (what CI runs): install what is missing, build, then every stage —
#   1. the Release build, and every test with the CPU's best kernels (unit, PyTorch parity,
#      tokenizer parity, llama.cpp side by side, CLI, server, browser);
#   2. the kernel-dependent tests again with each lower instruction set this CPU can run
#      (TFM_ISA=avx2, TFM_ISA=generic: oneDNN is capped to match);
#      (stage 1 also runs the kernel and model unit tests on an emulated AVX2-only CPU, qemu-user's
#      AMD Zen 3 model, where an AVX-512 instruction reaching code an AVX2 CPU runs is SIGILL);
#   3. an ASan+UBSan build: the unit and tokenizer parity tests under it (TFM_SANITIZE_CLI=1:
#      the CLI, server and playground tests too);
#   4. each libFuzzer target for FUZZ_SECONDS (scripts/fuzz.sh).
# A stage that fails does not stop the others: the run ends with one line per stage and a
# closing "N passed, N failed" line, and exits non-zero if anything failed. A test that skips
# itself counts as failed unless tests/hardware_skips.txt names it (the run prints those).
#   scripts/test.sh            everything
#   JOBS=N scripts/test.sh     parallel build/test jobs (default: all cores)
#   TFM_SANITIZE_CLI=1 scripts/test.sh   the CLI and server tests under the sanitizers as well
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh || { echo "test.sh: scripts/deps.sh failed: nothing can be built"; exit 1; }

JOBS=${JOBS:-$(nproc)}
# ctest runs JOBS test processes at once, each with its own OpenMP team: idle OpenMP threads
# must sleep rather than spin, or the teams starve one another (measured: 5x slower).
export OMP_WAIT_POLICY=passive
# No test may hang CI: every test without a TIMEOUT of its own gets this one.
CTEST=(ctest -j "$JOBS" --output-on-failure --timeout 900 --no-tests=error)

summary=()
total_passed=0 total_failed=0 total_skipped=0 any_failed=0
started=$(date +%s)

# record NAME STATUS DETAIL SECONDS
record() {
  summary+=("$(printf '%-34s %-6s %s (%d s)' "$1" "$2" "$3" "$4")")
  [ "$2" = ok ] || any_failed=1
}

# The skipped tests a ctest log lists that tests/hardware_skips.txt allows (printed), and the
# others (failures).
allowed_skip() {
  local name=$1 pattern reason
  while IFS=$'\t' read -r pattern reason; do
    [[ -z "$pattern" || "$pattern" == \#* ]] && continue
    if [[ "$name" =~ ^${pattern}$ ]]; then echo "$reason"; return 0; fi
  done < tests/hardware_skips.txt
  return 1
}

# ctest_stage NAME BUILD_DIR [ENV=VALUE ...] -- [ctest args]
ctest_stage() {
  local name=$1 dir=$2
  shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  local log t0 rc
  log=$(mktemp)
  t0=$(date +%s)
  echo "== $name"
  env "${envs[@]}" "${CTEST[@]}" --test-dir "$dir" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local total failed skipped=0 bad_skips=0 n reason
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/.* \([0-9]*\) tests\{0,1\} failed out of.*/\1/p' "$log" | tail -1)
  total=${total:-0} failed=${failed:-0}
  while read -r n; do
    [ -z "$n" ] && continue
    skipped=$((skipped + 1))
    if reason=$(allowed_skip "$n"); then
      echo "hardware skip: $n ($reason)"
    else
      echo "FAIL: $n skipped itself, and tests/hardware_skips.txt does not list it"
      bad_skips=$((bad_skips + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (Skipped)$/\1/p' "$log")
  rm -f "$log"
  local passed=$((total - failed - skipped))
  failed=$((failed + bad_skips))
  skipped=$((skipped - bad_skips))
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
  total_skipped=$((total_skipped + skipped))
  if [ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$total" -gt 0 ]; then
    record "$name" ok "$passed passed, $skipped hardware skips" $(( $(date +%s) - t0 ))
  else
    [ "$failed" -gt 0 ] || { failed=1; total_failed=$((total_failed + 1)); }  # ctest itself failed
    record "$name" FAILED "$passed passed, $failed failed, $skipped hardware skips" $(( $(date +%s) - t0 ))
  fi
}

# step NAME COMMAND...: a stage that is one command (a build, the fuzz run); counts as one test.
step() {
  local name=$1 t0 rc
  shift
  t0=$(date +%s)
  echo "== $name"
  "$@"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    total_passed=$((total_passed + 1))
    record "$name" ok "" $(( $(date +%s) - t0 ))
  else
    total_failed=$((total_failed + 1))
    record "$name" FAILED "exit $rc" $(( $(date +%s) - t0 ))
  fi
  return "$rc"
}

build_release() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTFM_BUILD_BENCH=ON >/dev/null &&
    cmake --build build -j "$JOBS"
}
# Only what the sanitized stage runs (the parity and llama.cpp programs stay unbuilt; their
# ctest entries are outside its labels). -O1, as the sanitizers' authors advise: it compiles in
# ~60% of -O2's time (48.8 s -> 29.0 s for tokenizer_json.cpp), and the build is most of the
# stage. -g1: line tables, so the reports keep function names and lines.
# TFM_SANITIZE_CLI=1 adds the CLI, server and playground tests: the sanitized CLI build and those
# tests cost ~12 more minutes on 2 cores (measured: 923 CPU-seconds of compiling at -O2, 385 s of
# tests), which the 45-minute budget of this script has no room for; run it before changing
# the CLI or the server (docs/reliability.md).
ASAN_LABELS='unit|tokenizer_parity'
ASAN_TARGETS=(tfm_unit_tests tfm_metrics_tests tfm_tokenizer_parity_tests)
if [ "${TFM_SANITIZE_CLI:-0}" = 1 ]; then
  ASAN_LABELS='unit|tokenizer_parity|cli'
  ASAN_TARGETS+=(tfm_cli)
fi
build_asan() {
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DTFM_SANITIZE=ON -DTFM_BUILD_BENCH=OFF >/dev/null &&
    cmake --build build-asan -j "$JOBS" --target "${ASAN_TARGETS[@]}"
}

# Tests that run no numeric kernel (file formats, tokenizers, metrics) run once, not per ISA.
ISA_FREE='isa_independent|tokenizer_parity|emulated_cpu'

if step "build (Release)" build_release; then
  best=$(build/bin/tfm info | sed -n 's/^kernels: *\([a-z0-9]*\).*/\1/p')
  ctest_stage "tests (native: $best)" build --
  # Each lower instruction set this CPU can execute.
  case "$best" in
    avx512) lower=(avx2 generic) ;;
    avx2) lower=(generic) ;;
    *) lower=() ;;
  esac
  for isa in "${lower[@]}"; do
    ctest_stage "tests (TFM_ISA=$isa)" build TFM_ISA="$isa" -- -LE "$ISA_FREE"
  done
else
  record "tests (native)" FAILED "not run: the build failed" 0
fi

if step "build (ASan+UBSan)" build_asan; then
  ctest_stage "ASan+UBSan: ${ASAN_LABELS//|/, }" build-asan \
    ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp" \
    -- -L "$ASAN_LABELS"
else
  record "ASan+UBSan tests" FAILED "not run: the build failed" 0
fi

step "fuzz targets (${FUZZ_SECONDS:-20} s each)" env JOBS="$JOBS" scripts/fuzz.sh

echo
echo "== summary ($(( ($(date +%s) - started) / 60 )) min on $(nproc) cores)"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
exit "$any_failed"
