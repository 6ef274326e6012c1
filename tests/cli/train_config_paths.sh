#!/bin/bash
# A newcomer's training run: a config whose data path is relative to the config's folder
# trains from any working directory; a data file found in neither place is one error line
# naming both places; without --out, train says where the model goes before the first step.
#   usage: train_config_paths.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMP_WAIT_POLICY=passive
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$W/project/configs" "$W/elsewhere"
head -c 20000 "$SRC/data/tinyshakespeare.txt" > "$W/project/configs/text.txt"
cat > "$W/project/configs/tiny.json" <<'JSON'
{ "task": "lm", "seed": 1,
  "model": { "architecture": "decoder_only", "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32,
             "max_positions": 32 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "text.txt", "val_fraction": 0.1, "block_size": 16 },
  "training": { "batch_size": 2, "max_steps": 2 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
cd "$W/elsewhere"
"$TFM" -t 1 train ../project/configs/tiny.json --out run -q > /dev/null 2> err.txt ||
  fail "data beside the config not found: $(cat err.txt)"
[ -f run/model.safetensors ] || fail "no model written"
sed 's/"text.txt"/"missing.txt"/' ../project/configs/tiny.json > ../project/configs/missing.json
if "$TFM" -t 1 train ../project/configs/missing.json --out run2 -q > /dev/null 2> err.txt; then fail "a missing data file trained"; fi
[ "$(wc -l < err.txt)" = 1 ] && grep -q "elsewhere/missing.txt" err.txt && grep -q "project/configs/missing.txt" err.txt ||
  fail "the error does not name both places: $(cat err.txt)"
# Without --out: one line naming the output directory, before training starts.
"$TFM" -t 1 train ../project/configs/tiny.json > out.txt 2> err.txt || fail "train without --out: $(cat err.txt)"
grep -q "writing the model to runs/train (no --out given)" err.txt || fail "no output line: $(head -3 err.txt)"
[ -f runs/train/model.safetensors ] || fail "no model in runs/train"
echo "train config paths ok"
