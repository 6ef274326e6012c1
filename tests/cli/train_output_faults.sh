#!/bin/bash
# Faults of `tfm train`'s output directory: a full disk while it writes a checkpoint, output
# directories it cannot write, and a second run on a directory a run is writing.
#  1. full disk (root: a tmpfs sized to hold one checkpoint but not two, so the second save
#     fails; otherwise, and as well when root: `ulimit -f` below the optimizer file's size
#     on a resumed run): exit 1 with one line naming the step, the file and the system's
#     reason and saying the previous checkpoint is intact; no checkpoint.tmp/ left; the
#     directory loads; the kept checkpoint is unchanged (ulimit) and resumes to the losses
#     of an uninterrupted run (tmpfs).
#  2. an unwritable --out (a read-only mount when root, else a mode-555 directory) and an
#     --out below a regular file: refused before training starts; the config names a data
#     file that does not exist, so reaching the data first would give another error.
#  3. a second `tfm train` on the directory of a run in progress: refused, naming the lock
#     (taken once the config is checked, so this one reads real data).
#   usage: train_output_faults.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
W=$(mktemp -d)
MOUNTS=()
first=
cleanup() {
  if [ -n "$first" ]; then kill -KILL "$first" 2> /dev/null || true; wait "$first" 2> /dev/null || true; fi
  for m in "${MOUNTS[@]}"; do umount "$m" 2> /dev/null || umount -l "$m" 2> /dev/null || true; done
  chmod -R u+w "$W" 2> /dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*"; exit 1; }
head -c 40000 "$SRC/data/tinyshakespeare.txt" > "$W/train.txt"
config() {  # config DATA_FILE MAX_STEPS
  cat <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 64, "n_heads": 2, "n_layers": 1, "d_ff": 256,
             "max_positions": 16, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$1", "val_fraction": 0.1, "block_size": 16 },
  "training": { "batch_size": 2, "max_steps": $2 },
  "eval": { "every": 100, "batches": 1, "log_every": 1 },
  "checkpoint": { "every": 1 },
  "sample": { "tokens": 0 } }
JSON
}
config "$W/train.txt" 4 > "$W/tiny.json"
config "$W/no-such-data.txt" 4 > "$W/nodata.json"
train() { "$TFM" -t 1 train "$W/tiny.json" -q "$@"; }
train_lines() { grep '"split":"train"' "$1"; }

train --out "$W/ref" > /dev/null 2>&1 || fail "the uninterrupted run failed"
ckpt_bytes=$(du -sb "$W/ref/checkpoint" | cut -f1)
opt_bytes=$(stat -c %s "$W/ref/checkpoint/optimizer.safetensors")

# The failed run's error and what it kept: the checkpoint of step KEPT, loadable.
check_full() {  # check_full LABEL DIR LOG REASON KEPT
  local label=$1 d=$2 log=$3 reason=$4 kept=$5
  [ "$(wc -l < "$log")" = 1 ] || { cat "$log"; fail "$label: the error is not one line"; }
  grep -F "[checkpoint] step $((kept + 1)) was not saved" "$log" > /dev/null || { cat "$log"; fail "$label: no step named"; }
  grep -F "$reason" "$log" > /dev/null || { cat "$log"; fail "$label: the reason '$reason' is missing"; }
  grep -F "the previous checkpoint in $d/checkpoint is intact" "$log" > /dev/null ||
    { cat "$log"; fail "$label: the kept checkpoint is not named"; }
  [ ! -e "$d/checkpoint.tmp" ] || fail "$label: checkpoint.tmp/ left behind"
  grep -F "\"step\": $kept," "$d/checkpoint/train_state.json" > /dev/null || fail "$label: the step-$kept checkpoint is gone"
  "$TFM" -t 1 generate -m "$d" -p "A" -n 2 --temp 0 > /dev/null 2>&1 || fail "$label: $d does not load"
  echo "$label: $(cat "$log")"
}

# 1a. tmpfs: one checkpoint fits (with its metrics and inference copy, hard links), two do
# not; the step-1 checkpoint then resumes (written elsewhere) to the uninterrupted losses.
if [ "$(id -u)" = 0 ] && mkdir "$W/mnt" && mount -t tmpfs -o size=$((ckpt_bytes * 3 / 2 + 65536)) tmpfs "$W/mnt"; then
  MOUNTS+=("$W/mnt")
  if train --out "$W/mnt/out" > /dev/null 2> "$W/log"; then fail "tmpfs: training succeeded on a full disk"; fi
  check_full "tmpfs" "$W/mnt/out" "$W/log" "No space left on device" 1
  train --resume "$W/mnt/out" --out "$W/cont" > /dev/null 2>&1 || fail "tmpfs: resuming failed"
  [ "$(train_lines "$W/cont/metrics.jsonl")" = "$(train_lines "$W/ref/metrics.jsonl" | tail -n +2)" ] ||
    fail "tmpfs: the resumed losses differ from the uninterrupted run's"
else
  echo "tmpfs: skipped (not root, or mount refused)"
fi

# 1b. ulimit -f below the optimizer file's size: a run resumed from a finished one (4 steps,
# now to 6) cannot save step 5; its step-4 checkpoint stays byte for byte what it was.
train --out "$W/lim" > /dev/null 2>&1 || fail "ulimit: the first run failed"
cp -a "$W/lim/checkpoint" "$W/lim-before"
if (ulimit -f $((opt_bytes / 2048)); train --resume "$W/lim" --out "$W/lim" --max-steps 6 > /dev/null 2> "$W/log"); then
  fail "ulimit: training succeeded past the file-size limit"
fi
check_full "ulimit -f" "$W/lim" "$W/log" "File too large" 4
diff -r "$W/lim-before" "$W/lim/checkpoint" > /dev/null || fail "ulimit: the kept checkpoint changed"

# 2. Unwritable output directories, refused before the data is read.
refused() {  # refused LABEL OUT EXPECTED
  local out
  if out=$("$TFM" -t 1 train "$W/nodata.json" --out "$2" 2>&1); then fail "$1: training started"; fi
  echo "$out" | grep -F "$3" > /dev/null || fail "$1: unexpected error: $out"
  echo "$out" | grep -F "no-such-data" > /dev/null && fail "$1: the data was read before the output was checked"
  echo "$1: $out"
}
echo "x" > "$W/file"
refused "below a file" "$W/file/out" "cannot create the output directory '$W/file/out'"
if [ "$(id -u)" = 0 ] && mkdir "$W/ro" && mount -t tmpfs -o ro,size=1m tmpfs "$W/ro"; then
  MOUNTS+=("$W/ro")
  refused "read-only mount" "$W/ro" "the output directory '$W/ro' is not writable: Read-only file system"
elif [ "$(id -u)" != 0 ]; then
  mkdir -p "$W/ro" && chmod 555 "$W/ro"
  refused "mode 555" "$W/ro" "the output directory '$W/ro' is not writable: Permission denied"
else
  echo "read-only: skipped (root, and mount refused)"
fi

# 3. Two runs, one directory.
config "$W/train.txt" 100000 > "$W/long.json"
"$TFM" -t 1 train "$W/long.json" -q --out "$W/busy" > /dev/null 2>&1 &
first=$!
while kill -0 "$first" 2> /dev/null && [ ! -e "$W/busy/metrics.jsonl" ]; do sleep 0.05; done
kill -0 "$first" 2> /dev/null || fail "lock: the first run ended early"
if out=$(train --out "$W/busy" 2>&1); then fail "lock: a second run on a busy directory went ahead"; fi
echo "$out" | grep -F "another training run is writing to '$W/busy'" > /dev/null || fail "lock: unexpected error: $out"
echo "second run: $out"
kill -KILL "$first"
wait "$first" 2> /dev/null || true
first=
echo "PASS"
