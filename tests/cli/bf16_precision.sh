#!/usr/bin/env bash
# tfm train --precision bf16 from the CLI: the start-up summary names the precision and the
# bf16 path `tfm info` reports, the config key does the same as the flag (identical losses),
# train_config.json records it, a bad value is a one-line error, and TFM_BF16 forcing an
# unavailable path fails clearly.
#   usage: bf16_precision.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
write_config() {  # $1 = file, $2 = extra training keys
  cat > "$1" <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64,
             "max_positions": 32, "dropout": 0.1, "attention_dropout": 0.1 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 4 $2 },
  "eval": { "every": 1000, "batches": 1, "log_every": 1 },
  "sample": { "tokens": 0 } }
JSON
}
write_config "$DIR/fp32.json" ""
write_config "$DIR/bf16.json" ', "precision": "bf16"'
write_config "$DIR/bad.json" ', "precision": "fp16"'
PATH_LINE=$("$TFM" info | sed -n 's/^bf16: *//p')
[ -n "$PATH_LINE" ] || { echo "FAIL: tfm info has no bf16 line"; "$TFM" info; exit 1; }
"$TFM" -t 1 train "$DIR/fp32.json" --out "$DIR/flag" --precision bf16 > "$DIR/flag.log" 2>&1
"$TFM" -t 1 train "$DIR/bf16.json" --out "$DIR/key" > "$DIR/key.log" 2>&1
"$TFM" -t 1 train "$DIR/fp32.json" --out "$DIR/fp32" > "$DIR/fp32.log" 2>&1
grep -q "^precision: bf16" "$DIR/flag.log" || { echo "FAIL: summary does not say bf16"; cat "$DIR/flag.log"; exit 1; }
path_name=$(echo "$PATH_LINE" | sed 's/ (training.*//; s/ (bf16-rounded.*//')
grep -q "via $path_name" "$DIR/flag.log" || { echo "FAIL: summary does not name the path '$path_name'"; cat "$DIR/flag.log"; exit 1; }
grep -q "^precision: fp32" "$DIR/fp32.log" || { echo "FAIL: fp32 summary"; cat "$DIR/fp32.log"; exit 1; }
grep '"split":"train"' "$DIR/flag/metrics.jsonl" > "$DIR/a"
grep '"split":"train"' "$DIR/key/metrics.jsonl" > "$DIR/b"
grep '"split":"train"' "$DIR/fp32/metrics.jsonl" > "$DIR/c"
cmp -s "$DIR/a" "$DIR/b" || { echo "FAIL: flag and key differ"; diff "$DIR/a" "$DIR/b"; exit 1; }
if cmp -s "$DIR/a" "$DIR/c"; then echo "FAIL: bf16 losses identical to fp32"; exit 1; fi
grep -q '"precision": "bf16"' "$DIR/key/train_config.json" || { echo "FAIL: train_config.json lacks precision"; exit 1; }
if "$TFM" -t 1 train "$DIR/bad.json" --out "$DIR/bad" > "$DIR/bad.log" 2>&1; then echo "FAIL: fp16 accepted"; exit 1; fi
[ "$(wc -l < "$DIR/bad.log")" -eq 1 ] && grep -q "precision" "$DIR/bad.log" || { echo "FAIL: bad precision message"; cat "$DIR/bad.log"; exit 1; }
if TFM_ISA=generic TFM_BF16=native "$TFM" -t 1 train "$DIR/bf16.json" --out "$DIR/forced" > "$DIR/forced.log" 2>&1; then
  echo "FAIL: TFM_BF16=native accepted under TFM_ISA=generic"; exit 1
fi
grep -q "TFM_BF16" "$DIR/forced.log" || { echo "FAIL: TFM_BF16 message"; cat "$DIR/forced.log"; exit 1; }
echo "ok: bf16 via $path_name"
