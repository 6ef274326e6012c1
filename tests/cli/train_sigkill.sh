#!/bin/bash
# Crash consistency of `tfm train`: SIGKILL at random moments, some aimed inside a checkpoint
# write, over many seeds. After every kill the output directory must load (a DIR holding
# config.json is a model `tfm generate` runs; config.json without a checkpoint is a failure),
# and resuming (or restarting when no checkpoint was committed yet) until the run ends must
# give a metrics.jsonl byte-identical to an uninterrupted run's: every train loss, learning
# rate, gradient norm and eval loss. A checkpoint is saved at every step, so most of a run's
# time is spent inside checkpoint writes.
# The kill times come from bash's $RANDOM seeded with the seed number, so a failure is
# reproduced by its seed (printed with every failure): TFM_SIGKILL_FIRST_SEED=N ... 1.
#   usage: train_sigkill.sh TFM SOURCE_DIR [SEEDS]
set -euo pipefail
TFM=$1 SRC=$2 SEEDS=${3:-16}
FIRST_SEED=${TFM_SIGKILL_FIRST_SEED:-1}
seed=none attempt=none
echo "kill seeds $FIRST_SEED..$((FIRST_SEED + SEEDS - 1))"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_WAIT_POLICY=passive
head -c 40000 "$SRC/data/tinyshakespeare.txt" > "$W/train.txt"
cat > "$W/tiny.json" <<JSON
{ "task": "lm", "seed": 7,
  "model": { "architecture": "decoder_only", "d_model": 64, "n_heads": 2, "n_layers": 1, "d_ff": 256,
             "max_positions": 16, "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$W/train.txt", "val_fraction": 0.1, "block_size": 16 },
  "optimizer": { "name": "adamw", "lr": 0.003 },
  "training": { "batch_size": 2, "max_steps": 12 },
  "eval": { "every": 4, "batches": 2, "log_every": 1 },
  "checkpoint": { "every": 1 },
  "sample": { "tokens": 0 } }
JSON
fail() { echo "FAIL (seed $seed, attempt $attempt; rerun with TFM_SIGKILL_FIRST_SEED=$seed and 1 seed): $*"; exit 1; }
train() { "$TFM" -t 1 train "$W/tiny.json" -q "$@"; }

train --out "$W/ref" > /dev/null 2>&1 || fail "the uninterrupted run failed"
[ "$(grep -c '"split":"train"' "$W/ref/metrics.jsonl")" = 12 ] || fail "reference run lacks 12 train records"

# A killed run's directory: a committed checkpoint or nothing; its inference copy loads.
check_dir() {
  local d=$1
  if [ -f "$d/config.json" ]; then
    [ -d "$d/checkpoint" ] || [ -d "$d/checkpoint.old" ] || fail "$d has config.json but no checkpoint"
    "$TFM" -t 1 generate -m "$d" -p "A" -n 2 --temp 0 > /dev/null 2>&1 || fail "$d does not load after a kill"
  fi
}

# Spins (shell builtins only, so it polls every few microseconds) until PATH exists or the
# process is gone.
wait_for() { while kill -0 "$1" 2> /dev/null && [ ! -e "$2" ]; do :; done; }

kills=0 inside=0 between=0
for seed in $(seq "$FIRST_SEED" $((FIRST_SEED + SEEDS - 1))); do
  RANDOM=$seed
  D="$W/run$seed"
  for attempt in 1 2; do
    resume=()
    if [ -d "$D/checkpoint" ] || [ -d "$D/checkpoint.old" ]; then resume=(--resume "$D"); fi
    # tfm itself in the background (not a shell function: $! would be a subshell's pid).
    "$TFM" -t 1 train "$W/tiny.json" -q --out "$D" "${resume[@]}" > "$W/log" 2>&1 &
    pid=$!
    case $(( (seed + attempt) % 3 )) in
      0) sleep "$(printf '0.%03d' $((RANDOM % 1000)))" ;;                    # anywhere
      1) wait_for "$pid" "$D/checkpoint.tmp/optimizer.safetensors.tmp.$pid" ;;  # inside a file write
      2) sleep "$(printf '0.%03d' $((RANDOM % 500)))"                          # inside a later one
         wait_for "$pid" "$D/checkpoint.tmp/model.safetensors.tmp.$pid" ;;
    esac
    kill -KILL "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    kills=$((kills + 1))
    # write_file_atomic's temp names carry the writer's pid: one left behind proves the kill
    # landed inside a file write.
    if [ -n "$(find "$D" -name "*.tmp.$pid" 2> /dev/null)" ]; then inside=$((inside + 1)); fi
    if [ -d "$D/checkpoint.old" ] && [ ! -d "$D/checkpoint" ]; then between=$((between + 1)); fi
    check_dir "$D"
    [ -n "${TFM_TEST_VERBOSE:-}" ] && { echo "seed $seed attempt $attempt pid $pid:"; ls "$D" "$D"/checkpoint* 2>/dev/null; cat "$D/metrics.jsonl" 2>/dev/null | cut -c1-40; cat "$D/checkpoint/train_state.json" 2>/dev/null | grep \"step; }
  done
  # Resume (or start over when no checkpoint was committed) until the run completes.
  resume=()
  if [ -d "$D/checkpoint" ] || [ -d "$D/checkpoint.old" ]; then resume=(--resume "$D"); fi
  train --out "$D" "${resume[@]}" > "$W/log" 2>&1 || { cat "$W/log"; fail "seed $seed: resuming failed"; }
  cmp -s "$W/ref/metrics.jsonl" "$D/metrics.jsonl" || {
    diff "$W/ref/metrics.jsonl" "$D/metrics.jsonl" | head -5
    fail "seed $seed: the resumed run's metrics differ from the uninterrupted run's"
  }
  [ ! -e "$D/checkpoint.tmp" ] && [ ! -e "$D/checkpoint.old" ] || fail "seed $seed: checkpoint.tmp/.old left after a clean end"
  [ -z "$(find "$D" -name '*.tmp.*')" ] || fail "seed $seed: temp files left after a clean end: $(find "$D" -name '*.tmp.*')"
  rm -rf "$D"
done
echo "kills: $kills, inside a file write: $inside, between the checkpoint renames: $between"
[ "$inside" -ge 1 ] || fail "no kill landed inside a file write, so that case went untested"
echo "PASS"
