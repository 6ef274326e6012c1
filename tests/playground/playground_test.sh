#!/usr/bin/env bash
# The playground page in a real browser: headless Chromium (Debian's chromium, driven over the
# DevTools protocol by drive_page.mjs) loads / from `tfm serve` on 127.0.0.1, types a message,
# presses Enter and waits for the streamed reply. Checks: the reply arrived in more than one
# streamed piece, its text equals the same request answered without streaming (greedy), the
# timings line was filled, the attention heat map was drawn, the page logged no script error.
# Leaves the screenshot in OUT_DIR/playground.png (docs/img/playground.png is one such run).
#   playground_test.sh TFM SOURCE_DIR OUT_DIR [NODE]
# Chromium missing is a failure (scripts/deps.sh installs it).
set -euo pipefail
tfm="$1" src="$2" out="$3" node="${4:-node}"
source "$src/tests/playground/page_test_lib.sh"

# A tiny character-level LM trained for a few steps: the page's test needs a model that
# streams quickly, not a good one.
for i in $(seq 1 60); do echo "To be, or not to be, that is the question $i:"; done >"$tmp/lm.txt"
cat >"$tmp/lm.json" <<JSON
{"task": "lm", "model": {"model_type": "transformer", "architecture": "decoder_only", "d_model": 32, "n_heads": 2,
  "n_layers": 2, "d_ff": 64, "max_positions": 128, "dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0},
 "tokenizer": {"kind": "char"}, "data": {"train": "$tmp/lm.txt", "block_size": 32},
 "training": {"batch_size": 4}, "eval": {"every": 5, "batches": 1}, "sample": {"tokens": 4}}
JSON
"$tfm" -t 1 train "$tmp/lm.json" --max-steps 5 -q --out "$tmp/lm" >/dev/null 2>"$tmp/train.err" \
  || fail "training the test model: $(cat "$tmp/train.err")"

# The server on any free loopback port, with an API key (the page sends the one typed into its
# key field); its first stdout line names the URL.
key="playground-test-key-$$"
echo "$key" >"$tmp/key"
start_server -m "$tmp/lm" --parallel 2 --api-key-file "$tmp/key"

# Greedy, so the streamed reply can be compared with the same request unstreamed (the checks
# below send it).
message="To be"
settings='{"temperature": 0, "max_tokens": 24, "seed": 7, "top_k": 40, "top_p": 0.95, "api-key": "'"$key"'"}'
timeout 90 "$node" "$src/tests/playground/drive_page.mjs" --chromium "$chromium" --url "$url/" --message "$message" \
  --screenshot "$out/playground.png" --timeout-ms 60000 --settings "$settings" >"$tmp/page.json" \
  || fail "driving the page in Chromium failed"
"$node" - "$tmp/page.json" "$url" "$out/playground.png" "$key" <<'JS' || fail "page checks (above)"
(async () => {
const fs = require("fs");
const [pagePath, url, shotPath, key] = process.argv.slice(2);
const page = JSON.parse(fs.readFileSync(pagePath, "utf8"));
// The same request the page sent, unstreamed.
const resp = await fetch(url + "/v1/chat/completions", { method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + key },
  body: JSON.stringify({ messages: [{ role: "user", content: "To be" }], temperature: 0, max_tokens: 24, seed: 7, top_k: 40, top_p: 0.95 }) });
const plain = await resp.json();
if (!resp.ok) { console.error("  the unstreamed request failed: " + JSON.stringify(plain)); process.exit(1); }
const expected = plain.choices[0].message.content;
const problems = [];
const check = (ok, what) => { if (!ok) problems.push(what); };
check(page.title === "tfm playground", `title ${JSON.stringify(page.title)}`);
check(page.modelStatus.startsWith("model: "), `model status ${JSON.stringify(page.modelStatus)}`);
check(page.typed === "To be", `typed text ${JSON.stringify(page.typed)}`);
check(page.reply.userText.endsWith("To be"), `user message shown as ${JSON.stringify(page.reply.userText)}`);
check(page.reply.state === "done", `reply state ${page.reply.state}`);
check(page.reply.chunks > 1, `the reply came in ${page.reply.chunks} streamed piece(s); expected more than one`);
check(expected.length > 0, "the unstreamed reply is empty");
check(page.reply.text === expected, `streamed text ${JSON.stringify(page.reply.text)} != unstreamed ${JSON.stringify(expected)}`);
check(/first token \d+ ms/.test(page.reply.timings) && /\d+ tokens?/.test(page.reply.timings) && /finish: \w+/.test(page.reply.timings),
      `timings line ${JSON.stringify(page.reply.timings)}`);
check(page.attention && page.attention.width > 0 && page.attention.height > 0,
      `attention heat map not drawn: ${JSON.stringify(page.attention)}`);
// Rows: the reply's tokens (one per character here); columns: the chat template's rendering of
// the message (ChatML: longer than the message) and the reply.
const m = /(\d+) reply tokens × (\d+) tokens \(the prompt as the chat template renders it\)/.exec(page.attention ? page.attention.note : "");
check(m && Number(m[1]) === expected.length && Number(m[2]) > expected.length + "To be".length,
      `heat map shape: ${page.attention && page.attention.note}`);
check(page.consoleErrors.length === 0, `script errors: ${page.consoleErrors.join(" | ")}`);
const png = fs.readFileSync(shotPath);
check(png.length > 10000 && png.subarray(1, 4).toString() === "PNG", `screenshot ${shotPath}: ${png.length} bytes`);
if (problems.length) { for (const p of problems) console.error("  " + p); process.exit(1); }
console.log(`playground: streamed ${page.reply.chunks} pieces, ${page.reply.text.length} characters equal to the ` +
            `unstreamed reply; ${page.reply.timings}; heat map ${page.attention.width}x${page.attention.height}; screenshot ${shotPath}`);
})().catch((e) => { console.error("  " + e.message); process.exit(1); });
JS
