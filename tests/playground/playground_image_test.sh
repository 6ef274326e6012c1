#!/usr/bin/env bash
# The playground page with an image classifier, in headless Chromium (drive_page.mjs --image):
# `tfm serve` of a small ViT trained here on a folder of generated pictures; the page must hide
# the chat, offer the picture drop, and for the same picture chosen through the file field and
# dropped on the drop zone show the classes `tfm classify --json` gives (label and the top
# probabilities, as percentages) and the heat map `tfm attention --image` draws (the same PNG
# bytes), with no script error. Leaves the screenshot in OUT_DIR/playground-image.png.
# With "clip": a CLIP directory (tests/support/make_clip_dir.sh) instead, the page's label field
# filled with three label texts, and the classes those of `tfm classify --labels` (screenshot
# OUT_DIR/playground-clip.png).
#   playground_image_test.sh TFM SOURCE_DIR OUT_DIR [NODE] [clip]
set -euo pipefail
tfm="$1" src="$2" out="$3" node="${4:-node}" mode="${5:-vit}"
source "$src/tests/playground/page_test_lib.sh"

# Three classes of 12 x 12 pictures (tests/support/make_pictures.py) and a ViT trained on them,
# or a CLIP directory and the label texts it is asked about.
/usr/bin/python3 "$src/tests/support/make_pictures.py" "$tmp/pictures" 24 || fail "writing the pictures"
picture="$tmp/pictures/left/03.png"
settings='{}'
if [ "$mode" = clip ]; then
  labels="a photo of a cat, a diagram, a bright left half"
  bash "$src/tests/support/make_clip_dir.sh" "$src" "$tmp/model" "a photo of a cat" "a diagram" "a bright left half" \
    || fail "writing the CLIP directory"
  "$tfm" -t 1 classify -m "$tmp/model" --image "$picture" --labels "a photo of a cat,a diagram,a bright left half" \
    --top-k 3 --json >"$tmp/classify.json" || fail "tfm classify --labels"
  settings='{"labels": "'"$labels"'"}'
  shot="$out/playground-clip.png"
else
  cat >"$tmp/vit.json" <<JSON
{"task": "image_classifier", "seed": 3,
 "model": {"model_type": "vit", "image_size": 12, "patch_size": 4, "hidden_size": 16, "num_hidden_layers": 2,
           "num_attention_heads": 2, "intermediate_size": 32},
 "data": {"train": "$tmp/pictures", "test_fraction": 0.25,
          "preprocessor": {"do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.25, 0.25, 0.25]}},
 "optimizer": {"lr": 0.01, "weight_decay": 0.01}, "schedule": {"name": "cosine", "warmup_steps": 4},
 "training": {"batch_size": 16, "max_steps": 60}, "eval": {"every": 30, "log_every": 10}}
JSON
  "$tfm" -t 1 train "$tmp/vit.json" -q --out "$tmp/model" >/dev/null 2>"$tmp/train.err" \
    || fail "training the test model: $(cat "$tmp/train.err")"
  "$tfm" -t 1 classify -m "$tmp/model" --image "$picture" --top-k 3 --json >"$tmp/classify.json" || fail "tfm classify"
  shot="$out/playground-image.png"
fi
"$tfm" -t 1 attention -m "$tmp/model" --image "$picture" -o "$tmp/rollout.png" >/dev/null || fail "tfm attention"

key="playground-image-key-$$"
echo "$key" >"$tmp/key"
start_server -m "$tmp/model" --api-key-file "$tmp/key"

timeout 90 "$node" "$src/tests/playground/drive_page.mjs" --chromium "$chromium" --url "$url/" --image "$picture" \
  --screenshot "$shot" --timeout-ms 60000 \
  --settings "$(/usr/bin/python3 -c 'import json, sys; s = json.loads(sys.argv[1]); s["api-key"] = sys.argv[2]; print(json.dumps(s))' "$settings" "$key")" \
  >"$tmp/page.json" \
  || fail "driving the page in Chromium failed"
"$node" - "$tmp/page.json" "$tmp/classify.json" "$tmp/rollout.png" "$shot" <<'JS' || fail "page checks (above)"
const fs = require("fs");
const [pagePath, classifyPath, rolloutPath, shotPath] = process.argv.slice(2);
const page = JSON.parse(fs.readFileSync(pagePath, "utf8"));
// tfm classify --top-k 3 --json: {"image", "predictions": [{"label", "id", "probability"}]}, most probable first.
const cli = JSON.parse(fs.readFileSync(classifyPath, "utf8").trim().split("\n")[0]);
cli.label = cli.predictions[0].label;
const problems = [];
const check = (ok, what) => { if (!ok) problems.push(what); };
check(page.title === "tfm playground", `title ${JSON.stringify(page.title)}`);
check(page.modelStatus.startsWith("model: "), `model status ${JSON.stringify(page.modelStatus)}`);
const ranked = cli.predictions.map((p) => [p.label, p.probability]);
const rollout = "data:image/png;base64," + fs.readFileSync(rolloutPath).toString("base64");
for (const [how, r] of [["chosen", page.chosen], ["dropped", page.dropped]]) {
  check(r.state === "done", `${how}: state ${r.state} (${r.note})`);
  check(r.chatHidden && r.visionShown, `${how}: the chat is shown (or the picture section is not) for an image classifier`);
  check(r.label === cli.label, `${how}: label ${r.label}, tfm classify says ${cli.label}`);
  check(r.predictions.length === ranked.length, `${how}: ${r.predictions.length} predictions listed, ${ranked.length} classes`);
  r.predictions.forEach((p, i) => {
    const [name, prob] = ranked[i] || [];
    check(p.label === name && p.text === `${name} ${(100 * prob).toFixed(1)}%`,
          `${how}: prediction ${i} ${JSON.stringify(p)}, tfm classify ${name} ${prob}`);
  });
  check(r.overlay === rollout, `${how}: the heat map differs from tfm attention's PNG (${r.overlayWidth}x${r.overlayHeight})`);
  check(r.note.includes(cli.label), `${how}: note ${JSON.stringify(r.note)}`);
}
check(page.consoleErrors.length === 0, `script errors: ${page.consoleErrors.join(" | ")}`);
const png = fs.readFileSync(shotPath);
check(png.length > 10000 && png.subarray(1, 4).toString() === "PNG", `screenshot ${shotPath}: ${png.length} bytes`);
if (problems.length) { for (const p of problems) console.error("  " + p); process.exit(1); }
console.log(`playground (image): ${page.chosen.label} ${page.chosen.predictions[0].text} chosen and dropped, equal to tfm classify; ` +
            `heat map ${page.chosen.overlayWidth}x${page.chosen.overlayHeight} equal to tfm attention's; screenshot ${shotPath}`);
JS
