#!/usr/bin/env bash
# A GGUF file of each architecture (llama, qwen2, gpt2; written by llama.cpp's conventions in
# tools/reference/ref_gguf.py) runs with every applicable command: info -m, generate, eval,
# attention. tfm convert GGUF -> directory -> GGUF keeps the greedy continuation, a Q8_0 export
# runs, and a truncated file is a one-line error naming it.   usage: gguf_commands.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
(cd "$SRC/tools/reference" && "$PY" -c "import sys, ref_gguf; ref_gguf.make(sys.argv[1])" "$DIR")
head -c 6000 "$SRC/data/tinyshakespeare.txt" > "$DIR/text.txt"
fail() { echo "FAIL: $*"; exit 1; }
for a in llama qwen2 gpt2; do
  G="$DIR/gguf_$a.gguf"
  "$TFM" -t 1 info -m "$G" > "$DIR/info.txt"
  grep -q "architecture   $a" "$DIR/info.txt" || fail "$a: info has no architecture line"
  grep -qE "^    F32 +[0-9]+ tensors" "$DIR/info.txt" || fail "$a: info has no tensor-type line"
  grep -qE "^  weights \(f32\)" "$DIR/info.txt" || fail "$a: info has no memory plan"
  GEN=$("$TFM" -t 1 generate -m "$G" -p "hello the world" -n 6 --temp 0 --ignore-eos 2>/dev/null)
  [ -n "$GEN" ] || fail "$a: generate printed nothing"
  "$TFM" -t 1 eval -m "$G" --data "$DIR/text.txt" --ctx 32 > "$DIR/eval.txt"
  grep -qE "^perplexity +[0-9.]+" "$DIR/eval.txt" || fail "$a: eval printed no perplexity"
  "$TFM" -t 1 attention -m "$G" -p "hello the world" -o "$DIR/att.svg" > /dev/null
  grep -q "<svg" "$DIR/att.svg" || fail "$a: attention wrote no SVG"
  # GGUF -> Hugging Face directory -> GGUF: the same greedy text from each
  "$TFM" convert -m "$G" -o "$DIR/hf_$a" > /dev/null
  "$TFM" convert -m "$DIR/hf_$a" -o "$DIR/back_$a.gguf" > /dev/null
  for m in "$DIR/hf_$a" "$DIR/back_$a.gguf"; do
    OUT=$("$TFM" -t 1 generate -m "$m" -p "hello the world" -n 6 --temp 0 --ignore-eos 2>/dev/null)
    [ "$OUT" = "$GEN" ] || fail "$a: $m generates differently"
  done
  "$TFM" convert -m "$G" -o "$DIR/q8_$a.gguf" --type q8_0 > /dev/null
  "$TFM" -t 1 info -m "$DIR/q8_$a.gguf" | grep -cE "^    Q8_0 +[0-9]+ tensors" >/dev/null || fail "$a: no Q8_0 tensors"
  "$TFM" -t 1 generate -m "$DIR/q8_$a.gguf" -p "hello" -n 4 --temp 0 > /dev/null 2>&1 || fail "$a: q8_0 does not run"
done
# A truncated file: exit status 1, one line naming the file and the rule.
head -c 1000 "$DIR/gguf_llama.gguf" > "$DIR/cut.gguf"
if ERR=$("$TFM" info -m "$DIR/cut.gguf" 2>&1); then fail "truncated file accepted"; fi
echo "$ERR" | grep -q "cut.gguf" || fail "error does not name the file: $ERR"
[ "$(echo "$ERR" | wc -l)" -eq 1 ] || fail "error is not one line: $ERR"
echo "$ERR"
echo "gguf commands: llama, qwen2, gpt2 OK"
