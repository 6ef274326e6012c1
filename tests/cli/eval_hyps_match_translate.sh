#!/usr/bin/env bash
# tfm eval --hyps writes exactly what tfm translate prints for the same sources and settings
# (greedy and beam 4), so eval's BLEU is the BLEU of translate's output: scoring the written
# file with tfm bleu gives eval's figure. A small En->Zh model trained for 300 steps on the
# first pairs of data/cmn-eng.tsv.
# Usage: eval_hyps_match_translate.sh /path/to/tfm /path/to/source
set -euo pipefail
tfm="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -400 "$src/data/cmn-eng.tsv" | sed '1s/^\xEF\xBB\xBF//' | cut -f1,2 >"$tmp/pairs.tsv"
sed -n 401,440p "$src/data/cmn-eng.tsv" | cut -f1,2 >"$tmp/test.tsv"
cut -f1 "$tmp/test.tsv" >"$tmp/sources.txt"
cut -f2 "$tmp/test.tsv" >"$tmp/refs.txt"
cat >"$tmp/s2s.json" <<JSON
{"task": "seq2seq", "seed": 1, "model": {"model_type": "transformer", "architecture": "encoder_decoder",
  "position": "sinusoidal", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_positions": 48,
  "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "bpe", "vocab_size": 600, "isolate_cjk": true},
 "data": {"train": "$tmp/pairs.tsv", "test_size": 40, "max_length": 48},
 "training": {"batch_size": 16}, "eval": {"every": 1000, "bleu_examples": 40}}
JSON
"$tfm" -t 2 train "$tmp/s2s.json" --max-steps 300 -q --out "$tmp/m" >/dev/null 2>"$tmp/err" || fail "training: $(cat "$tmp/err")"

for beam in 1 4; do
  # eval decodes in batches of 40 (one batch), translate in its own batches (16 greedy, 1 beam).
  "$tfm" -t 2 eval -m "$tmp/m" --data "$tmp/test.tsv" --batch 40 --beam "$beam" --hyps "$tmp/eval$beam.txt" --json \
    >"$tmp/eval$beam.json"
  "$tfm" -t 1 translate -m "$tmp/m" --beam "$beam" <"$tmp/sources.txt" >"$tmp/translate$beam.txt" 2>/dev/null
  [ "$(wc -l <"$tmp/eval$beam.txt")" -eq 40 ] || fail "beam $beam: --hyps holds $(wc -l <"$tmp/eval$beam.txt") lines, want 40"
  [ "$(grep -c . "$tmp/eval$beam.txt")" -ge 20 ] || fail "beam $beam: the model translates too little to compare"
  cmp -s "$tmp/eval$beam.txt" "$tmp/translate$beam.txt" ||
    fail "beam $beam: eval's hypotheses differ from translate's: $(diff "$tmp/eval$beam.txt" "$tmp/translate$beam.txt" | head -4)"
  "$tfm" bleu "$tmp/refs.txt" "$tmp/translate$beam.txt" --json -m bleu >"$tmp/bleu$beam.json"
  python3 - "$tmp/eval$beam.json" "$tmp/bleu$beam.json" <<'PY' || fail "beam $beam: eval's BLEU differs from tfm bleu on translate's output"
import json, sys
e = json.load(open(sys.argv[1]))
b = json.loads(open(sys.argv[2]).readline())
assert e["bleu_signature"] == b["signature"] == "nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|version:2.6.0", (e, b)
assert e["bleu"] == b["score"], (e["bleu"], b["score"])
PY
done
echo "eval_hyps_match_translate: ok"
