#!/usr/bin/env bash
# tfm classify / embed / attention on tiny models trained for 5 steps: output formats,
# batched stdin equal to one-by-one, and the error lines for bad input.
# Usage: test_inspect_commands.sh /path/to/tfm
set -euo pipefail
tfm="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_error() {  # expect_error "substring" cmd... : exit 1 and one stderr line holding substring
  local want="$1"; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "expected an error from: $*"; fi
  grep -qF -- "$want" "$tmp/err" || fail "error for '$*' lacks '$want': $(cat "$tmp/err")"
}

# ---- data -------------------------------------------------------------------------------
for i in $(seq 1 40); do
  echo "ham	see you at the station at $i"
  echo "spam	win a free prize now call $i"
  echo "ham	are we still on for dinner $i"
  echo "spam	claim your cash reward today $i"
done >"$tmp/cls.tsv"
for i in $(seq 1 60); do echo "To be, or not to be, that is the question $i:"; done >"$tmp/lm.txt"
for i in $(seq 1 60); do printf 'go %d\tva %d\nhello %d\tsalut %d\n' "$i" "$i" "$i" "$i"; done >"$tmp/s2s.tsv"

small='"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, "max_positions": 48,
       "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0'
cat >"$tmp/cls.json" <<JSON
{"task": "classifier", "model": {"model_type": "transformer", "architecture": "encoder_only",
  "head": "classifier", "pooling": "first", $small},
 "tokenizer": {"kind": "word"}, "data": {"train": "$tmp/cls.tsv", "max_length": 48},
 "training": {"batch_size": 8}, "eval": {"every": 5}}
JSON
cat >"$tmp/lm.json" <<JSON
{"task": "lm", "model": {"model_type": "transformer", "architecture": "decoder_only", $small},
 "tokenizer": {"kind": "char"}, "data": {"train": "$tmp/lm.txt", "block_size": 32},
 "training": {"batch_size": 4}, "eval": {"every": 5, "batches": 1}, "sample": {"tokens": 4}}
JSON
cat >"$tmp/s2s.json" <<JSON
{"task": "seq2seq", "model": {"model_type": "transformer", "architecture": "encoder_decoder",
  "position": "sinusoidal", $small},
 "tokenizer": {"kind": "char"}, "data": {"train": "$tmp/s2s.tsv", "test_size": 8, "max_length": 24},
 "training": {"batch_size": 8}, "eval": {"every": 5, "bleu_examples": 4}}
JSON
for m in cls lm s2s; do "$tfm" -t 1 train "$tmp/$m.json" --max-steps 5 -q --out "$tmp/$m" >/dev/null 2>"$tmp/train.err" \
  || fail "training $m: $(cat "$tmp/train.err")"; done
grep -q '"id2label"' "$tmp/cls/config.json" || fail "config.json of the classifier has no id2label"

# ---- classify ------------------------------------------------------------------------------
"$tfm" classify -m "$tmp/cls" "win a free prize" >"$tmp/one"
grep -qP '^(ham|spam)\t[01]\.[0-9]{4}$' "$tmp/one" || fail "classify TEXT output: $(cat "$tmp/one")"
printf 'see you at the station\nwin a free prize\n\nclaim your cash reward today now\n' >"$tmp/lines"
for i in $(seq 1 40); do echo "are we still on $i"; done >>"$tmp/lines"  # > one batch of 32
"$tfm" classify -m "$tmp/cls" <"$tmp/lines" >"$tmp/batched"
[ "$(wc -l <"$tmp/batched")" -eq "$(wc -l <"$tmp/lines")" ] || fail "classify: one output line per input line"
while IFS= read -r line; do "$tfm" classify -m "$tmp/cls" "$line"; done <"$tmp/lines" >"$tmp/single"
python3 - "$tmp/batched" "$tmp/single" <<'PY' || fail "classify stdin batches differ from one by one"
import sys
a = [l.split("\t") for l in open(sys.argv[1])]
b = [l.split("\t") for l in open(sys.argv[2])]
assert len(a) == len(b) and all(x[0] == y[0] and abs(float(x[1]) - float(y[1])) <= 2e-4 for x, y in zip(a, b)), (a, b)
PY
expect_error "does not exist" "$tfm" classify -m "$tmp/nope" "x"
expect_error "classifier head" "$tfm" classify -m "$tmp/lm" "x"

# ---- embed ---------------------------------------------------------------------------------
"$tfm" embed -m "$tmp/cls" --normalize "a \"quoted\" text" >"$tmp/emb"
python3 - "$tmp/emb" <<'PY'
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["text"] == 'a "quoted" text', rows
e = rows[0]["embedding"]
assert len(e) == 16 and abs(math.sqrt(sum(x * x for x in e)) - 1) < 1e-4, e
PY
expect_error "empty text" "$tfm" embed -m "$tmp/lm" ""
for m in lm s2s; do
  grep -v '^$' "$tmp/lines" | head -5 | "$tfm" embed -m "$tmp/$m" --pooling mean >"$tmp/emb_$m"
  [ "$(wc -l <"$tmp/emb_$m")" -eq 5 ] || fail "embed $m: 5 lines expected"
done
head -5 "$tmp/lines" | "$tfm" embed -m "$tmp/cls" >"$tmp/emb_batched"
head -5 "$tmp/lines" | while IFS= read -r line; do "$tfm" embed -m "$tmp/cls" "$line"; done >"$tmp/emb_single"
python3 - "$tmp/emb_batched" "$tmp/emb_single" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert [r["text"] for r in a] == [r["text"] for r in b]
for x, y in zip(a, b):
    assert max(abs(p - q) for p, q in zip(x["embedding"], y["embedding"])) < 1e-4, (x["text"])
PY

# ---- attention -----------------------------------------------------------------------------
"$tfm" attention -m "$tmp/lm" -p "To be, or not" -o "$tmp/lm.svg" 2>"$tmp/att.err"
grep -q "decoder self-attention, layer 1, all 2 heads" "$tmp/att.err" || fail "attention summary: $(cat "$tmp/att.err")"
[ "$(grep -c '<g class="panel">' "$tmp/lm.svg")" -eq 2 ] || fail "two head panels expected"
python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/lm.svg" || fail "lm.svg is not well-formed XML"
"$tfm" attention -m "$tmp/cls" -p "win <a> & prize" --head 0 --layer 0 -o "$tmp/cls.svg" 2>/dev/null
python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$tmp/cls.svg" || fail "cls.svg is not well-formed XML"
grep -q 'encoder self-attention, layer 0, head 0' "$tmp/cls.svg" || fail "cls.svg title"
"$tfm" attention -m "$tmp/s2s" -p "go 3" --target "va 3" -o "$tmp/s2s.svg" 2>/dev/null
grep -q 'decoder cross-attention, layer 1' "$tmp/s2s.svg" || fail "s2s.svg title"
expect_error "layer 5 is out of range: the decoder has 2 layers (0..1)" "$tfm" attention -m "$tmp/lm" -p "To be" --layer 5 -o "$tmp/x.svg"
expect_error "head 9 is out of range" "$tfm" attention -m "$tmp/lm" -p "To be" --head 9 -o "$tmp/x.svg"
expect_error "needs --target" "$tfm" attention -m "$tmp/s2s" -p "go 3" -o "$tmp/x.svg"
expect_error "prompt is empty" "$tfm" attention -m "$tmp/lm" -p "" -o "$tmp/x.svg"
expect_error "does not exist" "$tfm" attention -m "$tmp/nope" -p "x" -o "$tmp/x.svg"
echo "ok"
