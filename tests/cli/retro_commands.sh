#!/usr/bin/env bash
# RETRO from the command line: tfm train on a small cut of configs/shakespeare-retro.json writes
# the chunk database beside the weights; tfm generate retrieves from it as chunks complete
# (greedy output equal under speculative decoding, prompt lookup or a draft model, whose
# rejections roll chunks back; beam search; batched --file rows equal to one at a time); tfm eval scores with it; the server
# answers with it, twice, the second time from the prompt cache, the same text; --no-retrieval
# trains the plain decoder; a missing database and a bad retrieval block are one-line errors.
# Usage: retro_commands.sh /path/to/tfm SOURCE_DIR
set -euo pipefail
tfm="$1"
src="$2"
tmp="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'echo "FAIL: retro_commands.sh line $LINENO: $BASH_COMMAND" >&2' ERR
fail() { echo "FAIL: $*" >&2; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
export OMP_WAIT_POLICY=passive

head -c 60000 "$src/data/tinyshakespeare.txt" > "$tmp/text.txt"
"$py" - "$src/configs/shakespeare-retro.json" "$tmp" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"].update(d_model=32, n_heads=2, d_ff=64)
c["model"]["retrieval"].update(chunk_size=8, neighbour_length=16, embedding_dim=64, encoder_layers=1)
c["data"]["train"] = sys.argv[2] + "/text.txt"
c["training"].update(batch_size=8, max_steps=30)
c["eval"].update(every=30, batches=2)
c["sample"]["tokens"] = 20
json.dump(c, open(sys.argv[2] + "/retro.json", "w"))
c["model"]["retrieval"]["layers"] = [7]
json.dump(c, open(sys.argv[2] + "/bad.json", "w"))
PY
"$tfm" -t 1 train "$tmp/retro.json" --out "$tmp/m" -q > /dev/null 2>&1
[ -s "$tmp/m/retrieval_db.safetensors" ] || fail "no retrieval_db.safetensors in the model directory"

"$tfm" info "$tmp/m" 2> /dev/null | grep -q "^retrieval: *RETRO: chunks of 8, 2 neighbours of 16 tokens" || fail "tfm info shows no retrieval"
gen() { "$tfm" -t 1 generate -m "$tmp/m" --temp 0 -n 40 "$@" 2> "$tmp/gen.err"; }
plain=$(gen -p "ROMEO:")
[ "${#plain}" -gt 30 ] || fail "generate printed '$plain'"
[ "$(gen -p "ROMEO:" --lookup --draft 4)" = "$plain" ] || fail "greedy output differs under prompt-lookup drafting"
"$tfm" -t 1 generate -m "$tmp/m" -n 24 -p "ROMEO:" --beam 3 2> /dev/null | grep -q "^ROMEO:" || fail "beam search"
printf 'ROMEO:\nFirst Citizen:\nKING RICHARD III:\n' > "$tmp/prompts.txt"
"$tfm" -t 1 generate -m "$tmp/m" --temp 0 -n 24 --file "$tmp/prompts.txt" -b 3 > "$tmp/batched.jsonl" 2> /dev/null
i=0
while IFS= read -r p; do
  one=$("$tfm" -t 1 generate -m "$tmp/m" --temp 0 -n 24 -p "$p" 2> /dev/null)
  "$py" -c 'import json,sys; rows=[json.loads(l) for l in open(sys.argv[1])]; r=rows[int(sys.argv[2])]
t = r.get("text", r.get("output", ""))
assert sys.argv[3].endswith(t), (sys.argv[3], r)' "$tmp/batched.jsonl" "$i" "$one" || fail "batched row $i differs from '$p' alone"
  i=$((i + 1))
done < "$tmp/prompts.txt"
"$tfm" -t 1 eval -m "$tmp/m" 2> /dev/null | grep -q "loss" || fail "tfm eval printed no loss"

# The server: the same completion twice (the second reuses the prompt cache's blocks).
"$tfm" -t 1 serve -m "$tmp/m" --port 0 --prefill-chunk 8 > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "listening" "$tmp/serve.log" && break; sleep 0.1; done
port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$tmp/serve.log" | head -1)
[ -n "$port" ] || fail "the server did not start: $(cat "$tmp/serve.log")"
prompt=$(head -c 300 "$tmp/text.txt" | tail -c 36)  # 36 + 16 tokens in the context of 64
ask() {
  "$py" -c 'import json,sys,urllib.request
body = json.dumps({"prompt": sys.argv[2], "max_tokens": 16, "temperature": 0}).encode()
r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], body, {"Content-Type": "application/json"}))
out = json.load(r); print(json.dumps([out["choices"][0]["text"], out["usage"].get("prompt_tokens_details", {}).get("cached_tokens", 0)]))' \
    "http://127.0.0.1:$port/v1/completions" "$prompt"
}
first=$(ask)
second=$(ask)
"$py" -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2])
assert a[0] == b[0] and len(a[0]) > 0, (a, b)
assert b[1] > 0, ("the second request reused no cached tokens", b)' "$first" "$second" || fail "server answers $first / $second"
kill "$server"
wait "$server" 2>/dev/null || true
server=""

# A quantized copy keeps the database and reads the same neighbours (q8_0: near the f32 output).
"$tfm" quantize -m "$tmp/m" -o "$tmp/q8" --type q8_0 > /dev/null
cmp -s "$tmp/m/retrieval_db.safetensors" "$tmp/q8/retrieval_db.safetensors" || fail "quantize did not copy the chunk database"
"$tfm" -t 1 generate -m "$tmp/q8" --temp 0 -n 8 -p "ROMEO:" > /dev/null 2>&1 || fail "the q8_0 copy does not generate"
if err=$("$tfm" quantize -m "$tmp/m" -o "$tmp/m.gguf" --type q8_0 2>&1); then fail "a RETRO model went into a GGUF file"; fi
grep -q "no place for its chunk database" <<< "$err" || fail "gguf: '$err'"

"$tfm" -t 1 train "$tmp/retro.json" --no-retrieval --max-steps 2 --out "$tmp/plain" -q > /dev/null 2>&1
grep -q '"retrieval"' "$tmp/plain/config.json" && fail "--no-retrieval kept the retrieval block"
[ -e "$tmp/plain/retrieval_db.safetensors" ] && fail "--no-retrieval wrote a chunk database"
# The plain model drafts for the RETRO one: greedy output unchanged (rejected drafts roll back).
[ "$(gen -p "ROMEO:" --draft-model "$tmp/plain" --draft 4)" = "$plain" ] || fail "greedy output differs with a draft model"

mv "$tmp/m/retrieval_db.safetensors" "$tmp/db.bak"
if gen -p "ROMEO: a longer prompt" > /dev/null; then fail "generate without the database succeeded"; fi
err=$(cat "$tmp/gen.err")
[ "$(grep -c "error" <<< "$err")" -eq 1 ] && grep -q "retrieval_db.safetensors is missing" <<< "$err" || fail "missing database: '$err'"
if err=$("$tfm" train "$tmp/bad.json" --out "$tmp/bad" 2>&1); then fail "a bad retrieval block trained"; fi
grep -q "retrieval.layers names layer 7" <<< "$err" || fail "bad block: '$err'"
echo "retro_commands: ok"
