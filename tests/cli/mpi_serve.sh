#!/usr/bin/env bash
# `tfm serve` with the model split over processes (tools/server/lockstep.h): a tiny Llama
# (RoPE, GQA, SwiGLU) trained here for a few steps, served by one process and, under mpirun,
# by 2 shards (--tensor-parallel 2), 2 stages (--pipeline-parallel 2) and 2 stages of 2 shards:
#  1. every server gives one process's answers: greedy and seeded sampled completions (n = 2),
#     stop strings, log-probabilities (within 1e-5: shards add their partial sums in another
#     order), a GBNF grammar in chat and completions, a streamed completion, and three
#     requests at once (continuously batched);
#  2. a client that leaves mid-stream is cancelled on every rank: the next request is answered;
#  3. the endpoints outside the batch run as model jobs on every shard (tools/server/model_jobs.h):
#     embeddings from 2 shards equal one process's (within 1e-5), and so do a tiny text
#     classifier's /v1/classify and /v1/rerank, a tiny encoder-decoder's translations, a tiny
#     ViT's image classes, embeddings and attention rollouts and a random Whisper's transcripts
#     and word timestamps, and 2 stages answer as one process too; attention maps from 2
#     shards, 2 stages and 2 x 2 are one process's;
#  3b. the prompt cache's files (/slots save, erase, restore) on 2 shards, 2 stages and 2 x 2:
#     each rank saves its part, the restored cache serves one process's answer, a missing
#     part fails the restore on every rank (400 naming the rank) and the server goes on;
#  4. SIGTERM to rank 0 stops every rank (mpirun exits 0); refused set-ups: a draft model
#     under --tensor-parallel, --tensor-parallel without mpirun.
#   usage: mpi_serve.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done; rm -rf "$DIR"' EXIT
source "$SRC/tests/cli/lib/mpi.sh"
MPI4="${MPI/-np 2/-np 4}"

train_tiny llama '{ "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128 }'
# A text classifier (also a cross-encoder for /v1/rerank) and an En->Zh encoder-decoder.
train_tiny_cls 2 60
train_tiny_s2s 60
# A ViT on generated pictures and a Whisper hub directory with random weights, and speech.
/usr/bin/python3 "$SRC/tests/support/make_pictures.py" "$DIR/pictures" 12
cat > "$DIR/vit.json" <<JSON
{ "task": "image_classifier", "seed": 3,
  "model": { "model_type": "vit", "image_size": 12, "patch_size": 4, "hidden_size": 16, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 32 },
  "data": { "train": "$DIR/pictures", "test_fraction": 0.25,
            "preprocessor": { "do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25] } },
  "training": { "batch_size": 8, "max_steps": 10 }, "eval": { "every": 10 } }
JSON
"$TFM" -t 2 train "$DIR/vit.json" --out "$DIR/vit" -q > /dev/null 2> "$DIR/vit.err" || { cat "$DIR/vit.err"; exit 1; }
(cd "$SRC/tools/reference" && /usr/bin/python3 -c "import sys; sys.path.insert(0, '.'); import ref_whisper; ref_whisper.make(sys.argv[1])" "$DIR") > /dev/null
espeak-ng -v en-us -s 150 -w "$DIR/speech22k.wav" "The quick brown fox jumps over the lazy dog."
sox "$DIR/speech22k.wav" -r 16000 "$DIR/speech.wav"

# start NAME "LAUNCHER" ARGS...: a server on a free port (its port in PORT_NAME, rank 0's pid in
# $DIR/NAME.pid.0, the launcher's in LAUNCHED_NAME)
start() {
  local name=$1 launcher=$2 port=
  shift 2
  $launcher sh -c 'echo $$ > "$0.pid.${OMPI_COMM_WORLD_RANK:-0}"; shift; exec "$@"' "$DIR/$name" - \
    "$TFM" -t 1 serve -m "${MODEL:-$DIR/llama}" --port 0 --parallel 3 "$@" > "$DIR/$name.out" 2> "$DIR/$name.err" &
  PIDS+=($!)
  eval "LAUNCHED_$name=$!"
  for _ in $(seq 300); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$DIR/$name.out" 2> /dev/null || true)
    [ -n "$port" ] && { eval "PORT_$name=$port"; return 0; }
    sleep 0.1
  done
  echo "FAIL: server $name did not start"; cat "$DIR/$name.err"; exit 1
}
mkdir "$DIR/slots-one" "$DIR/slots-tp" "$DIR/slots-pp" "$DIR/slots-tpp"
start one env --slot-save-path "$DIR/slots-one"
start tp "$MPI" --tensor-parallel 2 --slot-save-path "$DIR/slots-tp"
start pp "$MPI" --pipeline-parallel 2 --slot-save-path "$DIR/slots-pp"
start tpp "$MPI4" --tensor-parallel 2 --pipeline-parallel 2 --slot-save-path "$DIR/slots-tpp"
for m in cls s2s vit hub/whisper_en; do
  name=$(basename "$m")
  MODEL="$DIR/$m" start ${name}_one env
  MODEL="$DIR/$m" start ${name}_tp "$MPI" --tensor-parallel 2
done
for m in cls s2s vit hub/whisper_en; do  # an encoder's stages (the encoder-decoder's: both stacks split)
  MODEL="$DIR/$m" start "$(basename "$m")_pp" "$MPI" --pipeline-parallel 2
done
echo "servers: one process, 2 shards, 2 stages, 2 stages x 2 shards; a classifier, an encoder-decoder, a ViT and a Whisper on 1 and 2 shards and 2 stages"

/usr/bin/python3 - "$PORT_one" "$PORT_tp" "$PORT_pp" "$PORT_tpp" <<'PY' || { echo "FAIL: lockstep answers"; for n in tp pp tpp; do cat "$DIR/$n.err"; done; exit 1; }
import json, socket, sys, threading, urllib.error, urllib.request
ports = dict(zip(["one", "tp", "pp", "tpp"], sys.argv[1:]))
def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
def answer(port, path, body):
    status, text = post(port, path, body)
    assert status == 200, (port, path, status, text)
    if body.get("stream"):
        out = []
        for line in text.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for c in json.loads(line[6:])["choices"]:
                    out.append(c.get("text") or c.get("delta", {}).get("content") or "")
        return "".join(out)
    j = json.loads(text)
    return [(c["text"] if "text" in c else c["message"]["content"], c.get("logprobs"), c["finish_reason"]) for c in j["choices"]]
# (a character vocabulary has no braces: a grammar of its own letters constrains instead of a JSON schema)
grammar = 'root ::= ("ROMEO" | "JULIET" | "KING") ": " [a-z ]+ "."'
requests = [
    ("/v1/completions", {"prompt": "ROMEO:", "max_tokens": 40, "temperature": 0}),
    ("/v1/completions", {"prompt": "KING:", "max_tokens": 30, "temperature": 0.9, "seed": 7, "n": 2}),
    ("/v1/completions", {"prompt": "First Citizen:", "max_tokens": 40, "temperature": 0, "stop": ["\n\n"], "logprobs": 2}),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Who?"}], "max_tokens": 60, "temperature": 0.8,
                              "seed": 9, "grammar": grammar}),
    ("/v1/completions", {"prompt": "Speak:", "max_tokens": 50, "temperature": 0.8, "seed": 4, "grammar": grammar}),
    ("/v1/completions", {"prompt": "JULIET:", "max_tokens": 30, "temperature": 0, "stream": True}),
]
want = [answer(ports["one"], p, b) for p, b in requests]
import re
assert re.fullmatch(r"(ROMEO|JULIET|KING): [a-z ]+\.", want[4][0][0]), want[4]  # the grammar held
def same(got, w):  # shards add partial sums in another order than one process: logprobs within 1e-5
    if isinstance(w, str) or got == w:
        return got == w
    for (gt, gl, gf), (wt, wl, wf) in zip(got, w):
        if gt != wt or gf != wf or (gl is None) != (wl is None):
            return False
        if gl is not None:
            if gl["tokens"] != wl["tokens"] or any(abs(a - b) > 1e-5 for a, b in zip(gl["token_logprobs"], wl["token_logprobs"])):
                return False
    return len(got) == len(w)
for name in ("tp", "pp", "tpp"):
    for (p, b), w in zip(requests, want):
        got = answer(ports[name], p, b)
        assert same(got, w), (name, p, b, got, w)
    # three at once: continuously batched, each as alone
    got = [None] * 3
    def one(i):
        got[i] = answer(ports[name], *requests[i])
    ts = [threading.Thread(target=one, args=(i,)) for i in range(3)]
    for t in ts: t.start()
    for t in ts: t.join()
    assert all(same(g, w) for g, w in zip(got, want[:3])), (name, got, want[:3])
    # a client that leaves mid-stream: cancelled on every rank, and the next answer is right
    s = socket.create_connection(("127.0.0.1", int(ports[name])))
    body = json.dumps({"prompt": "HAMLET:", "max_tokens": 100, "temperature": 0, "stream": True}).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    seen = b""
    while b"data: " not in seen:  # the headers may come first
        chunk = s.recv(4096)
        assert chunk, (name, seen)
        seen += chunk
    s.close()
    assert same(answer(ports[name], *requests[0]), want[0]), name
    status, text = post(ports[name], "/v1/embeddings", {"input": ["hello", "KING: speak"], "pooling": "mean"})
    w = json.loads(post(ports["one"], "/v1/embeddings", {"input": ["hello", "KING: speak"], "pooling": "mean"})[1])
    got = json.loads(text)
    assert status == 200 and len(got["data"]) == 2, (name, status, text)
    for g, x in zip(got["data"], w["data"]):
        assert len(g["embedding"]) == 64 and max(abs(a - b) for a, b in zip(g["embedding"], x["embedding"])) < 1e-5, (g, x)
    status, text = post(ports[name], "/v1/attention", {"prompt": "hello", "layer": 7})
    assert status == 400 and "layer 7 is out of range" in text, (name, status, text)
    assert same(answer(ports[name], *requests[1]), want[1]), name
print("2 shards, 2 stages and 2 x 2 answer as one process: greedy, sampled n=2, stop + logprobs, a grammar (chat and "
      "completion), streamed, three at once; a client gone mid-stream; embeddings as one process's; a bad attention "
      "request refused (400) on every rank, serving on")
PY

# The prompt cache's files (/slots) on every split server: each rank saves its part, erase and
# restore run on every rank, the restored cache serves one process's answer; a rank's part
# missing fails the restore with a 400 naming the rank, empties every rank's cache, and the
# server goes on answering as one process.
/usr/bin/python3 - "$PORT_one" "$PORT_tp" "$PORT_pp" "$PORT_tpp" "$DIR" <<'PY' || { echo "FAIL: slot files"; for n in tp pp tpp; do cat "$DIR/$n.err"; done; exit 1; }
import json, os, sys, urllib.error, urllib.request
ports = dict(zip(["one", "tp", "pp", "tpp"], sys.argv[1:5]))
d = sys.argv[5]
def post(port, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode())
prompt = "ROMEO:\n" + "Thou art the fairest of them all, and I do love thee well. " * 2  # two 64-token blocks and more
def complete(port):
    status, j = post(port, "/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    assert status == 200, (port, j)
    return j["choices"][0]["text"], j["usage"]["prompt_tokens_details"]["cached_tokens"]
want, _ = complete(ports["one"])
for name, ranks in (("tp", 2), ("pp", 2), ("tpp", 4)):
    port = ports[name]
    assert complete(port)[0] == want, name
    status, saved = post(port, "/slots/0?action=save", {"filename": "c.bin"})
    assert status == 200 and saved["n_saved"] >= 64, (name, saved)
    files = sorted(os.listdir(f"{d}/slots-{name}"))
    assert files == ["c.bin"] + [f"c.bin.rank{r}" for r in range(1, ranks)], (name, files)
    status, erased = post(port, "/slots/0?action=erase", {})
    assert status == 200 and erased["n_erased"] > 0, (name, erased)
    assert complete(port) == (want, 0), (name, "nothing cached after erase")
    post(port, "/slots/0?action=erase", {})
    status, restored = post(port, "/slots/1?action=restore", {"filename": "c.bin"})
    assert status == 200 and restored["n_restored"] == saved["n_saved"], (name, restored)
    text, cached = complete(port)
    assert text == want and cached >= 64, (name, text, cached, "the restored blocks serve one process's answer")
    os.remove(f"{d}/slots-{name}/c.bin.rank1")
    status, err = post(port, "/slots/0?action=restore", {"filename": "c.bin"})
    msg = err["error"]["message"]
    assert status == 400 and "rank 1 of" in msg and "emptied on every rank" in msg and d not in msg, (name, status, err)
    assert complete(port) == (want, 0), (name, "after a failed restore: every rank's cache empty, the same answer")
# attention maps (every head of a layer, one head of another) as one process draws them
for q in ({"prompt": "ROMEO: good night", "layer": 0}, {"prompt": "JULIET: farewell", "layer": 1, "head": 3}):
    status, want = post(ports["one"], "/v1/attention", q)
    assert status == 200 and len(want["maps"]) == (1 if "head" in q else 4), (q, want)
    for name in ("tp", "pp", "tpp"):
        status, got = post(ports[name], "/v1/attention", q)
        assert status == 200 and [m["title"] for m in got["maps"]] == [m["title"] for m in want["maps"]], (name, got)
        for a, b in zip(got["maps"], want["maps"]):
            assert a["rows"] == b["rows"] and a["cols"] == b["cols"], (name, a, b)
            assert len(a["values"]) == len(b["values"]) and all(abs(x - y) < 1e-5 for x, y in zip(a["values"], b["values"])), (name, q)
print("attention maps from 2 shards, 2 stages and 2 x 2: one process's")
print("slot files on 2 shards, 2 stages and 2 x 2: each rank saves its part, erase and restore on every rank, the "
      "restored cache serves one process's answer; a missing part: 400 naming the rank, every cache emptied, serving on")
PY

# The model jobs on a classifier and an encoder-decoder: 2 shards answer as one process.
/usr/bin/python3 - "$PORT_cls_one" "$PORT_cls_tp" "$PORT_s2s_one" "$PORT_s2s_tp" "$PORT_vit_one" "$PORT_vit_tp" \
  "$PORT_whisper_en_one" "$PORT_whisper_en_tp" "$PORT_cls_pp" "$PORT_s2s_pp" "$PORT_vit_pp" "$PORT_whisper_en_pp" "$DIR" <<'PY' || { echo "FAIL: model jobs"; for n in cls_tp s2s_tp vit_tp whisper_en_tp cls_pp s2s_pp vit_pp whisper_en_pp; do cat "$DIR/$n.err"; done; exit 1; }
import base64, glob, json, sys, urllib.error, urllib.request
cls_one, cls_tp, s2s_one, s2s_tp, vit_one, vit_tp, wsp_one, wsp_tp, cls_pp, s2s_pp, vit_pp, wsp_pp, d = sys.argv[1:]
def request(port, path, data, headers):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data, headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
def post(port, path, body, want=200):
    status, text = request(port, path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    assert status == want, (port, path, status, text)
    return json.loads(text)
def upload(port, fields, want=200):  # multipart/form-data: (name, value or (filename, bytes))
    b = "tfmboundary"
    parts = []
    for name, v in fields:
        head = f'--{b}\r\nContent-Disposition: form-data; name="{name}"'
        if isinstance(v, tuple):
            parts.append((head + f'; filename="{v[0]}"\r\nContent-Type: audio/wav\r\n\r\n').encode() + v[1] + b"\r\n")
        else:
            parts.append((head + f"\r\n\r\n{v}\r\n").encode())
    status, text = request(port, "/v1/audio/transcriptions", b"".join(parts) + f"--{b}--\r\n".encode(),
                           {"Content-Type": f"multipart/form-data; boundary={b}"})
    assert status == want, (port, status, text)
    return text
def close(a, b, path=""):  # the same structure, numbers within 1e-5 (the shards sum in another order)
    if isinstance(a, float) or isinstance(b, float):
        assert abs(a - b) < 1e-5, (path, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), (path, a, b)
        for k in a:
            if k not in ("id", "created"): close(a[k], b[k], path + "." + k)
    elif isinstance(a, list):
        assert len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)): close(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)
texts = ["WINNER!! claim your prize now", "see you at lunch?"] + [f"call me later {i}" for i in range(18)]  # 2 pieces of 16
for path, body in [("/v1/classify", {"input": texts}),
                   ("/v1/rerank", {"query": "free prize", "documents": texts[:5], "top_n": 3}),
                   ("/v1/embeddings", {"input": texts[:3]})]:
    want = post(cls_one, path, body)
    for split in (cls_tp, cls_pp):
        close(post(split, path, body), want, path)
for body in [{"prompt": "I am happy.", "max_tokens": 20}, {"prompt": "Where is the station?", "num_beams": 4, "n": 2}]:
    b = post(s2s_one, "/v1/completions", body)
    for split in (s2s_tp, s2s_pp):
        a = post(split, "/v1/completions", body)
        assert a["choices"][0]["text"], a
        close(a, b, "translate")
pictures = ["data:image/png;base64," + base64.b64encode(open(f, "rb").read()).decode()
            for f in sorted(glob.glob(f"{d}/pictures/*/0[0-2].png"))]
assert len(pictures) >= 3, pictures
for path, body in [("/v1/classify", {"input": pictures}), ("/v1/embeddings", {"input": pictures[:2]})]:
    want = post(vit_one, path, body)
    for split in (vit_tp, vit_pp):
        close(post(split, path, body), want, path)
body = {"input": pictures[:2], "rollout": True}
want = post(vit_one, "/v1/classify", body)
assert all(len(c["rollout"]["values"]) == c["rollout"]["grid"] ** 2 > 0 for c in want["data"]), want
for split in (vit_tp, vit_pp):
    close(post(split, "/v1/classify", body), want, "rollout")
speech = open(f"{d}/speech.wav", "rb").read()
for fields in ([("file", ("speech.wav", speech))], [("file", ("speech.wav", speech)), ("response_format", "verbose_json")]):
    b = upload(wsp_one, fields)
    for split in (wsp_tp, wsp_pp):
        close(json.loads(upload(split, fields)), json.loads(b), "transcript")
# (one sampling temperature: the random model's fallback ladder would decode six times over)
fields = [("file", ("speech.wav", speech)), ("response_format", "verbose_json"), ("timestamp_granularities[]", "word"),
          ("temperature", "1")]
want = json.loads(upload(wsp_one, fields))
assert want.get("words"), want
for split in (wsp_tp, wsp_pp):
    close(json.loads(upload(split, fields)), want, "word timestamps")
print("classify (20 texts in 2 jobs), rerank, embeddings of a classifier, greedy and beam-4 translation, a ViT's "
      "classes, image embeddings and attention rollouts, a Whisper's transcripts and word timestamps: 2 shards and "
      "2 stages answer as one process")
PY

# SIGTERM to rank 0: every rank stops, mpirun exits 0
for name in tp pp tpp cls_tp s2s_tp vit_tp whisper_en_tp cls_pp s2s_pp vit_pp whisper_en_pp; do
  kill -TERM "$(cat "$DIR/$name.pid.0")"
  pid=$(eval echo "\$LAUNCHED_$name")
  for _ in $(seq 150); do kill -0 "$pid" 2> /dev/null || break; sleep 0.2; done
  ! kill -0 "$pid" 2> /dev/null || { echo "FAIL: $name: still running 30 s after SIGTERM to rank 0"; exit 1; }
  rc=0; wait "$pid" || rc=$?
  [ "$rc" -eq 0 ] && grep -q "tfm serve: stopped" "$DIR/$name.err" ||
    { echo "FAIL: $name did not stop cleanly (mpirun exit $rc)"; cat "$DIR/$name.err"; exit 1; }
done
echo "SIGTERM to rank 0: every rank stopped, mpirun exit 0"

expect_error "a draft model on 2 shards" "draft-model is not served with a model split over processes" \
  $MPI "$TFM" -t 1 serve -m "$DIR/llama" --port 0 --tensor-parallel 2 --draft-model "$DIR/llama"
expect_error "without mpirun" "started without mpirun" "$TFM" serve -m "$DIR/llama" --port 0 --tensor-parallel 2
echo "errors: one line, no hang"
echo "PASS"
