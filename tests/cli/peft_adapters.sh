#!/usr/bin/env bash
# Bottleneck and prefix-tuning adapters through the CLI: tfm train with "adapter" reports the
# trainable share, writes the adapter beside the base; tfm generate -m BASE --adapter DIR runs
# with each (prefix through the KV cache); tfm merge refuses both with a one-line error.
#   usage: peft_adapters.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
head -c 20000 "$SRC/data/tinyshakespeare.txt" > "$DIR/text.txt"
cat > "$DIR/base.json" <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 64,
             "max_positions": 32 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$DIR/text.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 3 },
  "eval": { "every": 1000, "batches": 1, "log_every": 1 },
  "sample": { "tokens": 0 } }
JSON
"$TFM" -t 1 train "$DIR/base.json" --out "$DIR/base" > "$DIR/base.log" 2>&1
for kind in bottleneck prefix; do
  if [ $kind = bottleneck ]; then
    adapter='{ "type": "bottleneck", "placement": "pfeiffer", "reduction_factor": 8, "non_linearity": "gelu" }'
  else
    adapter='{ "type": "prefix_tuning", "num_virtual_tokens": 5 }'
  fi
  cat > "$DIR/$kind.json" <<JSON
{ "task": "lm", "seed": 3, "init_from": "$DIR/base", "adapter": $adapter,
  "data": { "train": "$DIR/text.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 2 },
  "eval": { "every": 1000, "batches": 1, "log_every": 1 },
  "sample": { "tokens": 0 } }
JSON
  "$TFM" -t 1 train "$DIR/$kind.json" --out "$DIR/$kind" > "$DIR/$kind.log" 2>&1
  grep -q "^trainable: [0-9]* of [0-9]* parameters" "$DIR/$kind.log" || { echo "FAIL: $kind: no trainable line"; cat "$DIR/$kind.log"; exit 1; }
  "$TFM" -t 1 generate -m "$DIR/base" --adapter "$DIR/$kind" -p "RO" -n 8 --temp 0 > "$DIR/$kind.out" 2>&1 ||
    { echo "FAIL: generate with the $kind adapter"; cat "$DIR/$kind.out"; exit 1; }
  if "$TFM" merge -m "$DIR/base" --adapter "$DIR/$kind" -o "$DIR/merged" > "$DIR/merge.err" 2>&1; then
    echo "FAIL: merge accepted a $kind adapter"; exit 1
  fi
  [ "$(wc -l < "$DIR/merge.err")" -eq 1 ] || { echo "FAIL: merge error is not one line"; cat "$DIR/merge.err"; exit 1; }
  grep -q "cannot be" "$DIR/merge.err" || { echo "FAIL: merge error does not say why"; cat "$DIR/merge.err"; exit 1; }
  [ ! -e "$DIR/merged" ] || { echo "FAIL: merge wrote output"; exit 1; }
  echo "ok: $kind: $(grep '^trainable' "$DIR/$kind.log"); merge: $(cat "$DIR/merge.err")"
done
