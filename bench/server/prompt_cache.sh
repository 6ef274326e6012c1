#!/usr/bin/env bash
# Prompt-cache benchmark (docs/benchmarks.md, "Prompt cache"): time to first token for a prompt
# with a long shared prefix, cold and cached, tfm serve beside llama.cpp (node-llama-cpp's
# prebuilt CPU build, a sequence reused as llama-server reuses a slot's prompt) on the same GGUF
# file with the same threads.
#
#   bench/server/prompt_cache.sh TFM [THREADS] [PREFIX_CHARS] [ROUNDS]
#     the model: a GPT-2-size F32 GGUF with a 2304-position table, made here
#     (tools/reference/make_gguf_bench.py DIR gpt2 2304; vocabulary: bytes, so a character is a
#     token); THREADS 2; PREFIX_CHARS 2000; ROUNDS 5 cached prompts after the cold one
#
# Protocol (both engines): a warm-up prompt, then round 0: the shared prefix + question 0
# (cold), rounds 1..R: the prefix + another 32-character question; each the time from sending
# the prompt to the first generated token (greedy). tfm serve: --parallel 1 --prefill-chunk 64,
# streamed /v1/completions from a Node client on the same machine. Heavy: run it alone.
set -euo pipefail
tfm="$1" threads="${2:-2}" prefix="${3:-2000}" rounds="${4:-5}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
/usr/bin/python3 "$here/tools/reference/make_gguf_bench.py" "$tmp" gpt2 2304
gguf="$tmp/bench-gpt2-124m-ctx2304-f32.gguf"

source "$here/bench/server/start_tfm.sh"
start_tfm "$tmp" "$tfm" -t "$threads" serve -m "$gguf" --host 127.0.0.1 --port 0 --parallel 1 --ctx-size 2304 --prefill-chunk 64 --no-log
node "$here/bench/server/prompt_cache_client.mjs" --url "$url" --prefix-chars "$prefix" --rounds "$rounds" | tee "$tmp/results.jsonl"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node "$here/tools/reference/llama-cpp/bench_prompt_cache.mjs" --model "$gguf" \
  --prefix-chars "$prefix" --rounds "$rounds" --threads "$threads" | tee -a "$tmp/results.jsonl"

node - "$tmp/results.jsonl" <<'JS'
const lines = require("fs").readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
console.log("\nengine       cold TTFT ms  cached TTFT ms (median)  speed-up  tokens reused");
for (const r of lines) {
  const m = median(r.cached_ms);
  console.log(`${r.engine.padEnd(12)} ${r.cold_ms.toFixed(1).padStart(12)}  ${m.toFixed(1).padStart(22)}  ${(r.cold_ms / m).toFixed(1).padStart(7)}x  ${median(r.cached_tokens)}`);
}
JS
