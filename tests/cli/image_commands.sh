#!/usr/bin/env bash
# Image models from the command line: tfm train (task image_classifier) on a folder of class
# folders, then tfm classify --image (plain, --top-k, --json), tfm embed --image, tfm attention
# --image (a PNG of the rollout over the picture), tfm eval (accuracy and the confusion matrix),
# tfm info (the image shape); text given to an image model and a broken picture are one-line
# errors that name what is wrong and exit non-zero.
#   usage: image_commands.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Three classes of 12x12 pictures (a bright top half, left half, diagonal) on seeded noise.
/usr/bin/python3 "$SRC/tests/support/make_pictures.py" "$DIR/pictures" 40
cat > "$DIR/pictures.json" <<JSON
{ "task": "image_classifier", "seed": 3,
  "model": { "model_type": "vit", "image_size": 12, "patch_size": 4, "hidden_size": 16, "num_hidden_layers": 2,
             "num_attention_heads": 2, "intermediate_size": 32 },
  "data": { "train": "$DIR/pictures", "test_fraction": 0.25,
            "preprocessor": { "do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25] },
            "augment": { "crop_padding": 1 } },
  "optimizer": { "lr": 0.01, "weight_decay": 0.01 },
  "schedule": { "name": "cosine", "warmup_steps": 4 },
  "training": { "batch_size": 16, "max_steps": 40, "label_smoothing": 0.1 },
  "eval": { "every": 40, "log_every": 10 } }
JSON
"$TFM" -t 1 train "$DIR/pictures.json" --out "$DIR/vit" > "$DIR/train.log" 2>&1 || { cat "$DIR/train.log"; fail "train"; }
grep -q '"split":"val".*"accuracy"' "$DIR/vit/metrics.jsonl" || fail "no test accuracy in metrics.jsonl"
for f in preprocessor_config.json confusion.svg curves.svg; do [ -s "$DIR/vit/$f" ] || fail "no $f"; done
[ ! -e "$DIR/vit/tokenizer.json" ] || fail "an image model got a tokenizer.json"

OUT=$("$TFM" classify -m "$DIR/vit" --image "$DIR/pictures/left/07.png")
[[ "$OUT" == $'left\t1\t'* ]] || fail "classify one picture: '$OUT'"
OUT=$("$TFM" classify -m "$DIR/vit" --image "$DIR/pictures/top/01.png" "$DIR/pictures/diagonal/02.png" --top-k 2)
[ "$(echo "$OUT" | wc -l)" -eq 4 ] || fail "--top-k 2 over two pictures: $OUT"
echo "$OUT" | head -1 | grep -q $'pictures/top/01.png\ttop\t2\t' || fail "first line: $OUT"
echo "$OUT" | sed -n 3p | grep -q $'pictures/diagonal/02.png\tdiagonal\t0\t' || fail "third line: $OUT"
"$TFM" classify -m "$DIR/vit" --image "$DIR/pictures/top/03.png" --json --top-k 3 | /usr/bin/python3 -c '
import json, sys
o = json.loads(sys.stdin.read())
p = o["predictions"]
assert o["image"].endswith("top/03.png") and len(p) == 3 and p[0]["label"] == "top" and p[0]["id"] == 2, o
assert abs(sum(x["probability"] for x in p) - 1) < 1e-4 and p[0]["probability"] >= p[1]["probability"] >= p[2]["probability"], o
' || fail "classify --json"

"$TFM" embed -m "$DIR/vit" --image "$DIR/pictures/top/03.png" "$DIR/pictures/left/03.png" --normalize | /usr/bin/python3 -c '
import json, math, sys
rows = [json.loads(l) for l in sys.stdin]
assert len(rows) == 2 and all(len(r["embedding"]) == 16 for r in rows), rows
assert all(abs(math.sqrt(sum(v * v for v in r["embedding"])) - 1) < 1e-4 for r in rows), rows
' || fail "embed --image"

"$TFM" attention -m "$DIR/vit" --image "$DIR/pictures/diagonal/05.png" -o "$DIR/rollout.png" 2> "$DIR/att.log"
grep -q "attention rollout of \[CLS\] over 3x3 patches" "$DIR/att.log" || { cat "$DIR/att.log"; fail "attention line"; }
/usr/bin/python3 -c '
import sys
from PIL import Image
im = Image.open(sys.argv[1])
assert im.size == (224, 224) and im.mode == "RGB", (im.size, im.mode)
' "$DIR/rollout.png" || fail "the rollout picture is not a 224x224 RGB PNG"

"$TFM" eval -m "$DIR/vit" --json | /usr/bin/python3 -c '
import json, sys
o = json.loads(sys.stdin.read())
assert o["task"] == "image_classifier" and o["examples"] == 30 and o["accuracy"] >= 0.9, o
assert sum(map(sum, o["confusion"])) == 30 and len(o["confusion"]) == 3, o
' || fail "eval --json"
"$TFM" info -m "$DIR/vit" | grep -q "images:       3 x 12 x 12, 4x4 patches: 10 tokens with \[CLS\]" || fail "info"

# Wrong input: text for an image model, a broken picture, a missing one.
expect_error() {  # expected message, then the command
  local want=$1; shift
  if "$@" > "$DIR/out" 2> "$DIR/err"; then fail "succeeded: $*"; fi
  [ "$(wc -l < "$DIR/err")" -eq 1 ] || { cat "$DIR/err"; fail "not one line: $*"; }
  grep -qF -- "$want" "$DIR/err" || { cat "$DIR/err"; fail "expected '$want': $*"; }
}
expect_error "this is an image model: give it images (--image)" "$TFM" classify -m "$DIR/vit" "some text"
expect_error "this is an image model: draw its attention with --image FILE" "$TFM" attention -m "$DIR/vit" -p x -o "$DIR/a.svg"
printf '\x89PNG\r\n\x1a\nnot really' > "$DIR/broken.png"
expect_error "broken.png" "$TFM" classify -m "$DIR/vit" --image "$DIR/broken.png"
expect_error "missing.png" "$TFM" classify -m "$DIR/vit" --image "$DIR/missing.png"
echo "ok: trained, classified, embedded, drew the rollout, evaluated; bad input named"
