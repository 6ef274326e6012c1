#!/bin/bash
# tfm serve end to end, on the loopback address only: trains a tiny character model (a few
# seconds), starts two servers on free ports and runs tests/server/openai_client.js against
# them with the official `openai` npm client (pinned in tools/reference/openai): the API,
# the errors, continuous batching (32 clients x 8 requests at --parallel 4, each output equal
# to the same request sent alone), 503 on a full queue, a disconnect freeing its slot, bad
# input. Then SIGTERM: a clean exit, and the API key never in the access log.
#   usage: serve_test.sh TFM SOURCE_DIR NODE
set -euo pipefail
TFM=$1 SRC=$2 NODE=${3:-node}
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'echo "FAIL: serve_test.sh line $LINENO: $BASH_COMMAND"' ERR
cat > "$DIR/tiny.json" <<JSON
{ "task": "lm", "seed": 1,
  "model": { "architecture": "decoder_only", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64,
             "max_positions": 1024, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0 },
  "tokenizer": { "kind": "char" },
  "data": { "train": "$SRC/data/tinyshakespeare.txt", "val_fraction": 0.1, "block_size": 32 },
  "training": { "batch_size": 4, "max_steps": 30 },
  "eval": { "every": 1000, "batches": 1 } }
JSON
"$TFM" -t 1 train "$DIR/tiny.json" --out "$DIR/tiny" -q > /dev/null
# A wider model (~1 ms a token) for the queue and disconnect checks, so that a long request is
# still decoding while the test acts on it; two training steps (its text does not matter).
sed -e 's/"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64/"d_model": 256, "n_heads": 4, "n_layers": 4, "d_ff": 1024/' \
    -e 's/"max_steps": 30/"max_steps": 2/' "$DIR/tiny.json" > "$DIR/wide.json"
"$TFM" -t 1 train "$DIR/wide.json" --out "$DIR/wide" -q > /dev/null
# The CLI's own path, for the server to match: same prompt, seed and sampling settings.
"$TFM" -t 1 generate -m "$DIR/tiny" -p "ROMEO:" -n 24 --seed 7 --temp 1 --top-k 0 --top-p 1 --min-p 0 \
  --no-display-prompt 2> /dev/null | head -c -1 > "$DIR/expected.txt"

# The model's own chat template (tokenizer_config.json) renders chat prompts.
printf '{"chat_template": "{%% for m in messages %%}{{ m.role }}: {{ m.content }} | {%% endfor %%}assistant:"}' \
  > "$DIR/tiny/tokenizer_config.json"
KEY="sk-test-$RANDOM$RANDOM"
source "$SRC/tests/server/start_server.sh"
printf "%s\n" "$KEY" > "$DIR/key.txt"
start main tiny --parallel 4 --queue 64 --ctx-size 1024 --prefill-chunk 16 --api-key-file "$DIR/key.txt" --max-body-bytes 65536
MAIN_PID=${PIDS[-1]} MAIN_PORT=$PORT
start small wide --parallel 1 --queue 1 --ctx-size 1024 --idle-timeout 1
SMALL_PORT=$PORT

"$NODE" "$SRC/tests/server/openai_client.js" "http://127.0.0.1:$MAIN_PORT" "http://127.0.0.1:$SMALL_PORT" "$KEY" \
  "$DIR/expected.txt" "$SRC/tools/reference/openai"

# Encoder-decoder and classifier models: completions translate (greedy and beam 3) exactly as
# `tfm translate`; /v1/classify gives `tfm classify`'s labels and probabilities; chat on them
# is a 400. Tiny models, a few training steps (their outputs only have to match the CLI's).
head -300 "$SRC/data/cmn-eng.tsv" | sed '1s/^\xEF\xBB\xBF//' | cut -f1,2 > "$DIR/pairs.tsv"
cat > "$DIR/s2s.json" <<JSON
{"task": "seq2seq", "seed": 1, "model": {"model_type": "transformer", "architecture": "encoder_decoder",
  "position": "sinusoidal", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_positions": 48,
  "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "char"},
 "data": {"train": "$DIR/pairs.tsv", "test_size": 20, "max_length": 48},
 "training": {"batch_size": 16}, "eval": {"every": 1000, "bleu_examples": 4}}
JSON
"$TFM" -t 1 train "$DIR/s2s.json" --max-steps 40 -q --out "$DIR/s2s" > /dev/null 2>&1
head -400 "$SRC/data/sms-spam.tsv" > "$DIR/sms.tsv"
cat > "$DIR/cls.json" <<JSON
{"task": "classifier", "seed": 1, "model": {"model_type": "transformer", "architecture": "encoder_only",
  "head": "classifier", "pooling": "first", "d_model": 32, "n_heads": 2, "n_layers": 1, "d_ff": 64,
  "max_positions": 64, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "bpe", "vocab_size": 400},
 "data": {"train": "$DIR/sms.tsv", "header": true, "test_fraction": 0.1, "max_length": 64, "positive_label": "spam"},
 "training": {"batch_size": 16}, "eval": {"every": 1000}}
JSON
"$TFM" -t 1 train "$DIR/cls.json" --max-steps 20 -q --out "$DIR/cls" > /dev/null 2>&1
start s2s s2s
S2S_PORT=$PORT
start cls cls --cors http://playground.test
CLS_PORT=$PORT
post() { curl -s "http://127.0.0.1:$1$2" -H 'Content-Type: application/json' -d "$3"; }
printf 'I like tea.\nWhere is the station?\nHe runs fast.\n' > "$DIR/sources.txt"
for beam in 1 3; do
  "$TFM" -t 1 translate -m "$DIR/s2s" --beam "$beam" < "$DIR/sources.txt" > "$DIR/cli_tr$beam.txt" 2> /dev/null
  while IFS= read -r line; do
    post "$S2S_PORT" /v1/completions "$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "num_beams": int(sys.argv[2]), "max_tokens": 64}))' "$line" "$beam")" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["choices"][0]["text"])'
  done < "$DIR/sources.txt" > "$DIR/srv_tr$beam.txt"
  grep -q . "$DIR/cli_tr$beam.txt" || { echo "FAIL: the test model translates nothing (beam $beam)"; exit 1; }
  cmp -s "$DIR/cli_tr$beam.txt" "$DIR/srv_tr$beam.txt" ||
    { echo "FAIL: beam $beam translations differ"; diff "$DIR/cli_tr$beam.txt" "$DIR/srv_tr$beam.txt"; exit 1; }
done
post "$S2S_PORT" /v1/chat/completions '{"messages": [{"role": "user", "content": "hi"}]}' | grep -c '"model_not_supported"' >/dev/null ||
  { echo "FAIL: chat on a translation model"; exit 1; }
printf 'WINNER you won a free prize call now\nsee you at lunch\nURGENT reply to claim\n' > "$DIR/sms.txt"
"$TFM" -t 1 classify -m "$DIR/cls" < "$DIR/sms.txt" > "$DIR/cli_cls.txt" 2> /dev/null
post "$CLS_PORT" /v1/classify '{"input": ["WINNER you won a free prize call now", "see you at lunch", "URGENT reply to claim"]}' |
  python3 -c 'import json,sys; [print("%s\t%.4f" % (d["label"], d["probability"])) for d in json.load(sys.stdin)["data"]]' > "$DIR/srv_cls.txt"
cmp -s "$DIR/cli_cls.txt" "$DIR/srv_cls.txt" || { echo "FAIL: classify differs"; diff "$DIR/cli_cls.txt" "$DIR/srv_cls.txt"; exit 1; }
post "$CLS_PORT" /v1/completions '{"prompt": "hi"}' | grep -c '"model_not_supported"' >/dev/null || { echo "FAIL: completion on a classifier"; exit 1; }
echo "translate (greedy, beam 3) and classify == the CLI's"

# An image classifier (a tiny ViT on a folder of three picture classes): /v1/classify and
# /v1/embeddings take images as data: URLs (and OpenAI's image_url objects) and answer what
# tfm classify / tfm embed --image print; "rollout": true adds the attention over the patches;
# a remote URL, bad base64, a broken picture or text are 400s naming the input, and the server
# goes on serving.
/usr/bin/python3 "$SRC/tests/support/make_pictures.py" "$DIR/pictures" 30
cat > "$DIR/vit.json" <<JSON
{"task": "image_classifier", "seed": 1, "model": {"model_type": "vit", "image_size": 12, "patch_size": 4,
  "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 32},
 "data": {"train": "$DIR/pictures", "test_fraction": 0.2},
 "training": {"batch_size": 16, "max_steps": 30}, "optimizer": {"lr": 0.01}, "eval": {"every": 1000}}
JSON
"$TFM" -t 1 train "$DIR/vit.json" -q --out "$DIR/vit" > /dev/null 2>&1
start vit vit
VIT_PORT=$PORT
PICS=("$DIR/pictures/top/00.png" "$DIR/pictures/left/01.png" "$DIR/pictures/diagonal/02.png")
"$TFM" -t 1 classify -m "$DIR/vit" --image "${PICS[@]}" | cut -f2,4 > "$DIR/cli_img.txt"
"$TFM" -t 1 embed -m "$DIR/vit" --image "${PICS[@]}" > "$DIR/cli_emb.jsonl"
/usr/bin/python3 - "$VIT_PORT" "$DIR" "${PICS[@]}" <<'PY' || { echo "FAIL: images over the server"; exit 1; }
import base64, json, sys, urllib.request, urllib.error
port, d, pics = sys.argv[1], sys.argv[2], sys.argv[3:]
def post(path, body):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)
urls = ["data:image/png;base64," + base64.b64encode(open(p, "rb").read()).decode() for p in pics]
code, out = post("/v1/classify", {"input": [urls[0], {"type": "image_url", "image_url": {"url": urls[1]}}, urls[2]]})
assert code == 200, out
got = "".join("%s\t%.4f\n" % (r["label"], r["probability"]) for r in out["data"])
want = open(d + "/cli_img.txt").read()
assert got == want, (got, want)
assert out["usage"]["prompt_tokens"] == 3 * 10, out["usage"]
code, out = post("/v1/classify", {"input": urls[2], "rollout": True})
r = out["data"][0]["rollout"]
assert code == 200 and r["grid"] == 3 and len(r["values"]) == 9 and all(v > 0 for v in r["values"]), out
code, out = post("/v1/embeddings", {"input": urls})
cli = [json.loads(l)["embedding"] for l in open(d + "/cli_emb.jsonl")]
assert code == 200 and len(out["data"]) == 3, out
for a, b in zip(out["data"], cli):
    assert max(abs(x - y) for x, y in zip(a["embedding"], b)) < 1e-4, (a["embedding"][:4], b[:4])
for bad, words in ((["https://example.com/cat.png"], "remote URLs are not fetched"),
                   (["data:image/png;base64,@@@@"], "input[0]"),
                   ([urls[0], "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\nbroken").decode()], "input[1]"),
                   (["just some text"], "data: URLs"),
                   ([{"type": "image_url"}], "image_url")):
    code, out = post("/v1/classify", {"input": bad})
    assert code == 400 and words in out["error"]["message"], (bad, code, out)
code, out = post("/v1/classify", {"input": ["hello"], "rollout": "yes"})
assert code == 400, out
code, out = post("/v1/classify", {"input": urls[:1]})
assert code == 200, out
PY
echo "images: /v1/classify and /v1/embeddings == tfm classify/embed --image; bad images are 400s"

# generation_config.json's end ids, honoured alike by the CLI and the server (one library path,
# tfm/load.h): hub directories (tools/reference/hub_cli_fixture.py) whose generation_config lists
# a second eos id, a token of the reference's greedy continuation, stop there in tfm generate,
# /v1/completions and /v1/chat/completions (GPT-2), and in tfm translate and the server's
# translation (Marian).
/usr/bin/python3 "$SRC/tools/reference/hub_cli_fixture.py" "$DIR" > /dev/null
end_early() {  # end_early NAME TOKENIZER_EOS: adds an eos id; prints the greedy words before it
  /usr/bin/python3 - "$DIR/hub/$1" "$2" <<'PY'
import json, os, struct, sys
d, eos = sys.argv[1], int(sys.argv[2])
b = open(d + ".ref.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
lo, hi = json.loads(b[8:8 + n])["greedy"]["data_offsets"]
ids = list(struct.unpack(f"<{(hi - lo) // 8}q", b[8 + n + lo:8 + n + hi]))
# the first new id after the first token (a continuation that repeats one token ends at once)
k = next((k for k in range(1, len(ids)) if ids[k] not in ids[:k] and ids[k] != eos), 0)
path = os.path.join(d, "generation_config.json")
gen = json.load(open(path)) if os.path.exists(path) else {}
gen["eos_token_id"] = [eos, ids[k]]
json.dump(gen, open(path, "w"))
print(" ".join(f"w{i}" for i in ids[:k]))
PY
}
GPT2_PROMPT="w3 w17 w5 w9 w30 w2 w11 w7" MARIAN_SRC="w5 w19 w7 w26 w11"
want_gpt2=$(end_early gpt2 40)
want_marian=$(end_early marian 0)
printf '{"chat_template": "{%% for m in messages %%}{{ m.content }}{%% endfor %%}"}' > "$DIR/hub/gpt2/tokenizer_config.json"
got=$("$TFM" -t 1 generate -m "$DIR/hub/gpt2" -p "$GPT2_PROMPT" -n 6 --no-display-prompt -v 2> "$DIR/gen.err")
[ "$got" = "$want_gpt2" ] && grep -q "stopped: eos" "$DIR/gen.err" ||
  { echo "FAIL: tfm generate: '$got' != '$want_gpt2' (the second eos id)"; cat "$DIR/gen.err"; exit 1; }
got=$("$TFM" -t 1 translate -m "$DIR/hub/marian" --beam 1 -n 5 "$MARIAN_SRC" 2> /dev/null)
[ "$got" = "$want_marian" ] || { echo "FAIL: tfm translate: '$got' != '$want_marian' (the second eos id)"; exit 1; }
start eos hub/gpt2
EOS_PORT=$PORT
start marian hub/marian
field() { python3 -c 'import json,sys; c=json.load(sys.stdin)["choices"][0]; print(c.get("text", c.get("message", {}).get("content")), c["finish_reason"], sep="\t")'; }
got=$(post "$EOS_PORT" /v1/completions "{\"prompt\": \"$GPT2_PROMPT\", \"max_tokens\": 6}" | field)
[ "$got" = "$(printf '%s\tstop' "$want_gpt2")" ] || { echo "FAIL: /v1/completions: '$got' != '$want_gpt2' stop"; exit 1; }
got=$(post "$EOS_PORT" /v1/chat/completions "{\"messages\": [{\"role\": \"user\", \"content\": \"$GPT2_PROMPT\"}], \"max_tokens\": 6}" | field)
[ "$got" = "$(printf '%s\tstop' "$want_gpt2")" ] || { echo "FAIL: /v1/chat/completions: '$got' != '$want_gpt2' stop"; exit 1; }
got=$(post "$PORT" /v1/completions "{\"prompt\": \"$MARIAN_SRC\", \"num_beams\": 1, \"max_tokens\": 5}" | field)
[ "$got" = "$(printf '%s\tstop' "$want_marian")" ] || { echo "FAIL: server translation: '$got' != '$want_marian' stop"; exit 1; }
echo "generation_config end ids: generate, completions, chat, translate (CLI and server) stop there"

# Every request key the generation endpoints list is honoured or refused with a 400 naming it.
"$NODE" "$SRC/tests/server/request_keys.js" "$SRC/tools/server/routes.h" "http://127.0.0.1:$MAIN_PORT" "$KEY" \
  "http://127.0.0.1:$S2S_PORT" "http://127.0.0.1:$EOS_PORT"
# CORS: off by default; with --cors ORIGIN, that origin and a preflight answer.
if curl -si "http://127.0.0.1:$MAIN_PORT/health" | grep -ci '^access-control' >/dev/null; then echo "FAIL: CORS headers without --cors"; exit 1; fi
curl -si "http://127.0.0.1:$CLS_PORT/health" | grep -ci '^access-control-allow-origin: http://playground.test' >/dev/null ||
  { echo "FAIL: no CORS header with --cors"; exit 1; }
curl -si -X OPTIONS "http://127.0.0.1:$CLS_PORT/v1/classify" -H 'Origin: http://playground.test' \
  -H 'Access-Control-Request-Method: POST' | grep -c '^HTTP/1.1 204' >/dev/null || { echo "FAIL: preflight"; exit 1; }

# Hostile clients (issue 31): a number beyond a double's range is a 400 (was a 500), a known path
# asked with another method a 405 with Allow (was a 404), an unknown method adds no duration to
# the request histogram (it added the machine's uptime), and Nagle is off (each keep-alive
# request after the first waited ~40 ms for the client's delayed ACK): the fastest of ten
# keep-alive /health requests takes well under that.
code=$(curl -s -o "$DIR/big.json" -w '%{http_code}' -H "Authorization: Bearer $KEY" "http://127.0.0.1:$MAIN_PORT/v1/completions" \
  -H 'Content-Type: application/json' -d '{"prompt": "A", "max_tokens": 1, "temperature": 1e400}')
[ "$code" = 400 ] && grep -q 'number overflow' "$DIR/big.json" || { echo "FAIL: temperature 1e400 answered $code: $(cat "$DIR/big.json")"; exit 1; }
curl -si -H "Authorization: Bearer $KEY" "http://127.0.0.1:$MAIN_PORT/v1/completions" > "$DIR/405.txt"
grep -q '^HTTP/1.1 405' "$DIR/405.txt" && grep -qi '^allow: POST' "$DIR/405.txt" && grep -q '"method_not_allowed"' "$DIR/405.txt" ||
  { echo "FAIL: GET /v1/completions:"; head -12 "$DIR/405.txt"; exit 1; }
curl -si -X DELETE "http://127.0.0.1:$MAIN_PORT/health" | grep -q '^HTTP/1.1 405' || { echo "FAIL: DELETE /health is no 405"; exit 1; }
/usr/bin/python3 - "$MAIN_PORT" "$KEY" <<'PY' || { echo "FAIL: hostile-client checks (above)"; exit 1; }
import http.client, socket, sys, time
port, key = int(sys.argv[1]), sys.argv[2]
def duration_sum():
    c = http.client.HTTPConnection("127.0.0.1", port); c.request("GET", "/metrics", headers={"Authorization": "Bearer " + key})
    body = c.getresponse().read().decode(); c.close()
    return float(next(l.split()[1] for l in body.splitlines() if l.startswith("tfm_request_duration_seconds_sum")))
before = duration_sum()
s = socket.create_connection(("127.0.0.1", port)); s.sendall(b"FOO /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
status = s.recv(64).split(b"\r\n")[0]; s.close()
time.sleep(0.2)
after = duration_sum()
assert status.startswith(b"HTTP/1.1 4"), status
assert after - before < 5, ("an unknown method added", after - before, "s to the request durations")
c = http.client.HTTPConnection("127.0.0.1", port)
times = []
for _ in range(10):
    t0 = time.perf_counter(); c.request("GET", "/health"); r = c.getresponse(); r.read(); times.append(time.perf_counter() - t0)
    assert r.status == 200 and r.getheader("Connection", "").lower() != "close", r.status
assert min(times[1:]) < 0.02, ("keep-alive requests took", [round(t * 1e3, 1) for t in times], "ms: Nagle's delay?")
PY
# Bodies are bounded whatever their encoding (--max-body-bytes 65536 here): a 2 MB chunked body
# and a 50 KB gzip body that inflates to 50 MB are 413s (with the key: without one the request
# is a 401 before its body is read), the bomb on /health (no key needed) a 405; a body sent
# where no POST route is is not read; the server's peak memory stays small; it goes on serving.
/usr/bin/python3 - "$MAIN_PORT" "$MAIN_PID" "$KEY" <<'PY' || { echo "FAIL: bounded bodies (above)"; exit 1; }
import gzip, socket, sys
port, pid, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def status(head, body):
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(30)
    s.sendall(head)
    try:
        for piece in body: s.sendall(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server closed the connection after answering
    line = s.recv(200).split(b"\r\n")[0].decode(); s.close()
    return line
chunk = b"x" * 65536
chunked = [b"%x\r\n" % len(chunk) + chunk + b"\r\n" for _ in range(32)] + [b"0\r\n\r\n"]
bomb = gzip.compress(b" " * (50 << 20))
cases = [("POST /v1/completions", "Transfer-Encoding: chunked", chunked, "413"),
         ("POST /v1/completions", "Content-Encoding: gzip\r\nContent-Length: %d" % len(bomb), [bomb], "413"),
         ("POST /health", "Content-Encoding: gzip\r\nContent-Length: %d" % len(bomb), [bomb], "405"),
         ("POST /nowhere", "Transfer-Encoding: chunked", chunked, "404")]
for line, headers, body, want in cases:
    got = status(("%s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n%s\r\n\r\n"
                  % (line, key, headers)).encode(), body)
    assert got.startswith("HTTP/1.1 " + want), (line, headers[:40], got)
peak = next(int(l.split()[1]) for l in open("/proc/%s/status" % pid) if l.startswith("VmHWM"))
assert peak < 400 * 1024, ("peak RSS %d KiB after the large bodies" % peak)
PY
curl -s "http://127.0.0.1:$MAIN_PORT/health" | grep -q '"ok"' || { echo "FAIL: no answer after the large bodies"; exit 1; }
echo "hostile clients: 1e400 is a 400, wrong methods 405, unknown methods add no duration, no Nagle delay, bodies bounded"

# Crowding clients (issue 31's probes, bounded): 100 connections sending their headers a byte at a
# time and 200 idle ones do not delay /health past 1 s (a thread per connection), and the slow
# ones are closed at the header deadline (2 s here); a fourth connection from an address holding
# --max-client-connections 3 gets a 503 at once; eight 256-input embeddings requests do not
# stall a running stream (their inputs run 16 at a time between decode steps).
start crowd wide --parallel 2 --ctx-size 1024 --header-timeout 2 --max-client-connections 400
CROWD_PORT=$PORT
start few tiny --max-client-connections 3
/usr/bin/python3 - "$CROWD_PORT" "$PORT" <<'PY' || { echo "FAIL: crowding clients (above)"; exit 1; }
import http.client, json, socket, sys, threading, time
crowd, few = int(sys.argv[1]), int(sys.argv[2])
def health_ms(port):
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30); c.request("GET", "/health"); r = c.getresponse(); r.read(); c.close()
    assert r.status == 200, r.status
    return (time.perf_counter() - t0) * 1e3
slow = [socket.create_connection(("127.0.0.1", crowd)) for _ in range(100)]
idle = [socket.create_connection(("127.0.0.1", crowd)) for _ in range(200)]
for s in slow: s.sendall(b"GET /health HTTP/1.1\r\n")
closed_at = {}
def dribble():
    t0 = time.monotonic()
    while time.monotonic() - t0 < 6:
        for i, s in enumerate(slow):
            if i in closed_at: continue
            try:
                s.sendall(b"X")
            except OSError:
                closed_at[i] = time.monotonic() - t0
        time.sleep(0.25)
t = threading.Thread(target=dribble); t.start()
time.sleep(0.5)
lat = [health_ms(crowd) for _ in range(5)]
assert max(lat) < 1000, ("/health took", [round(x) for x in lat], "ms beside 100 slow and 200 idle connections")
t.join()
assert len(closed_at) == 100 and max(closed_at.values()) < 3.5, ("slow connections not closed at the header deadline", len(closed_at), closed_at and max(closed_at.values()))
for s in slow + idle: s.close()
# the per-address limit
held = [socket.create_connection(("127.0.0.1", few)) for _ in range(3)]
time.sleep(0.3)
s = socket.create_connection(("127.0.0.1", few)); s.settimeout(5)
reply = s.recv(400).decode(); s.close()
assert reply.startswith("HTTP/1.1 503") and "too_many_connections" in reply, reply
for h in held: h.close()
time.sleep(0.3)
assert health_ms(few) < 1000
# embeddings beside a stream: the largest gap between tokens
gaps, stop = [], threading.Event()
def stream():
    c = http.client.HTTPConnection("127.0.0.1", crowd, timeout=120)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": "ROMEO:", "max_tokens": 400, "ignore_eos": True, "stream": True}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); last = time.perf_counter()
    for line in r:
        if line.startswith(b"data: {"):
            now = time.perf_counter(); gaps.append(now - last); last = now
    stop.set()
st = threading.Thread(target=stream); st.start()
time.sleep(0.5)
def embed():
    c = http.client.HTTPConnection("127.0.0.1", crowd, timeout=120)
    c.request("POST", "/v1/embeddings", body=json.dumps({"input": ["the quick brown fox %d" % i for i in range(256)]}),
              headers={"Content-Type": "application/json"})
    r = c.getresponse(); body = r.read()
    assert r.status in (200, 503), (r.status, body[:200])
jobs = [threading.Thread(target=embed) for _ in range(8)]
t0 = time.perf_counter()
for j in jobs: j.start()
for j in jobs: j.join()
took = time.perf_counter() - t0
st.join()
steady = sorted(gaps[1:])[len(gaps) // 2]
assert max(gaps[1:]) < max(1.0, 0.25 * took), ("a stream stalled", round(max(gaps[1:]), 3), "s beside embeddings that took", round(took, 2), "s; median gap", round(steady, 4))
print("crowding: /health %.0f ms max beside 300 connections; slow ones closed by %.1f s; the 4th connection 503; stream's largest gap %.0f ms while embeddings took %.1f s"
      % (max(lat), max(closed_at.values()), max(gaps[1:]) * 1e3, took))
PY

# --timeout: a request still running when its time is up gets 408 and an OpenAI error (answered
# whole) or an error event that ends the stream, its slot is freed, and the server goes on
# serving. The model is wide enough (~5 ms a token) that 1,000 tokens take far longer than 1 s.
sed -e 's/"d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64/"d_model": 512, "n_heads": 8, "n_layers": 8, "d_ff": 2048/' \
    -e 's/"max_steps": 30/"max_steps": 1/' "$DIR/tiny.json" > "$DIR/slow.json"
"$TFM" -t 1 train "$DIR/slow.json" --out "$DIR/slow" -q > /dev/null
start slow slow --parallel 2 --ctx-size 1024 --timeout 1
LONG='"prompt": "ROMEO:", "max_tokens": 1000, "ignore_eos": true'
code=$(curl -s -o "$DIR/timeout.json" -w '%{http_code}' "http://127.0.0.1:$PORT/v1/completions" -d "{$LONG}")
[ "$code" = 408 ] && grep -q '"code":"request_timeout"' "$DIR/timeout.json" ||
  { echo "FAIL: --timeout answered $code: $(cat "$DIR/timeout.json")"; exit 1; }
curl -sN "http://127.0.0.1:$PORT/v1/completions" -d "{$LONG, \"stream\": true}" > "$DIR/timeout.sse"
grep -q '"code":"request_timeout"' "$DIR/timeout.sse" || { echo "FAIL: a stream past --timeout"; tail -c 300 "$DIR/timeout.sse"; exit 1; }
post "$PORT" /v1/completions '{"prompt": "A", "max_tokens": 2}' | grep -c '"text_completion"' >/dev/null ||
  { echo "FAIL: no answer after the timeouts"; exit 1; }
curl -s "http://127.0.0.1:$PORT/metrics" | grep -c '^tfm_slots_busy 0$' >/dev/null || { echo "FAIL: a timed-out request kept its slot"; exit 1; }
echo "--timeout: 408, a final error event, the slots freed"

# SIGTERM: the server stops cleanly (exit 0); the access log has request ids and no key.
kill -TERM "$MAIN_PID"
wait "$MAIN_PID" || { echo "FAIL: server exited with $? after SIGTERM"; cat "$DIR/main.err"; exit 1; }
grep -q "tfm serve: stopped" "$DIR/main.err" || { echo "FAIL: no clean stop"; exit 1; }
grep -qE "req-[0-9]+ POST /v1/completions 200 prompt_tokens=[0-9]+ completion_tokens=[0-9]+" "$DIR/main.err" ||
  { echo "FAIL: no access log line"; exit 1; }
if grep -qF "$KEY" "$DIR/main.err" "$DIR/main.out"; then echo "FAIL: the API key was logged"; exit 1; fi
grep -q "user=key-walk-user" "$DIR/main.err" || { echo "FAIL: the request's user is not in the access log"; exit 1; }
echo "serve: ok ($(grep -c 'req-' "$DIR/main.err") requests logged)"
