#!/usr/bin/env bash
# Fusion-in-Decoder from the command line: tfm train with data.fusion builds the passage index
# into the model directory and writes fusion.json; tfm translate reads with them by default
# (the same output as naming the index, k and template by hand), --no-retrieve translates from
# the input alone; tfm train --no-retrieval trains the plain model; a damaged fusion.json is a
# one-line error.
# Usage: fusion_in_decoder.sh /path/to/tfm SOURCE_DIR
set -euo pipefail
tfm="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: fusion_in_decoder.sh line $LINENO: $BASH_COMMAND" >&2' ERR
fail() { echo "FAIL: $*" >&2; exit 1; }
export OMP_WAIT_POLICY=passive

head -2000 "$src/data/cmn-eng.tsv" > "$tmp/pairs.tsv"
cat > "$tmp/base.json" <<JSON
{ "task": "seq2seq", "seed": 3,
  "model": { "architecture": "encoder_decoder", "d_model": 32, "n_heads": 2, "n_layers": 1, "n_decoder_layers": 1,
             "d_ff": 64, "max_positions": 64, "position": "sinusoidal", "tie_embeddings": true },
  "tokenizer": { "kind": "bpe", "vocab_size": 300, "isolate_cjk": true },
  "data": { "train": "$tmp/pairs.tsv", "test_size": 40, "max_length": 48 },
  "optimizer": { "name": "adamw", "lr": 0.003 },
  "training": { "batch_size": 16, "max_steps": 20 },
  "eval": { "every": 20, "log_every": 10, "bleu_examples": 10 } }
JSON
sed "s|\"max_length\": 48 }|\"max_length\": 48, \"fusion\": { \"encoder\": \"$tmp/enc\", \"k\": 2, \"template\": \"{{ prompt }} \|\| {{ document.text }}\" } }|" \
  "$tmp/base.json" > "$tmp/fid.json"
grep -q '"fusion"' "$tmp/fid.json" || fail "the FiD config was not written"
"$tfm" -t 2 train "$tmp/base.json" --out "$tmp/enc" -q > /dev/null 2>&1
"$tfm" -t 2 train "$tmp/fid.json" --out "$tmp/fid" > "$tmp/fid.log" 2>&1
grep -q "^Fusion-in-Decoder: 1960 passages in $tmp/fid/fusion_index; each example reads 2" "$tmp/fid.log" ||
  fail "no index report: $(head -5 "$tmp/fid.log")"
[ -s "$tmp/fid/fusion.json" ] && [ -s "$tmp/fid/fusion_index/index.faiss" ] || fail "no fusion.json / fusion_index in the model directory"
grep -q '"k": 2' "$tmp/fid/fusion.json" || fail "fusion.json: $(cat "$tmp/fid/fusion.json")"

printf 'I love you.\nTom is here.\nWhere is the station?\n' > "$tmp/in.txt"
"$tfm" -t 2 translate -m "$tmp/fid" --beam 1 < "$tmp/in.txt" > "$tmp/default.txt" 2> /dev/null
printf '%s' '{{ prompt }} || {{ document.text }}' > "$tmp/part.jinja"
"$tfm" -t 2 translate -m "$tmp/fid" --beam 1 --retrieve "$tmp/fid/fusion_index" -k 2 --retrieve-template "$tmp/part.jinja" \
  < "$tmp/in.txt" > "$tmp/named.txt" 2> /dev/null
[ "$(wc -l < "$tmp/default.txt")" = 3 ] || fail "tfm translate gave $(wc -l < "$tmp/default.txt") lines for 3"
cmp -s "$tmp/default.txt" "$tmp/named.txt" || fail "fusion.json's defaults differ from the same index, k and template named"
"$tfm" -t 2 translate -m "$tmp/fid" --beam 1 -v --no-retrieve "I love you." > /dev/null 2> "$tmp/plain.err"
! grep -q "retrieved" "$tmp/plain.err" || fail "--no-retrieve still retrieved"
"$tfm" -t 2 translate -m "$tmp/fid" --beam 1 -v "I love you." > /dev/null 2> "$tmp/fid.err"
[ "$(grep -c "^retrieved" "$tmp/fid.err")" = 2 ] || fail "not 2 passages retrieved: $(cat "$tmp/fid.err")"
if "$tfm" translate -m "$tmp/fid" --no-retrieve --retrieve "$tmp/fid/fusion_index" "x" 2> "$tmp/err.txt"; then fail "--no-retrieve with --retrieve"; fi
grep -q "exclude each other" "$tmp/err.txt" || fail "--no-retrieve --retrieve: $(cat "$tmp/err.txt")"

"$tfm" -t 2 train "$tmp/fid.json" --out "$tmp/plain" --no-retrieval -q > /dev/null 2>&1
[ ! -e "$tmp/plain/fusion.json" ] && [ ! -e "$tmp/plain/fusion_index" ] || fail "--no-retrieval still wrote the index"

echo '{"index": "fusion_index"' > "$tmp/fid/fusion.json"
if "$tfm" translate -m "$tmp/fid" "x" 2> "$tmp/err.txt"; then fail "a damaged fusion.json was read"; fi
grep -q "fusion.json.*not valid JSON" "$tmp/err.txt" && [ "$(wc -l < "$tmp/err.txt")" = 1 ] || fail "damaged fusion.json: $(cat "$tmp/err.txt")"
echo "fusion in decoder: ok"
