#!/usr/bin/env bash
# CLIP from the command line and the server, against the references: a CLIP hub directory
# written by tools/reference/ref_clip.py (torch) with a tokenizer.json in CLIP's layout
# (tools/reference/hf-tokenizers/clip_bpe.js); the label texts' ids come from Hugging Face
# tokenizers and the probabilities from the PyTorch reference, and tfm classify --labels must
# give the same. Then tfm embed (texts and pictures in one space), tfm eval zero-shot on a
# folder of class folders (equal to classify --labels picture by picture), tfm serve's /v1/classify with
# "labels" (twice: the second answer comes from the label cache and must be the same) and
# /v1/embeddings, and wrong uses named in one line.
#   usage: clip_zero_shot.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
NODE_TOK="$SRC/tools/reference/hf-tokenizers"

# The CLIP directory (tests/support/make_clip_dir.sh: the reference's weights, a tokenizer in
# CLIP's layout whose merges saw the labels).
LABELS=("a photo of a cat" "a photo of a dog" "a diagram of a bright diagonal")
bash "$SRC/tests/support/make_clip_dir.sh" "$SRC" "$DIR/clip" "${LABELS[@]}"
/usr/bin/python3 "$SRC/tests/support/make_pictures.py" "$DIR/pictures" 2
PIC="$DIR/pictures/diagonal/01.png"

# The reference: HF tokenizers' ids (with the special tokens) and torch's probabilities.
IDS=$(node -e '
const { Tokenizer } = require(process.argv[1] + "/node_modules/tokenizers");
const t = Tokenizer.fromFile(process.argv[2]);
(async () => { for (const s of process.argv.slice(3)) console.log((await t.encode(s, null, { addSpecialTokens: true })).getIds().join(",")); })();
' "$NODE_TOK" "$DIR/clip/tokenizer.json" "${LABELS[@]}")
# shellcheck disable=SC2086
WANT=$(/usr/bin/python3 "$SRC/tools/reference/ref_clip.py" probs "$DIR/clip" "$PIC" $IDS)
LABEL_ARG=$(IFS=,; echo "${LABELS[*]}")
"$TFM" -t 1 classify -m "$DIR/clip" --image "$PIC" --labels "$LABEL_ARG" --top-k 3 --json > "$DIR/got.json"
/usr/bin/python3 - "$DIR/got.json" "$WANT" "${LABELS[@]}" <<'PY' || fail "tfm classify --labels differs from the reference"
import json, sys
got, want, labels = json.load(open(sys.argv[1])), json.loads(sys.argv[2]), sys.argv[3:]
p = {x["label"]: x["probability"] for x in got["predictions"]}
assert set(p) == set(labels), got
for i, name in enumerate(labels):
    assert abs(p[name] - want[i]) < 1e-4, (name, p[name], want[i])
assert [x["id"] for x in got["predictions"]] == sorted(range(3), key=lambda i: -want[i]), got
PY
OUT=$("$TFM" -t 1 classify -m "$DIR/clip" --image "$PIC" --labels "${LABELS[0]}" --labels "${LABELS[1]}")
[[ "$OUT" == "a photo of a "*$'\t'[01]$'\t'* ]] || fail "plain output: '$OUT'"
echo "tfm classify --labels == HF tokenizers + PyTorch's CLIPModel"

# Embeddings: texts and pictures in the projection space (8 numbers), unit length on request;
# the cosine of a text and a picture times exp(logit_scale), softmaxed, gives the probabilities.
"$TFM" -t 1 embed -m "$DIR/clip" --image "$PIC" --normalize > "$DIR/img.jsonl"
printf '%s\n' "${LABELS[@]}" | "$TFM" -t 1 embed -m "$DIR/clip" --normalize > "$DIR/txt.jsonl"
/usr/bin/python3 - "$DIR" "$WANT" <<'PY' || fail "tfm embed on a CLIP model"
import json, math, sys
d, want = sys.argv[1], json.loads(sys.argv[2])
img = json.loads(open(d + "/img.jsonl").readline())["embedding"]
txt = [json.loads(l)["embedding"] for l in open(d + "/txt.jsonl")]
assert len(img) == 8 and all(len(t) == 8 for t in txt), (len(img), [len(t) for t in txt])
assert all(abs(math.sqrt(sum(v * v for v in e)) - 1) < 1e-4 for e in txt + [img])
z = [math.exp(2.6592) * sum(a * b for a, b in zip(img, t)) for t in txt]
m = max(z)
p = [math.exp(v - m) / sum(math.exp(u - m) for u in z) for v in z]
assert all(abs(a - b) < 1e-4 for a, b in zip(p, want)), (p, want)
PY
echo "tfm embed: texts and pictures in one space"

# tfm eval, zero-shot over a folder of class folders: its confusion matrix is that of tfm
# classify --labels with the classes' label texts ("a photo of a {}." by default).
"$TFM" -t 1 eval -m "$DIR/clip" --data "$DIR/pictures" --json > "$DIR/eval.json" || fail "tfm eval on a CLIP model"
ALL=("$DIR"/pictures/*/*.png)
"$TFM" -t 1 classify -m "$DIR/clip" --image "${ALL[@]}" --json \
  --labels "a photo of a diagonal.,a photo of a left.,a photo of a top." > "$DIR/each.jsonl"
/usr/bin/python3 - "$DIR/eval.json" "$DIR/each.jsonl" <<'PY' || fail "tfm eval's zero-shot scores"
import json, sys
ev = json.load(open(sys.argv[1]))
classes = ["diagonal", "left", "top"]
confusion = [[0] * 3 for _ in classes]
for line in open(sys.argv[2]):
    o = json.loads(line)
    truth = classes.index(o["image"].split("/")[-2])
    confusion[truth][o["predictions"][0]["id"]] += 1
assert ev["task"] == "image_classifier" and ev["examples"] == 6 and ev["confusion"] == confusion, (ev, confusion)
assert abs(ev["accuracy"] - sum(confusion[i][i] for i in range(3)) / 6) < 1e-9, ev
PY
echo "tfm eval: zero-shot accuracy and confusion == tfm classify --labels"

# Wrong uses: one line each, non-zero exit.
expect_error() {  # expected message, then the command
  local want=$1; shift
  if "$@" > "$DIR/out" 2> "$DIR/err"; then fail "succeeded: $*"; fi
  [ "$(wc -l < "$DIR/err")" -eq 1 ] || { cat "$DIR/err"; fail "not one line: $*"; }
  grep -qF -- "$want" "$DIR/err" || { cat "$DIR/err"; fail "expected '$want': $*"; }
}
expect_error "a CLIP model classifies pictures against label texts" "$TFM" -t 1 classify -m "$DIR/clip" --image "$PIC"
expect_error "--labels classifies pictures: give them with --image" "$TFM" -t 1 classify -m "$DIR/clip" --labels "a,b" "text"
expect_error "has no {} where the class name goes" "$TFM" -t 1 eval -m "$DIR/clip" --data "$DIR/pictures" --template "a photo"
LONG=$(printf 'word %.0s' $(seq 40))
expect_error "missing.png] cannot open the image file" "$TFM" -t 1 classify -m "$DIR/clip" --image "$DIR/missing.png" --labels "a"

# The server: /v1/classify with labels (the second time from the label cache: the same
# numbers), /v1/embeddings of texts and of pictures, 400s for what does not fit.
source "$SRC/tests/server/start_server.sh"
start clip clip
/usr/bin/python3 - "$PORT" "$PIC" "$DIR/got.json" "$LONG" "${LABELS[@]}" <<'PY' || fail "CLIP over the server"
import base64, json, sys, urllib.request, urllib.error
port, pic, cli, long_text, labels = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3])), sys.argv[4], sys.argv[5:]
def post(path, body):
    req = urllib.request.Request("http://127.0.0.1:%s%s" % (port, path), json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req) as r: return r.status, json.load(r)
    except urllib.error.HTTPError as e: return e.code, json.load(e)
url = "data:image/png;base64," + base64.b64encode(open(pic, "rb").read()).decode()
answers = []
for _ in range(2):
    code, out = post("/v1/classify", {"input": [url], "labels": labels})
    assert code == 200, out
    answers.append(out["data"][0]["probabilities"])
assert answers[0] == answers[1], answers  # cached label embeddings == computed ones
want = {x["label"]: x["probability"] for x in cli["predictions"]}
assert all(abs(answers[0][k] - want[k]) < 1e-5 for k in labels), (answers[0], want)
code, out = post("/v1/embeddings", {"input": labels})
assert code == 200 and len(out["data"]) == 3 and len(out["data"][0]["embedding"]) == 8, out
code, out = post("/v1/embeddings", {"input": [{"type": "image_url", "image_url": {"url": url}}], "normalize": True})
assert code == 200 and len(out["data"][0]["embedding"]) == 8, out
for body, param in (({"input": [url]}, "labels"), ({"input": [url], "labels": []}, "labels"),
                    ({"input": [url], "labels": [long_text]}, "labels"), ({"input": [url], "labels": [3]}, "labels")):
    code, out = post("/v1/classify", body)
    assert code == 400 and out["error"]["param"] == param, (body, code, out)
code, out = post("/v1/embeddings", {"input": [url, "a text"]})
assert code == 400 and "mixes pictures and texts" in out["error"]["message"], out
code, out = post("/v1/embeddings", {"input": [long_text]})
assert code == 400 and out["error"]["code"] == "context_length_exceeded", out
PY
echo "tfm serve: /v1/classify with labels (cached == computed), /v1/embeddings of texts and pictures, 400s"
