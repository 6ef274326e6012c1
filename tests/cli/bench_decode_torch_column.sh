#!/usr/bin/env bash
# tfm bench decode's PyTorch column (bench/peers/torch/bench_torch_decode.py) on a tiny trained
# decoder: f32 weights are compared with PyTorch in float32, all-bf16 weights (--dtype bf16)
# with the same model cast to torch.bfloat16, and block types (q8_0) have no PyTorch column.
# Checks that each PyTorch run happens and reports a rate, not what the rates are.
#   usage: bench_decode_torch_column.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat > "$DIR/tiny.json" <<JSON
{ "task": "lm", "seed": 1,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64,
             "max_positions": 48, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 16 },
  "training": { "batch_size": 2, "max_steps": 1 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
"$TFM" -t 1 train "$DIR/tiny.json" --out "$DIR/m" -q > /dev/null
bench() { "$TFM" -t 1 bench decode -m "$DIR/m" --model-only --min-reps 1 --min-time 0 "$@" 2>&1; }
# "decode b=8   256   <ours>   <torch>   <ratio> ...": the torch field is a number. (Here-strings,
# not `echo | grep -q`: grep -q leaves at the first match, and under pipefail the echo's SIGPIPE
# would fail the check.)
torch_rate() { awk '$1 == "decode" && $2 == "b=8" { print $5 }' <<< "$1"; }
OUT=$(bench)
grep -q "torch = PyTorch .* with its own KV cache" <<< "$OUT" || fail "f32: no PyTorch run: $OUT"
grep -q "in bfloat16" <<< "$OUT" && fail "f32: PyTorch ran in bfloat16"
torch_rate "$OUT" | grep -cE '^[0-9]+\.[0-9]$' >/dev/null || fail "f32: no PyTorch rate: $OUT"
OUT=$(bench --dtype bf16)
grep -q "torch = PyTorch .* in bfloat16 with its own KV cache" <<< "$OUT" || fail "bf16: PyTorch not in bfloat16: $OUT"
torch_rate "$OUT" | grep -cE '^[0-9]+\.[0-9]$' >/dev/null || fail "bf16: no PyTorch rate: $OUT"
OUT=$(bench --dtype q8_0)
grep -q "PyTorch column skipped (its CPU build has no kernels" <<< "$OUT" || fail "q8_0: $OUT"
echo "ok"
