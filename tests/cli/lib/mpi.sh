# Sourced by the tests/cli/mpi_*.sh scripts: 2 ranks on this machine over shared memory, as
# $MPI; mpirun missing is a failure (scripts/deps.sh installs openmpi-bin).
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/deps.sh installs openmpi-bin)"; exit 1; }
export OMP_WAIT_POLICY=passive OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under the sanitizers (scripts/test.sh) the ranks keep AddressSanitizer but not its leak check:
# OpenMPI's components are dlopen'ed and closed again by MPI_Finalize, so the allocations they
# keep for the process's life show up as leaks in "<unknown module>", which no suppression can name.
if [ -n "${ASAN_OPTIONS:-}" ]; then export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"; fi
MPI="mpirun --oversubscribe -np 2 --mca btl self,vader"
[ "$(id -u)" -ne 0 ] || MPI="$MPI --allow-run-as-root"
# metrics_within ONE.jsonl TWO.jsonl LINES WHAT: two runs' metrics.jsonl have LINES lines each,
# the same steps and splits, and every loss and gradient norm within 1e-5 relative.
metrics_within() {
  python3 - "$@" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == int(sys.argv[3]), (len(a), len(b))
for x, y in zip(a, b):
    assert x["step"] == y["step"] and x["split"] == y["split"], (x, y)
    for k in ("loss", "grad_norm"):
        if k in x:
            assert abs(x[k] - y[k]) <= 1e-5 * abs(x[k]), ("differs", k, x, y)
print(f"{sys.argv[4]}: {len(a)} metrics lines within 1e-5 of one process")
PY
}
# run LOG COMMAND...: runs it with its output in LOG; fails the test with the log when it fails.
run() {
  local log=$1
  shift
  "$@" > "$log" 2>&1 || { echo "FAIL: $*"; cat "$log"; exit 1; }
}
# expect_error WHAT PATTERN COMMAND...: the command must fail within 60 s (no hang), saying PATTERN.
expect_error() {
  local what=$1 pattern=$2 log
  shift 2
  log=$(mktemp)
  if timeout 60 "$@" > "$log" 2>&1; then echo "FAIL: $what succeeded"; rm -f "$log"; exit 1; fi
  grep -q "$pattern" "$log" || { echo "FAIL: $what: no '$pattern'"; cat "$log"; rm -f "$log"; exit 1; }
  rm -f "$log"
}
