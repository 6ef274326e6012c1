#!/usr/bin/env bash
# --max-memory BYTES on train and every inference command: refused up front (before weights
# are read or the run directory is made), with the memory planner's breakdown in the one-line
# error; a limit the plan fits in runs normally.
# Usage: max_memory.sh /path/to/tfm /path/to/source
set -euo pipefail
tfm="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_refused() {  # expect_refused "substring" cmd...
  local want="$1"; shift
  if "$@" >"$tmp/out" 2>"$tmp/err"; then fail "not refused: $*"; fi
  [ "$(wc -l <"$tmp/err")" -eq 1 ] || fail "not one line: $(cat "$tmp/err")"
  grep -qF -- "[--max-memory]" "$tmp/err" || fail "no [--max-memory] in: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "'$want' not in: $(cat "$tmp/err")"
}

for i in $(seq 1 40); do printf 'ham\tsee you at %d\nspam\twin a prize %d\n' "$i" "$i"; done >"$tmp/cls.tsv"
for i in $(seq 1 60); do echo "To be, or not to be, that is the question $i:"; done >"$tmp/lm.txt"
for i in $(seq 1 60); do printf 'go %d\tva %d\n' "$i" "$i"; done >"$tmp/s2s.tsv"
small='"d_model": 16, "n_heads": 2, "n_layers": 2, "d_ff": 32, "max_positions": 48'
cat >"$tmp/cls.json" <<JSON
{"task": "classifier", "model": {"model_type": "transformer", "architecture": "encoder_only", "head": "classifier",
  "pooling": "first", $small}, "tokenizer": {"kind": "word"}, "data": {"train": "$tmp/cls.tsv", "max_length": 48},
 "training": {"batch_size": 8}, "eval": {"every": 5}}
JSON
cat >"$tmp/lm.json" <<JSON
{"task": "lm", "model": {"model_type": "transformer", "architecture": "decoder_only", $small},
 "tokenizer": {"kind": "char"}, "data": {"train": "$tmp/lm.txt", "block_size": 32},
 "training": {"batch_size": 4}, "eval": {"every": 5, "batches": 1}}
JSON
cat >"$tmp/s2s.json" <<JSON
{"task": "seq2seq", "model": {"model_type": "transformer", "architecture": "encoder_decoder", "position": "sinusoidal",
  $small}, "tokenizer": {"kind": "char"}, "data": {"train": "$tmp/s2s.tsv", "test_size": 8, "max_length": 24},
 "training": {"batch_size": 8}, "eval": {"every": 5, "bleu_examples": 4}}
JSON

# train: refused before the run directory exists; a generous limit trains.
expect_refused "gradients" "$tfm" -t 1 train "$tmp/lm.json" --max-steps 1 -q --out "$tmp/never" --max-memory 10K
[ ! -e "$tmp/never" ] || fail "a refused run made its directory"
for m in cls lm s2s; do
  "$tfm" -t 1 train "$tmp/$m.json" --max-steps 1 -q --out "$tmp/$m" --max-memory 1G >/dev/null 2>"$tmp/err" \
    || fail "training $m under 1G: $(cat "$tmp/err")"
done

# Every inference command: refused at 10K with the planner's breakdown, runs under 1G.
expect_refused "KV cache" "$tfm" generate -m "$tmp/lm" -p "To be" -n 4 --max-memory 10K
"$tfm" generate -m "$tmp/lm" -p "To be" -n 4 --max-memory 1G >/dev/null 2>&1 || fail "generate under 1G"
expect_refused "context 48 x 4 sequence(s)" "$tfm" translate -m "$tmp/s2s" "go 3" --max-memory 10K
"$tfm" translate -m "$tmp/s2s" "go 3" --max-memory 1G >/dev/null 2>&1 || fail "translate under 1G"
expect_refused "weights" "$tfm" classify -m "$tmp/cls" "win a prize" --max-memory 10K
"$tfm" classify -m "$tmp/cls" "win a prize" --max-memory 1G >/dev/null || fail "classify under 1G"
expect_refused "weights" "$tfm" embed -m "$tmp/cls" "win a prize" --max-memory 10K
"$tfm" embed -m "$tmp/cls" "win a prize" --max-memory 1G >/dev/null || fail "embed under 1G"
expect_refused "lower --batch" "$tfm" eval -m "$tmp/lm" --max-memory 10K
"$tfm" eval -m "$tmp/s2s" --max-memory 1G >/dev/null || fail "eval under 1G"
expect_refused "weights" "$tfm" attention -m "$tmp/lm" -p "To be" -o "$tmp/a.svg" --max-memory 10K
[ ! -e "$tmp/a.svg" ] || fail "a refused attention run wrote its SVG"
expect_refused "expected a size in bytes" "$tfm" generate -m "$tmp/lm" -p "x" --max-memory 12Q
echo "max_memory: ok"
