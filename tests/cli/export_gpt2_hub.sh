#!/usr/bin/env bash
# tools/reference/export_gpt2_hub.py: a tiny GPT-2-shaped tfm model (trained 30 steps) written as
# a Hugging Face GPT2LMHeadModel directory. tfm loads it as gpt2 (Conv1D (in, out) weights), and
# its strided perplexity on a text equals PyTorch's (ref_hub.gpt2_forward, the parity tests'
# modeling_gpt2 reference) on the exported weights and tfm's on the original directory; q8_0 of
# the hub directory stays within 1% of it. A model of another shape is refused. (Both GELU
# variants are exported; this small model's perplexity does not tell them apart at 4 digits.)
#   usage: export_gpt2_hub.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
fail() { echo "FAIL: $*"; exit 1; }
gpt2_json() {  # $1: activation, $2: extra model keys
  cat <<JSON
{ "task": "lm", "seed": 3,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 4, "n_layers": 2, "d_ff": 128,
             "max_positions": 32, "norm_placement": "pre", "activation": "$1", "position": "learned",
             "tie_embeddings": true, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 $2 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "optimizer": { "name": "adamw", "lr": 0.01 },
  "training": { "batch_size": 4, "max_steps": 30 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
}
tail -c 3000 "$SRC/data/tinyshakespeare.txt" > "$DIR/text.txt"
ppl() { "$TFM" -t 1 eval -m "$1" --data "$DIR/text.txt" --ctx 32 --stride 16 $2 2>/dev/null | awk '$1 == "perplexity" { print $2 }'; }
for act in gelu gelu_tanh; do
  gpt2_json "$act" "" > "$DIR/$act.json"
  "$TFM" -t 1 train "$DIR/$act.json" --out "$DIR/m_$act" -q > /dev/null
  OUT=$("$PY" "$SRC/tools/reference/export_gpt2_hub.py" "$DIR/m_$act" "$DIR/hub_$act" --check "$DIR/text.txt" --ctx 32 --stride 16)
  echo "$OUT"
  grep -q '"model_type": "gpt2"' "$DIR/hub_$act/config.json" || fail "$act: config.json is not gpt2"
  TORCH=$(echo "$OUT" | sed -n 's/.*perplexity \([0-9.]*\)$/\1/p')
  HUB=$(ppl "$DIR/hub_$act" "") ORIG=$(ppl "$DIR/m_$act" "") Q8=$(ppl "$DIR/hub_$act" "--dtype q8_0")
  echo "$act: PyTorch $TORCH, tfm hub $HUB, tfm original $ORIG, tfm hub q8_0 $Q8"
  [ -n "$TORCH" ] && [ -n "$HUB" ] && [ -n "$Q8" ] || fail "$act: a perplexity is missing"
  [ "$HUB" = "$TORCH" ] || fail "$act: tfm on the hub directory ($HUB) != PyTorch ($TORCH)"
  [ "$HUB" = "$ORIG" ] || fail "$act: hub directory ($HUB) != original ($ORIG)"
  awk -v a="$Q8" -v b="$HUB" 'BEGIN { exit !(a < 1.01 * b && a > 0.99 * b) }' || fail "$act: q8_0 $Q8 vs f32 $HUB"
done
# RMSNorm is not GPT-2's shape: refused with a one-line reason.
gpt2_json gelu ', "norm": "rms_norm", "bias": false' > "$DIR/rms.json"
"$TFM" -t 1 train "$DIR/rms.json" --out "$DIR/m_rms" --max-steps 1 -q > /dev/null
if ERR=$("$PY" "$SRC/tools/reference/export_gpt2_hub.py" "$DIR/m_rms" "$DIR/hub_rms" 2>&1); then fail "rms_norm model exported"; fi
echo "$ERR" | grep -q "not GPT-2-shaped: pre-norm LayerNorm" || fail "rms_norm: $ERR"
echo "ok"
