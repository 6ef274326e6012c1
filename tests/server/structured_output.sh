#!/bin/bash
# Structured output and the prompt cache end to end, on the loopback address only: a model with GPT-2's 50,257-token
# vocabulary that has learnt nothing (one training step) is served, and
# tests/server/structured_output.js asks it, through the official `openai` npm client, for JSON
# under many schemas and seeds; every answer must parse and pass ajv (an independent JSON
# Schema validator, pinned in tools/reference/openai). The CLI's --json-schema and --grammar
# are checked on the same model. Then tests/server/prompt_cache.js: a long shared system prompt
# comes from the cache (cached_tokens) and answers equal a server's without one (--cache-ram 0);
# the cache saved to a file, erased and restored (/slots), and file names that try to escape
# the directory refused. Then tests/server/speculative.js: servers that draft by prompt lookup
# and with a draft model (the model itself at q8_0) answer greedy requests as one that drafts
# nothing.
#   usage: structured_output.sh TFM SOURCE_DIR NODE
set -euo pipefail
TFM=$1 SRC=$2 NODE=${3:-node}
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'echo "FAIL: structured_output.sh line $LINENO: $BASH_COMMAND"' ERR
cat > "$DIR/g2.json" <<JSON
{ "task": "lm", "seed": 1,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64,
             "max_positions": 1024, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 },
  "tokenizer": { "path": "$SRC/data/gpt2-tokenizer" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 2, "max_steps": 1 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
"$TFM" -t 1 train "$DIR/g2.json" --out "$DIR/g2" -q > /dev/null

# The CLI: a schema and a grammar, several seeds; the output must parse / match.
cat > "$DIR/schema.json" <<'JSON'
{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "n": {"type": "integer"},
 "ok": {"type": "boolean"}}, "required": ["name", "n"], "additionalProperties": false}
JSON
printf 'root ::= "yes" | "no" | "maybe" [0-9]{2}\n' > "$DIR/answer.gbnf"
for seed in 1 2 3 4; do
  out=$("$TFM" -t 1 generate -m "$DIR/g2" -p "Hello" -n 60 --seed $seed --no-display-prompt --json-schema "$DIR/schema.json" 2> /dev/null)
  /usr/bin/python3 -c 'import json, sys
v = json.loads(sys.argv[1])
assert isinstance(v["name"], str) and len(v["name"]) <= 12 and isinstance(v["n"], int), v
assert set(v) <= {"name", "n", "ok"}, v' "$out" || { echo "FAIL: tfm generate --json-schema (seed $seed): $out"; exit 1; }
  out=$("$TFM" -t 1 generate -m "$DIR/g2" -p "Hello" -n 10 --seed $seed --no-display-prompt --grammar "$DIR/answer.gbnf" 2> /dev/null)
  [[ "$out" =~ ^(yes|no|maybe[0-9][0-9])$ ]] || { echo "FAIL: tfm generate --grammar (seed $seed): '$out'"; exit 1; }
done
# A bad grammar or schema fails before the model loads, naming the file and the place.
printf 'root ::= "a" | undefined-rule\n' > "$DIR/bad.gbnf"
if "$TFM" generate -m "$DIR/g2" -p x --grammar "$DIR/bad.gbnf" 2> "$DIR/err"; then echo "FAIL: a bad grammar was accepted"; exit 1; fi
grep -q "bad.gbnf.*undefined-rule" "$DIR/err" || { echo "FAIL: bad grammar message: $(cat "$DIR/err")"; exit 1; }
printf '{"type": "integer", "minimum": 3}' > "$DIR/bad.json"
if "$TFM" generate -m "$DIR/g2" -p x --json-schema "$DIR/bad.json" 2> "$DIR/err"; then echo "FAIL: minimum was accepted"; exit 1; fi
grep -q "unsupported keyword 'minimum'" "$DIR/err" || { echo "FAIL: bad schema message: $(cat "$DIR/err")"; exit 1; }
echo "cli: --json-schema and --grammar outputs parse (4 seeds each); bad ones refused"

source "$SRC/tests/server/start_server.sh"
mkdir "$DIR/slots"
start main g2 --parallel 2 --ctx-size 1024 --prefill-chunk 64 --slot-save-path "$DIR/slots"
MAIN=$PORT
start plain g2 --parallel 2 --ctx-size 1024 --prefill-chunk 64 --cache-ram 0
PLAIN=$PORT
start lookup g2 --parallel 2 --ctx-size 1024 --prefill-chunk 64 --lookup --draft 6
LOOKUP=$PORT
start draft g2 --parallel 2 --ctx-size 1024 --prefill-chunk 64 --draft-model "$DIR/g2" --draft-dtype q8_0
"$NODE" "$SRC/tests/server/speculative.js" "http://127.0.0.1:$LOOKUP" "http://127.0.0.1:$PORT" "http://127.0.0.1:$PLAIN" \
  "$SRC/tools/reference/openai"
PORT=$PLAIN
"$NODE" "$SRC/tests/server/structured_output.js" "http://127.0.0.1:$MAIN" "$SRC/tools/reference/openai"
"$NODE" "$SRC/tests/server/prompt_cache.js" "http://127.0.0.1:$MAIN" "http://127.0.0.1:$PORT" "$SRC/tools/reference/openai" "$DIR/slots"
