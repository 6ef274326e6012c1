#!/usr/bin/env bash
# Unless the user chose a policy, tfm picks how its idle OpenMP threads wait: a bounded spin
# (GOMP_SPINCOUNT=10000) on a machine idle at start, sleeping at once (OMP_WAIT_POLICY=passive)
# on a busy one. libgomp reads its environment when it is loaded, so tfm re-runs itself once;
# OMP_DISPLAY_ENV=verbose makes each libgomp image print what it read, and the last image (the
# one that does the work) must show the spin count `tfm info` says it chose.
# usage: omp_wait_policy.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1
unset OMP_WAIT_POLICY GOMP_SPINCOUNT || true
check_default() {  # $1: what the machine must have been at start (busy|any)
  local out last said
  out=$(OMP_DISPLAY_ENV=verbose "$TFM" info 2>&1)
  last=$(echo "$out" | grep "GOMP_SPINCOUNT" | tail -1)
  said=$(echo "$out" | sed -n 's/^threads: .*idle threads //p')
  echo "default ($1): $said; $last"
  case $said in
    "spin up to 10000 rounds"*) [ "$1" = any ] || { echo "FAIL: spinning beside a busy core"; exit 1; }
                                 echo "$last" | grep -F "'10000'" > /dev/null || { echo "FAIL: said spin, libgomp read $last"; exit 1; } ;;
    "sleep at once"*) echo "$last" | grep -F "'0'" > /dev/null || { echo "FAIL: said sleep, libgomp read $last"; exit 1; } ;;
    *) echo "FAIL: tfm info does not say how idle threads wait: '$said'"; exit 1 ;;
  esac
}
check_default any
# another process busy on a core: the threads must sleep at once
sh -c 'end=$(($(date +%s) + 3)); while [ "$(date +%s)" -lt "$end" ]; do :; done' &
busy=$!
sleep 0.5
check_default busy
kill "$busy" 2>/dev/null || true
wait "$busy" 2>/dev/null || true
# the user's choice stands (no re-run: one image, spinning as asked)
N=$(OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$TFM" --version 2>&1 | grep -c "GOMP_SPINCOUNT")
[ "$N" = 1 ] || { echo "FAIL: tfm re-ran itself although OMP_WAIT_POLICY was set"; exit 1; }
OUT=$(OMP_WAIT_POLICY=active OMP_DISPLAY_ENV=verbose "$TFM" --version 2>&1)
echo "$OUT" | grep "OMP_WAIT_POLICY = 'ACTIVE'" > /dev/null || { echo "FAIL: the user's policy was overridden"; exit 1; }
"$TFM" info | grep "set by the user" > /dev/null && { echo "FAIL: no policy set, yet 'set by the user'"; exit 1; }
GOMP_SPINCOUNT=5 "$TFM" info | grep "idle threads as OMP_WAIT_POLICY / GOMP_SPINCOUNT say (set by the user)" > /dev/null ||
  { echo "FAIL: a user's GOMP_SPINCOUNT not reported"; exit 1; }
# arguments survive the re-run
"$TFM" --version | grep -E '^tfm [0-9]' > /dev/null || { echo "FAIL: --version lost in the re-run"; exit 1; }
echo "PASS"
