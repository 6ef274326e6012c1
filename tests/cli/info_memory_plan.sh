#!/usr/bin/env bash
# tfm info -m DIR --ctx-size C --batch B on a tiny trained model directory: the KV cache line
# equals layers x 2 x kv_heads x C x head_dim x B x 4 bytes (KVCache::bytes_needed; the unit
# test MemoryPlan.KvEqualsTheCacheItPlansFor checks the library side against the cache), and
# a missing directory is a clear error.   usage: info_memory_plan.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
cat > "$DIR/tiny.json" <<JSON
{ "task": "lm", "seed": 1,
  "model": { "architecture": "decoder_only", "d_model": 16, "n_heads": 2, "n_layers": 3, "d_ff": 32,
             "max_positions": 32, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 16 },
  "training": { "batch_size": 2, "max_steps": 1 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
"$TFM" -t 1 train "$DIR/tiny.json" --out "$DIR/m" --max-steps 1 -q > /dev/null
OUT=$("$TFM" info -m "$DIR/m" --ctx-size 20 --batch 3)
echo "$OUT"
# 3 layers x 2 x 2 kv heads x 20 positions x 8 dims x 3 sequences x 4 bytes = 23040
echo "$OUT" | grep -E '^  KV cache +23040 bytes' > /dev/null || { echo "FAIL: KV cache line is not 23040 bytes"; exit 1; }
echo "$OUT" | grep -E '^  total +[0-9]+ bytes' > /dev/null || { echo "FAIL: no total line"; exit 1; }
echo "$OUT" | grep -E 'activations, decode +[0-9]+ bytes' > /dev/null || { echo "FAIL: no decode activations"; exit 1; }
# a missing directory: exit 1 and an error naming it
if ERR=$("$TFM" info -m "$DIR/none" 2>&1); then echo "FAIL: missing dir accepted"; exit 1; fi
echo "$ERR" | grep -F "no model directory '$DIR/none'" > /dev/null || { echo "FAIL: unclear error: $ERR"; exit 1; }
# a context longer than the learned position table
if ERR=$("$TFM" info -m "$DIR/m" --ctx-size 33 2>&1); then echo "FAIL: ctx 33 > 32 accepted"; exit 1; fi
echo "$ERR" | grep -F "exceeds the model's learned position table" > /dev/null || { echo "FAIL: $ERR"; exit 1; }
echo "ok"
