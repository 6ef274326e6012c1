#!/usr/bin/env bash
# Data parallelism under mpirun (2 ranks on localhost, 1 thread each), tiny GPT, dropout on:
#  1. default mode (buckets overlapped with backward): the losses of 2 ranks equal one
#     process's with the same global batch (grad_accum 2) within fp32 reduction-order
#     tolerance, and rank 0 alone writes metrics (6 train lines, not 12); "ranks: 2" printed;
#  2. bit-exact mode with ZeRO-1 (grad_accum 4): 2 ranks for 3 steps, resumed on 1 process
#     for 3 more, and 1 process for 3 steps resumed on 2 ranks, both give metrics.jsonl and
#     model.safetensors byte-identical to an uninterrupted one-process run (so the checkpoint holds the whole
#     sharded optimizer state, and resume works from 2 ranks on 1 and from 1 on 2);
#  3. a rank killed with SIGKILL stops the job (non-zero exit, bounded by a timeout, no hang)
#     and the last checkpoint resumes;
#  4. micro-batches split across ranks (grad_accum 1 and 3 on 2 ranks: rows of one micro-batch
#     on both): losses and gradient norms within 1e-5 of one process, dropout on (each part
#     draws its rows' masks of the whole micro-batch); bit-exact mode refuses a split; the
#     shipped configs/shakespeare-gpt.json (grad_accum 1) starts on 2 ranks.
# (A constant learning rate, so that --max-steps 3 stops a run exactly where an interruption
# would.) mpirun missing is a failure: scripts/deps.sh installs openmpi-bin.
#   usage: mpi_data_parallel.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"
config() {  # config NAME GRAD_ACCUM DISTRIBUTED_JSON MAX_STEPS CHECKPOINT_EVERY
  cat > "$DIR/$1.json" <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64,
             "max_positions": 32, "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 2, "grad_accum": $2, "max_steps": $4 },
  "schedule": { "name": "constant" },
  "distributed": $3,
  "eval": { "every": 3, "batches": 1, "log_every": 1 },
  "checkpoint": { "every": $5 },
  "sample": { "tokens": 0 } }
JSON
}
train_lines() { grep -c '"split":"train"' "$1"; }

# 1. default mode
config plain 2 '{ "bucket_mb": 0.01 }' 6 0
"$TFM" -t 1 train "$DIR/plain.json" --out "$DIR/one" > "$DIR/one.log" 2>&1
$MPI "$TFM" -t 1 train "$DIR/plain.json" --out "$DIR/two" > "$DIR/two.log" 2>&1 || { echo "FAIL: 2-rank run"; cat "$DIR/two.log"; exit 1; }
grep -q "^ranks: 2 " "$DIR/two.log" || { echo "FAIL: no 'ranks: 2' in the start-up summary"; cat "$DIR/two.log"; exit 1; }
[ "$(train_lines "$DIR/two/metrics.jsonl")" -eq 6 ] || { echo "FAIL: expected 6 train lines from rank 0 alone"; cat "$DIR/two/metrics.jsonl"; exit 1; }
metrics_within "$DIR/one/metrics.jsonl" "$DIR/two/metrics.jsonl" 8 "default mode"

# 2. bit-exact + ZeRO-1, resume across rank counts
config exact 4 '{ "bit_exact": true, "zero_optimizer": true }' 6 3
"$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e1" > "$DIR/e1.log" 2>&1
$MPI "$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e21" --max-steps 3 > "$DIR/e21.log" 2>&1 || { echo "FAIL: 2-rank exact run"; cat "$DIR/e21.log"; exit 1; }
grep -q "ZeRO-1: optimizer state" "$DIR/e21.log" || { echo "FAIL: ZeRO-1 memory not reported"; cat "$DIR/e21.log"; exit 1; }
"$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e21" --resume "$DIR/e21" > "$DIR/e21b.log" 2>&1
cmp "$DIR/e1/metrics.jsonl" "$DIR/e21/metrics.jsonl" || { echo "FAIL: 2 ranks then 1 differs from 1 process"; diff "$DIR/e1/metrics.jsonl" "$DIR/e21/metrics.jsonl"; exit 1; }
"$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e12" --max-steps 3 > "$DIR/e12.log" 2>&1
$MPI "$TFM" -t 1 train "$DIR/exact.json" --out "$DIR/e12" --resume "$DIR/e12" > "$DIR/e12b.log" 2>&1 || { echo "FAIL: resume on 2 ranks"; cat "$DIR/e12b.log"; exit 1; }
cmp "$DIR/e1/metrics.jsonl" "$DIR/e12/metrics.jsonl" || { echo "FAIL: 1 process then 2 ranks differs from 1 process"; diff "$DIR/e1/metrics.jsonl" "$DIR/e12/metrics.jsonl"; exit 1; }
for d in e21 e12; do  # the weights too, to the last bit
  cmp "$DIR/e1/model.safetensors" "$DIR/$d/model.safetensors" || { echo "FAIL: $d weights differ from one process"; exit 1; }
done
echo "bit-exact + ZeRO-1: 2->1 and 1->2 resumes give metrics and weights byte-identical to one process"

# 3. a rank killed with SIGKILL
config long 2 '{}' 100000 2
kill_rank_and_resume "$DIR/long.json" "$DIR/k"

# 4. micro-batches split across ranks
for ga in 1 3; do
  config "split$ga" $ga '{}' 6 0
  "$TFM" -t 1 train "$DIR/split$ga.json" --out "$DIR/s1_$ga" > "$DIR/s1_$ga.log" 2>&1
  $MPI "$TFM" -t 1 train "$DIR/split$ga.json" --out "$DIR/s2_$ga" > "$DIR/s2_$ga.log" 2>&1 ||
    { echo "FAIL: 2-rank run with grad_accum $ga"; cat "$DIR/s2_$ga.log"; exit 1; }
  grep -q "split across ranks" "$DIR/s2_$ga.log" || { echo "FAIL: no split reported"; cat "$DIR/s2_$ga.log"; exit 1; }
  metrics_within "$DIR/s1_$ga/metrics.jsonl" "$DIR/s2_$ga/metrics.jsonl" 8 "grad_accum $ga split over 2 ranks"
done
config splitexact 1 '{ "bit_exact": true }' 2 0
if $MPI "$TFM" -t 1 train "$DIR/splitexact.json" --out "$DIR/se" > "$DIR/se.log" 2>&1; then
  echo "FAIL: bit-exact mode ran a split micro-batch"; exit 1
fi
grep -q "bit-exact reduction sums whole micro-batches" "$DIR/se.log" || { echo "FAIL: no clear bit-exact error"; cat "$DIR/se.log"; exit 1; }
# (Its data path is relative to the source tree, as a user runs it.)
(cd "$SRC" && $MPI "$TFM" -t 1 train configs/shakespeare-gpt.json --out "$DIR/gpt" --max-steps 2) > "$DIR/gpt.log" 2>&1 ||
  { echo "FAIL: configs/shakespeare-gpt.json on 2 ranks"; cat "$DIR/gpt.log"; exit 1; }
grep -q "16 of 32 examples per step on rank 0" "$DIR/gpt.log" || { echo "FAIL: no split summary"; cat "$DIR/gpt.log"; exit 1; }
echo "split micro-batches: grad_accum 1 and 3 on 2 ranks match one process; bit-exact refuses; shakespeare-gpt starts"
