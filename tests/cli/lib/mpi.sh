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
# kill_rank_and_resume CONFIG OUT [ARGS...]: starts `$MPI tfm train CONFIG --out OUT ARGS` (a
# config that trains far longer than the test waits), kills rank 1 with SIGKILL once a checkpoint
# exists, and checks that mpirun stops every rank (non-zero exit within 60 s, no hang, naming the
# signal) and that the last checkpoint resumes on one process. Needs $TFM and $DIR.
kill_rank_and_resume() {
  local config=$1 out=$2 rc i=0 step
  shift 2
  ( rc=0; timeout 60 $MPI sh -c 'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; shift; exec "$@"' \
      "$DIR" - "$TFM" -t 1 train "$config" --out "$out" "$@" > "$DIR/kill.log" 2>&1 || rc=$?; echo $rc > "$DIR/kill.rc" ) &
  while [ ! -f "$out/checkpoint/train_state.json" ] || [ ! -f "$DIR/pid.1" ]; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "FAIL: no checkpoint after 60 s"; cat "$DIR/kill.log"; exit 1; }
    sleep 0.2
  done
  kill -9 "$(cat "$DIR/pid.1")"
  wait
  rc=$(cat "$DIR/kill.rc")
  rm -f "$DIR"/pid.*
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: mpirun exit $rc after a rank was killed (124: it hung)"; cat "$DIR/kill.log"; exit 1; }
  grep -q "exited on signal 9" "$DIR/kill.log" || { echo "FAIL: no message naming the killed rank"; cat "$DIR/kill.log"; exit 1; }
  step=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step'])" "$out/checkpoint/train_state.json")
  "$TFM" -t 1 train "$config" --out "$out" --resume "$out" --max-steps $((step + 1)) > "$DIR/resume.log" 2>&1 ||
    { echo "FAIL: the last checkpoint does not resume"; cat "$DIR/resume.log"; exit 1; }
  echo "killed rank 1 ($*): mpirun exit $rc, checkpoint at step $step resumed on one process"
}
# sharded_as ONE OUT N TOL WHAT: OUT (a model-parallel run's output directory) holds its weights
# as N shards with model.safetensors.index.json, in checkpoint/ (with the optimizer state's N
# shards and index) and as the inference copy, with no model.safetensors beside them, every
# shard holding a part; and the tensors the indexes list equal ONE's (a one-process run's
# single files) within TOL, absolute. Needs $SRC.
sharded_as() {
  /usr/bin/python3 - "$SRC/tools/reference" "$@" <<'PY' || { echo "FAIL: $5: the sharded checkpoint"; exit 1; }
import json, os, sys
sys.path.insert(0, sys.argv[1])
import fixtures
one, out, n, tol, what = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
def tensors(d, stem):
    single = os.path.join(d, stem + ".safetensors")
    if os.path.exists(single):
        return fixtures.load(single)
    wmap = json.load(open(os.path.join(d, stem + ".safetensors.index.json")))["weight_map"]
    all = {}
    for f in sorted(set(wmap.values())):
        part = fixtures.load(os.path.join(d, f))
        assert set(part) == {k for k, v in wmap.items() if v == f}, (d, f, "holds other tensors than its index says")
        all.update(part)
    return all
worst = 0.0
for d, stems in ((out, ["model"]), (os.path.join(out, "checkpoint"), ["model", "optimizer"])):
    names = os.listdir(d)
    assert "model.safetensors" not in names, (d, "a single model.safetensors beside the shards")
    for stem in stems:
        shards = [f"{stem}-{k:05d}-of-{n:05d}.safetensors" for k in range(1, n + 1)]
        for f in shards + [stem + ".safetensors.index.json"]:
            assert f in names, (d, "lacks", f, sorted(names))
        sizes = [os.path.getsize(os.path.join(d, f)) for f in shards]
        assert min(sizes) > 0.1 * sum(sizes) / n, (d, "a shard holds almost nothing", sizes)
        base = os.path.join(one, "checkpoint") if stem == "optimizer" or d != out else one
        a, b = tensors(base, stem), tensors(d, stem)
        assert sorted(a) == sorted(b), (d, stem, sorted(set(a) ^ set(b)))
        for k in a:
            assert a[k].shape == b[k].shape, (k, a[k].shape, b[k].shape)
            worst = max(worst, float((a[k] - b[k]).abs().max()) if a[k].numel() else 0.0)
assert worst <= tol, (what, "differs from one process by", worst)
print(f"{what}: {n} shards of the weights and optimizer state with their indexes, no single file; "
      f"largest difference from one process {worst:.3g}")
PY
}
# train_tiny NAME MODEL_JSON: a character model trained for 60 steps on tiny Shakespeare into
# $DIR/NAME (its config $DIR/NAME.json). Needs $TFM, $SRC and $DIR.
train_tiny() {
  cat > "$DIR/$1.json" <<JSON
{ "task": "lm", "seed": 5, "model": $2,
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "optimizer": { "name": "adamw", "lr": 0.003 },
  "training": { "batch_size": 8, "max_steps": 60 },
  "eval": { "every": 60, "batches": 1, "log_every": 30 },
  "checkpoint": { "every": 0 }, "sample": { "tokens": 0 } }
JSON
  "$TFM" -t 2 train "$DIR/$1.json" --out "$DIR/$1" > "$DIR/$1.train.log" 2>&1 || { cat "$DIR/$1.train.log"; exit 1; }
}
# train_tiny_cls LAYERS STEPS: a tiny spam classifier (an encoder of LAYERS layers, BPE of 300;
# also a cross-encoder for /v1/rerank) trained for STEPS steps on the first 400 lines of
# data/sms-spam.tsv into $DIR/cls.
train_tiny_cls() {
  head -400 "$SRC/data/sms-spam.tsv" > "$DIR/sms.tsv"
  cat > "$DIR/cls.json" <<JSON
{"task": "classifier", "seed": 1, "model": {"model_type": "transformer", "architecture": "encoder_only",
  "head": "classifier", "pooling": "first", "d_model": 32, "n_heads": 2, "n_layers": $1, "d_ff": 64,
  "max_positions": 64, "position": "learned", "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "bpe", "vocab_size": 300},
 "data": {"train": "$DIR/sms.tsv", "header": true, "test_fraction": 0.1, "max_length": 64, "positive_label": "spam"},
 "training": {"batch_size": 16}, "eval": {"every": 1000}, "checkpoint": {"every": 0}}
JSON
  "$TFM" -t 2 train "$DIR/cls.json" --max-steps "$2" -q --out "$DIR/cls" > /dev/null 2> "$DIR/cls.err" || { cat "$DIR/cls.err"; exit 1; }
}
# train_tiny_s2s STEPS: a tiny En->Zh encoder-decoder (sinusoidal positions, BPE of 400) trained
# for STEPS steps on the first 300 pairs of data/cmn-eng.tsv into $DIR/s2s.
train_tiny_s2s() {
  head -300 "$SRC/data/cmn-eng.tsv" | sed '1s/^\xEF\xBB\xBF//' | cut -f1,2 > "$DIR/pairs.tsv"
  cat > "$DIR/s2s.json" <<JSON
{"task": "seq2seq", "seed": 1, "model": {"model_type": "transformer", "architecture": "encoder_decoder",
  "position": "sinusoidal", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_positions": 48,
  "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "bpe", "vocab_size": 400, "isolate_cjk": true},
 "data": {"train": "$DIR/pairs.tsv", "test_size": 20, "max_length": 48},
 "training": {"batch_size": 16}, "eval": {"every": 1000, "bleu_examples": 0}, "checkpoint": {"every": 0}}
JSON
  "$TFM" -t 2 train "$DIR/s2s.json" --max-steps "$1" -q --out "$DIR/s2s" > /dev/null 2> "$DIR/s2s.err" || { cat "$DIR/s2s.err"; exit 1; }
}
