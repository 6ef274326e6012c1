#!/usr/bin/env bash
# configs/fashion-mnist-vit.json on Debian's dataset-fashion-mnist (scripts/deps.sh installs it):
# 250 steps (of the config's 25,780) read the real IDX files, train, score all 10,000 test
# images and write accuracy to metrics.jsonl and the confusion matrix beside curves.svg; then
# tfm classify names a real test picture (a trouser, the easiest class) from the directory.
#   usage: fashion_mnist_config.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$TFM" train "$SRC/configs/fashion-mnist-vit.json" --out "$DIR/run" --max-steps 250 > "$DIR/train.log" 2>&1 ||
  { cat "$DIR/train.log"; fail "train"; }
grep -q "60000 training images" "$DIR/train.log" || { cat "$DIR/train.log"; fail "not the 60,000 training images"; }
acc=$(grep '"split":"val"' "$DIR/run/metrics.jsonl" | tail -1 | sed 's/.*"accuracy":\([0-9.]*\).*/\1/')
awk -v a="$acc" 'BEGIN { exit !(a >= 0.60) }' || fail "accuracy $acc after 250 steps (expected >= 0.60; 0.674 measured on Zen 4)"
grep -q "Ankle boot" "$DIR/run/confusion.svg" || fail "confusion.svg lacks the class names"
# Test image 2 of t10k is a trouser (label 1).
/usr/bin/python3 - "$DIR/trouser.png" <<'PY'
import gzip, sys
from PIL import Image
raw = gzip.open("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz").read()
Image.frombytes("L", (28, 28), raw[16 + 2 * 784:16 + 3 * 784]).save(sys.argv[1])
PY
OUT=$("$TFM" classify -m "$DIR/run" --image "$DIR/trouser.png")
[[ "$OUT" == $'Trouser\t1\t'* ]] || fail "the trouser was classified '$OUT'"
echo "ok: 250 steps, test accuracy $acc; the trouser is a trouser"
