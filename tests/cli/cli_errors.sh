#!/usr/bin/env bash
# What a newcomer meets first: a misspelled command is named with the nearest one; a bad option
# is one `tfm: error:` line (exit non-zero); `tfm info` takes a model directory or a .gguf file
# without -m; an unknown preset is named with the presets.
#   usage: cli_errors.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect_error WANT COMMAND...: non-zero exit, one stderr line, containing WANT.
expect_error() {
  local want=$1
  shift
  if "$@" > "$DIR/out" 2> "$DIR/err"; then fail "'$*' succeeded"; fi
  [ "$(wc -l < "$DIR/err")" -eq 1 ] || fail "'$*': not one line: $(cat "$DIR/err")"
  grep -qF -- "$want" "$DIR/err" || fail "'$*': '$want' not in: $(cat "$DIR/err")"
  grep -q "^tfm: error: " "$DIR/err" || fail "'$*': not the tfm: error: form: $(cat "$DIR/err")"
}
expect_error "unknown command 'generat' (did you mean 'generate'?)" "$TFM" generat -m x
expect_error "unknown command 'infoo' (did you mean 'info'?)" "$TFM" -t 1 infoo
expect_error "--model is required (tfm generate --help" "$TFM" generate -p hi
expect_error "The following argument was not expected: --nope" "$TFM" info --nope
expect_error "'llam' is neither a file nor a preset (did you mean 'llama'?); presets: vaswani" "$TFM" info llam
"$TFM" --help > /dev/null || fail "--help"
"$TFM" generate --help > /dev/null || fail "generate --help"

head -c 4000 "$SRC/data/tinyshakespeare.txt" > "$DIR/text.txt"
cat > "$DIR/tiny.json" <<JSON
{"task": "lm", "model": {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
  "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 32},
 "tokenizer": {"kind": "bpe", "vocab_size": 300}, "data": {"train": "$DIR/text.txt", "block_size": 16},
 "training": {"batch_size": 2, "max_steps": 2}, "eval": {"every": 2, "batches": 1}, "sample": {"tokens": 0}}
JSON
"$TFM" -t 1 train "$DIR/tiny.json" -q --out "$DIR/m" > /dev/null 2>&1
"$TFM" -t 1 convert -m "$DIR/m" -o "$DIR/m.gguf" > /dev/null
"$TFM" info "$DIR/m" | grep -c "^model: " > /dev/null || fail "info DIR"
"$TFM" info "$DIR/m.gguf" | grep -c "architecture" > /dev/null || fail "info FILE.gguf"
echo "ok"
