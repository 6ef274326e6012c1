#!/usr/bin/env bash
# tfm runs its OpenMP threads passive (sleeping when idle) unless the user chose a policy.
# libgomp reads its environment when it is loaded, so tfm re-runs itself once with
# OMP_WAIT_POLICY=passive; OMP_DISPLAY_ENV=verbose makes each libgomp image print what it
# read, and the last image (the one that does the work) must show a spin count of 0.
# usage: omp_wait_policy.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1
unset OMP_WAIT_POLICY GOMP_SPINCOUNT || true
LAST=$(OMP_DISPLAY_ENV=verbose "$TFM" --version 2>&1 | grep "GOMP_SPINCOUNT" | tail -1)
echo "default: $LAST"
echo "$LAST" | grep -F "'0'" > /dev/null || { echo "FAIL: tfm's threads still spin: $LAST"; exit 1; }
# the user's choice stands (no re-run: one image, spinning as asked)
N=$(OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$TFM" --version 2>&1 | grep -c "GOMP_SPINCOUNT")
[ "$N" = 1 ] || { echo "FAIL: tfm re-ran itself although OMP_WAIT_POLICY was set"; exit 1; }
OUT=$(OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$TFM" --version 2>&1)
echo "$OUT" | grep "OMP_WAIT_POLICY = 'ACTIVE'" > /dev/null || { echo "FAIL: the user's policy was overridden"; exit 1; }
# arguments survive the re-run
"$TFM" --version | grep -E '^tfm [0-9]' > /dev/null || { echo "FAIL: --version lost in the re-run"; exit 1; }
echo "PASS"
