#!/usr/bin/env bash
# tfm train with and without activation checkpointing: the same losses to the last digit
# through the whole loop (dropout on, 3 layers, 6 steps), the start-up line says it is on, and
# tfm info prints both activation figures with the checkpointed one the smaller.
#   usage: checkpoint_activations.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cat > "$DIR/tiny.json" <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 4, "n_layers": 3, "d_ff": 64,
             "max_positions": 32, "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 6 },
  "eval": { "every": 1000, "batches": 1, "log_every": 1 },
  "sample": { "tokens": 0 } }
JSON
"$TFM" -t 1 train "$DIR/tiny.json" --out "$DIR/plain" > "$DIR/plain.log" 2>&1
"$TFM" -t 1 train "$DIR/tiny.json" --out "$DIR/ckpt" --checkpoint-activations > "$DIR/ckpt.log" 2>&1
grep -q "activation checkpointing" "$DIR/ckpt.log" || { echo "FAIL: start-up line does not say so"; cat "$DIR/ckpt.log"; exit 1; }
grep '"split":"train"' "$DIR/plain/metrics.jsonl" | sed 's/"grad_norm".*//' > "$DIR/a"
grep '"split":"train"' "$DIR/ckpt/metrics.jsonl" | sed 's/"grad_norm".*//' > "$DIR/b"
[ "$(wc -l < "$DIR/a")" -eq 6 ] || { echo "FAIL: expected 6 loss lines"; cat "$DIR/a"; exit 1; }
cmp -s "$DIR/a" "$DIR/b" || { echo "FAIL: losses differ"; diff "$DIR/a" "$DIR/b"; exit 1; }
cmp -s "$DIR/plain/metrics.jsonl" "$DIR/ckpt/metrics.jsonl" || { echo "FAIL: metrics (grad norms) differ"; exit 1; }
OUT=$("$TFM" info -m "$DIR/plain" --ctx-size 32 --batch 4)
plain=$(echo "$OUT" | sed -n 's/^  activations  *\([0-9]*\) bytes.*/\1/p')
ckpt=$(echo "$OUT" | sed -n 's/^    checkpointed  *\([0-9]*\) bytes.*/\1/p')
[ -n "$plain" ] && [ -n "$ckpt" ] || { echo "FAIL: tfm info lacks the training lines"; echo "$OUT"; exit 1; }
[ "$ckpt" -lt "$plain" ] || { echo "FAIL: checkpointed $ckpt >= plain $plain"; exit 1; }
echo "ok: 6 identical losses; activations $plain bytes, checkpointed $ckpt"
