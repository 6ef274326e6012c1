#!/usr/bin/env bash
# Every command on Hugging Face hub directories as published (written with torch by
# tools/reference/hub_cli_fixture.py, word-level tokenizer.json "w<i>" = id i): generate and
# translate print the PyTorch reference's greedy tokens; classify, embed, attention, eval
# and info run; a pickle checkpoint is refused in one line.
# Usage: hub_commands.sh /path/to/tfm SOURCE_DIR
set -euo pipefail
tfm="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" "$src/tools/reference/hub_cli_fixture.py" "$tmp" >/dev/null
hub="$tmp/hub"
# The reference's greedy ids of DIR as "w<i> w<j> ...", the first N of them (N: all).
ref_words() {
  "$py" - "$hub/$1.ref.safetensors" "${2:-0}" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
e = json.loads(b[8:8 + n])["greedy"]
lo, hi = e["data_offsets"]
ids = struct.unpack(f"<{(hi - lo) // 8}q", b[8 + n + lo:8 + n + hi])
k = int(sys.argv[2]) or len(ids)
print(" ".join(f"w{i}" for i in ids[:k]))
PY
}

# generate: gpt2 as the hub publishes it (no do_sample in generation_config.json: greedy).
got="$("$tfm" generate -m "$hub/gpt2" -p "w3 w17 w5 w9 w30 w2 w11 w7" -n 6 --no-display-prompt 2>/dev/null)"
[ "$got" = "$(ref_words gpt2)" ] || fail "gpt2 generate: '$got' != reference '$(ref_words gpt2)'"
# llama's generation_config.json asks for sampling: it runs and stops within max_length.
"$tfm" generate -m "$hub/llama_bf16" -p "w3 w17 w5" -s 1 --no-display-prompt >/dev/null 2>&1 ||
  fail "llama generate with generation_config.json sampling"

# translate: T5 and Marian greedily equal the reference (the source gets the tokenizer's </s>).
got="$("$tfm" translate -m "$hub/t5" --beam 1 -n 5 "w4 w12 w8 w20" 2>/dev/null)"
[ "$got" = "$(ref_words t5)" ] || fail "t5 translate: '$got' != '$(ref_words t5)'"
got="$("$tfm" translate -m "$hub/marian" --beam 1 -n 5 "w5 w19 w7 w26 w11" 2>/dev/null)"
[ "$got" = "$(ref_words marian)" ] || fail "marian translate: '$got' != '$(ref_words marian)'"
# Marian's generation_config.json: 4 beams by default.
"$tfm" translate -m "$hub/marian" -n 4 -v "w5 w19" 2>"$tmp/err" >/dev/null || fail "marian beam translate"
grep -q "x 4 sequence" "$tmp/err" || fail "marian translate did not use num_beams 4: $(cat "$tmp/err")"

# classify (id2label names), embed, attention, info.
label="$(echo "w9 w14 w30 w7" | "$tfm" classify -m "$hub/bert_cls" 2>/dev/null | cut -f1)"
case "$label" in NEGATIVE|NEUTRAL|POSITIVE) ;; *) fail "classify label '$label'" ;; esac
echo "w9 w14" | "$tfm" embed -m "$hub/bert_model" 2>/dev/null | grep -c '"embedding": \[' >/dev/null || fail "embed"
"$tfm" attention -m "$hub/gpt2" -p "w3 w17 w5" -o "$tmp/a.svg" 2>/dev/null && grep -q "<svg" "$tmp/a.svg" || fail "attention"
"$tfm" info -m "$hub/marian" | grep -c "model_type marian" >/dev/null || fail "info"
# the stored dtypes, read from the files (llama_bf16: every tensor bf16)
"$tfm" info -m "$hub/llama_bf16" | grep -Eq "^  bf16 +[0-9]+ tensors" || fail "info -m lists no bf16 tensors"

# eval: perplexity on any text, strided windows.
for i in $(seq 1 20); do echo "w3 w17 w5 w9 w30 w1 w11 w7 w8 w12"; done >"$tmp/text.txt"
"$tfm" eval -m "$hub/gpt2" --data "$tmp/text.txt" --stride 8 --ctx 16 --json | grep -c '"perplexity":' >/dev/null || fail "eval --stride"

# A pickle checkpoint is refused, in one line naming the file and the fix.
mkdir "$tmp/pickle" && cp "$hub/gpt2/config.json" "$tmp/pickle/" && : >"$tmp/pickle/pytorch_model.bin"
if "$tfm" generate -m "$tmp/pickle" -p "w3" >/dev/null 2>"$tmp/err"; then fail "pytorch_model.bin accepted"; fi
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "pytorch_model.bin.*safe_serialization=True" "$tmp/err" ||
  fail "pickle error: $(cat "$tmp/err")"
echo "hub commands ok"
