#!/usr/bin/env bash
# tfm chat-template: a model directory's template and tokens, the ChatML default for a model
# without one, a template's raise_exception as a one-line error with a non-zero exit.
# (Byte-exact rendering is tests/chat_template_parity's job.)
#   usage: chat_template.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
printf '[{"role": "user", "content": "Hi"}]' > "$DIR/chat.json"
mkdir "$DIR/model" "$DIR/plain"
printf '{"chat_template": "{{ bos_token }}{%% for m in messages %%}[{{ m.role }}] {{ m.content }}{{ eos_token }}{%% endfor %%}", "bos_token": "<s>", "eos_token": {"content": "</s>"}}' \
  > "$DIR/model/tokenizer_config.json"
out=$("$TFM" chat-template --model "$DIR/model" --messages "$DIR/chat.json")
[ "$out" = "<s>[user] Hi</s>" ] || { echo "FAIL: model template gave: $out"; exit 1; }
"$TFM" chat-template --model "$DIR/plain" --messages "$DIR/chat.json" --add-generation-prompt > "$DIR/chatml.txt" 2> "$DIR/note.txt"
printf '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n' > "$DIR/expected.txt"
cmp -s "$DIR/chatml.txt" "$DIR/expected.txt" || { echo "FAIL: ChatML default"; cat "$DIR/chatml.txt"; exit 1; }
grep -q "using ChatML" "$DIR/note.txt" || { echo "FAIL: no note about the ChatML default"; exit 1; }
printf '[{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]' > "$DIR/sys.json"
if "$TFM" chat-template --template "$SRC/data/chat_templates/gemma-it.jinja" --messages "$DIR/sys.json" 2> "$DIR/err.txt"; then
  echo "FAIL: Gemma accepted a system message"; exit 1
fi
[ "$(cat "$DIR/err.txt")" = "tfm: error: [chat template] raise_exception: System role not supported" ] ||
  { echo "FAIL: error was: $(cat "$DIR/err.txt")"; exit 1; }
echo "chat-template CLI: ok"
