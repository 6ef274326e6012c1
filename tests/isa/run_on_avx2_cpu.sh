#!/usr/bin/env bash
# Runs a gtest binary on an emulated AVX2-only CPU: qemu-user's AMD EPYC-Milan model (Zen 3:
# AVX2, FMA, F16C, no AVX-512). cpuid there reports no AVX-512, so the engine picks its AVX2
# kernels as on such a machine, and any AVX-512 instruction that reaches the code it runs
# (a wider-ISA copy of an inline function kept by the linker, a dispatch that forgets to check)
# stops the test with SIGILL. The run also asserts that the engine saw an AVX2 CPU
# (TFM_EXPECT_BEST_ISA, checked by Runtime.BestIsaIsTheOneTheRunExpects). qemu's TCG is many
# times slower than the host, so the caller picks the tests (the kernels and the model-level
# tests over them).
#   usage: run_on_avx2_cpu.sh BINARY GTEST_FILTER
set -euo pipefail
command -v qemu-x86_64 >/dev/null || { echo "FAIL: qemu-x86_64 not found (scripts/deps.sh installs qemu-user)"; exit 1; }
bin=$1 filter=$2
# On a CPU without AVX-512 the native stage already runs these tests on real AVX2 hardware,
# where the same instruction would be the same SIGILL: emulating it again proves nothing and
# costs ~10 minutes of a 2-core CI run. Skipped (77), which tests/hardware_skips.txt allows.
if ! grep -qw avx512f /proc/cpuinfo; then
  echo "skip: this CPU has no AVX-512; the native tests ran on real AVX2 hardware"
  exit 77
fi
export TFM_EXPECT_BEST_ISA=avx2
# qemu warns about host features TCG lacks on every start; keep the output readable.
qemu-x86_64 -cpu EPYC-Milan "$bin" --gtest_filter="Runtime.BestIsaIsTheOneTheRunExpects:$filter" 2>&1 |
  grep -v "TCG doesn't support requested feature"
