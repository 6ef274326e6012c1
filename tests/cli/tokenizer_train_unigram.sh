#!/usr/bin/env bash
# tfm tokenizer train --type unigram (SentencePiece's algorithm), checked against two
# references on the English and Chinese sides of cmn-eng:
#  1. Hugging Face `tokenizers` loads the written tokenizer.json and cuts held-out lines into
#     exactly the ids we do (tools/reference/hf-tokenizers/encode_lines.js);
#  2. SentencePiece's own trainer, same vocabulary size and settings, cuts the same held-out
#     lines into nearly as many pieces: ours may use at most 2% more
#     (tools/reference/sentencepiece/unigram_tokens.py).
# Plus the one-line error for a vocabulary too small for the corpus's chars.
set -euo pipefail
tfm=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
awk -F'\t' 'NR % 2 == 0 { print $1; print $2 }' "$src/data/cmn-eng.tsv" > "$tmp/train.txt"
awk -F'\t' 'NR % 2 == 1 && NR % 9 == 1 { print $1; print $2 }' "$src/data/cmn-eng.tsv" > "$tmp/heldout.txt"

"$tfm" -t 2 tokenizer train --type unigram --vocab-size 4000 --input "$tmp/train.txt" -o "$tmp/unigram.json"
"$tfm" tokenize --tokenizer "$tmp/unigram.json" < "$tmp/heldout.txt" > "$tmp/ours.ids"
ours=$(wc -w < "$tmp/ours.ids")
echo "ours: $ours pieces on $(wc -l < "$tmp/heldout.txt") held-out lines"

hf=$src/tools/reference/hf-tokenizers
if [ -d "$hf/node_modules/tokenizers" ]; then
  node "$hf/encode_lines.js" "$tmp/unigram.json" < "$tmp/heldout.txt" > "$tmp/hf.ids"
  if ! cmp -s "$tmp/ours.ids" "$tmp/hf.ids"; then
    echo "FAIL: HF tokenizers encodes our unigram file differently:"
    diff "$tmp/ours.ids" "$tmp/hf.ids" | head -5
    exit 1
  fi
  echo "ok: HF tokenizers gives the same ids on every held-out line"
else
  echo "FAIL: HF tokenizers reference missing (scripts/deps.sh installs it)"; exit 1
fi

py=/usr/bin/python3
if $py -c "import sentencepiece" 2>/dev/null; then
  # Our 4000 hold <pad> <unk> <bos> <eos>; sentencepiece's hold <unk> <s> </s>.
  sp=$($py "$src/tools/reference/sentencepiece/unigram_tokens.py" "$tmp/train.txt" "$tmp/heldout.txt" 3996)
  echo "sentencepiece: $sp pieces"
  if [ "$ours" -gt $((sp * 102 / 100)) ]; then
    echo "FAIL: $ours pieces is more than 2% above sentencepiece's $sp"; exit 1
  fi
  echo "ok: within 2% of sentencepiece ($ours vs $sp)"
else
  echo "FAIL: python3-sentencepiece missing (scripts/deps.sh installs it)"; exit 1
fi

# A vocabulary below the number of distinct chars is refused in one line, naming both.
if "$tfm" tokenizer train --type unigram --vocab-size 100 --input "$tmp/train.txt" -o "$tmp/small.json" 2> "$tmp/err"; then
  echo "FAIL: vocab-size 100 accepted"; exit 1
fi
grep -q "vocab_size 100 is below" "$tmp/err" || { echo "FAIL: unexpected error: $(cat "$tmp/err")"; exit 1; }
[ "$(wc -l < "$tmp/err")" -eq 1 ] || { echo "FAIL: error is not one line"; cat "$tmp/err"; exit 1; }
echo "ok: too small a vocabulary is a one-line error"
