#!/usr/bin/env bash
# A CLIP hub directory for the command-line, server and playground tests: a tokenizer.json in
# CLIP's layout with merges learnt from a slice of the built-in text and the given label texts
# (tools/reference/hf-tokenizers/clip_bpe.js), the model from the PyTorch reference with a text
# vocabulary of exactly the tokenizer's size (tools/reference/ref_clip.py: random weights,
# 12 x 12 pictures), and CLIP's image processor without resizing.
#   usage: make_clip_dir.sh SOURCE_DIR OUT_DIR [LABEL...]
set -euo pipefail
SRC=$1 OUT=$2; shift 2
mkdir -p "$OUT"
{ head -n 400 "$SRC/data/tinyshakespeare.txt"; printf '%s\n' "$@"; } > "$OUT.text.txt"
node "$SRC/tools/reference/hf-tokenizers/clip_bpe.js" "$OUT.text.txt" 200 "$OUT.tokenizer.json"
V=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["model"]["vocab"]))' "$OUT.tokenizer.json")
/usr/bin/python3 "$SRC/tools/reference/ref_clip.py" hub "$OUT" "$V"
mv "$OUT.tokenizer.json" "$OUT/tokenizer.json"
rm -f "$OUT.text.txt"
cat > "$OUT/preprocessor_config.json" <<'JSON'
{"image_processor_type": "CLIPImageProcessor", "do_resize": false, "do_center_crop": false, "do_rescale": true,
 "rescale_factor": 0.00392156862745098, "do_normalize": true, "do_convert_rgb": true,
 "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}
JSON
