#!/bin/bash
# Retrieval endpoints end to end on the loopback address: /v1/embeddings of a
# sentence-transformers directory (tools/reference/sentence_fixture.py) through the official
# `openai` client (base64 by default, float, dimensions, a prompt name) equal the PyTorch
# reference's vectors; /v1/rerank of a cross-encoder gives the reference's relevance scores,
# best first, with top_n and return_documents; with --retrieve, completions and chat (a template
# that reads `documents`, and one that does not) answer as `tfm generate` on the prompt with the
# passages `tfm index search` finds; bad requests are 4xx and the server keeps serving.
#   usage: retrieval.sh TFM SOURCE_DIR NODE
set -euo pipefail
TFM=$1 SRC=$2 NODE=${3:-node}
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'echo "FAIL: retrieval.sh line $LINENO: $BASH_COMMAND"' ERR
/usr/bin/python3 "$SRC/tools/reference/sentence_fixture.py" "$DIR"
# A word-level GPT-2 (hub_cli_fixture.py) and an index of short passages in its vocabulary.
/usr/bin/python3 "$SRC/tools/reference/hub_cli_fixture.py" "$DIR/fx" > /dev/null
cp -r "$DIR/fx/hub/gpt2" "$DIR/lm"
cp -r "$DIR/fx/hub/gpt2" "$DIR/lm_plain"
printf '{"chat_template": "%s"}' '{% for d in documents %}{{ d.text }} {% endfor %}{% for m in messages %}{{ m.content }} {% endfor %}' \
  > "$DIR/lm/tokenizer_config.json"
printf '{"chat_template": "%s"}' '{% for m in messages %}{{ m.content }} {% endfor %}' > "$DIR/lm_plain/tokenizer_config.json"
for i in $(seq 1 60); do echo "w$((i % 20 + 4)) w$((i % 7 + 10)) w$((i % 11 + 5)) w$((i % 5 + 20))"; done > "$DIR/small.txt"
"$TFM" -t 1 index build -q -m "$DIR/st_mean" --input "$DIR/small.txt" -o "$DIR/idx" > /dev/null
printf '%s' '{% for d in documents %}{{ d.text }} {% endfor %}{{ prompt }}' > "$DIR/rag.jinja"
Q="w5 w9 w11"
"$TFM" -t 1 generate -m "$DIR/lm" --retrieve "$DIR/idx" -k 2 --retrieve-template "$DIR/rag.jinja" -p "$Q" -n 4 --temp 0 \
  --no-display-prompt > "$DIR/expect_completion.txt" 2> /dev/null
hits=$("$TFM" -t 1 index search "$DIR/idx" -k 2 --json "$Q" | /usr/bin/python3 -c 'import json, sys; print(" ".join(json.loads(l)["text"] for l in sys.stdin))')
"$TFM" -t 1 generate -m "$DIR/lm" -p "$hits $Q" -n 4 --temp 0 --no-display-prompt > "$DIR/expect_chat.txt" 2> /dev/null
"$TFM" -t 1 generate -m "$DIR/lm" -p "$Q" -n 4 --temp 0 --no-display-prompt > "$DIR/expect_plain.txt" 2> /dev/null

source "$SRC/tests/server/start_server.sh"
start st st_mean
ST_PORT=$PORT
start cross cross
CROSS_PORT=$PORT
start rag lm --retrieve "$DIR/idx" --retrieve-k 2 --retrieve-template "$DIR/rag.jinja"
RAG_PORT=$PORT
start rag_plain lm_plain --retrieve "$DIR/idx" --retrieve-k 2 --retrieve-template "$DIR/rag.jinja"
"$NODE" "$SRC/tests/server/retrieval.js" "http://127.0.0.1:$ST_PORT" "http://127.0.0.1:$CROSS_PORT" "$SRC/tools/reference/openai" "$DIR" \
  "http://127.0.0.1:$RAG_PORT" "http://127.0.0.1:$PORT"
