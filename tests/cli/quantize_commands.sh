#!/usr/bin/env bash
# tfm quantize and --dtype / --cache-type on the tiny GGUF files of tools/reference/ref_gguf.py:
# GGUF -> quantized GGUF and -> quantized directory, both running; --dtype at load; the KV
# cache types; one-line errors for an unsupported type, rows that fit no block, and a q8_0
# cache on a head_dim that is not a multiple of 32.   usage: quantize_commands.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
(cd "$SRC/tools/reference" && "$PY" -c "import sys, ref_gguf; ref_gguf.make(sys.argv[1])" "$DIR")
fail() { echo "FAIL: $*"; exit 1; }
one_line() { [ "$(printf '%s\n' "$1" | wc -l)" -eq 1 ] || fail "not one line: $1"; }
for a in llama gpt2; do
  G="$DIR/gguf_$a.gguf"
  "$TFM" -t 1 quantize -m "$G" -o "$DIR/q4_$a.gguf" --type q4_0 > "$DIR/out.txt"
  grep -q "q4_0 tensors" "$DIR/out.txt" || fail "$a: quantize reported no q4_0 tensors: $(cat "$DIR/out.txt")"
  "$TFM" -t 1 info -m "$DIR/q4_$a.gguf" | grep -cE "^    Q4_0 +[0-9]+ tensors" >/dev/null || fail "$a: no Q4_0 tensors in the file"
  A=$("$TFM" -t 1 generate -m "$DIR/q4_$a.gguf" -p "hello the world" -n 6 --temp 0 --ignore-eos 2>/dev/null)
  [ -n "$A" ] || fail "$a: the q4_0 GGUF generated nothing"
  # --dtype at load computes what the quantized file computes (same quantizer, same kernels).
  B=$("$TFM" -t 1 generate -m "$G" --dtype q4_0 -p "hello the world" -n 6 --temp 0 --ignore-eos 2>/dev/null)
  [ "$A" = "$B" ] || fail "$a: --dtype q4_0 ($B) differs from the q4_0 file ($A)"
  # q4_k: rows of 64 fit no 256-block: each matrix falls back to q8_0, reported.
  "$TFM" -t 1 quantize -m "$G" -o "$DIR/q8dir_$a" --type q4_k > "$DIR/out.txt" 2> "$DIR/err.txt"
  grep -q "q4_k -> q8_0" "$DIR/err.txt" || fail "$a: no fallback reported"
  "$TFM" -t 1 generate -m "$DIR/q8dir_$a" -p "hello" -n 4 --temp 0 --cache-type f16 > /dev/null 2>&1 || fail "$a: quantized directory does not run"
done
if ERR=$("$TFM" quantize -m "$DIR/gguf_gpt2.gguf" -o "$DIR/x.gguf" --type q5_1 2>&1); then fail "q5_1 accepted"; fi
one_line "$ERR"; echo "$ERR" | grep -q "unsupported weight type 'q5_1'" || fail "q5_1: $ERR"
if ERR=$("$TFM" quantize -m "$DIR/gguf_gpt2.gguf" -o "$DIR/x.gguf" --type q4_k --no-fallback 2>&1); then fail "q4_k on rows of 64 accepted"; fi
one_line "$ERR"; echo "$ERR" | grep -qE "tensor '.*' \([0-9]+, 64\) cannot be q4_k" || fail "no-fallback: $ERR"
if ERR=$("$TFM" generate -m "$DIR/gguf_gpt2.gguf" -p "hi" -n 2 --cache-type q8_0 2>&1); then fail "q8_0 cache on head_dim 16 accepted"; fi
echo "$ERR" | grep -q "head_dim is 16" || fail "q8_0 cache: $ERR"
echo "ok"
