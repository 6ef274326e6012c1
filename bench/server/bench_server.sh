#!/usr/bin/env bash
# Server benchmark (docs/benchmarks.md, "Server: `tfm serve` vs llama.cpp"): generated tokens/s and latency (time to first
# token, inter-token p50/p99) at 1, 4 and 16 concurrent streams, `tfm serve` beside llama.cpp
# (node-llama-cpp's prebuilt CPU build: one context with S sequences, its batched decode — the
# closest to llama-server's parallel slots) on the same GGUF file with the same threads.
#
#   bench/server/bench_server.sh TFM GGUF [THREADS] [STREAMS] [TOKENS] [ROUNDS]
#     TFM      the tfm binary (build/bin/tfm)
#     GGUF     the model; the GPT-2-size one: python3 tools/reference/make_gguf_bench.py DIR gpt2
#              (124M parameters, F32, 12 layers, d 768, vocabulary 50257 byte tokens + fillers)
#     THREADS  2; STREAMS 1,4,16; TOKENS 64 per stream; ROUNDS 2 per stream count
#
# Protocol (both engines): S streams start together, each with its own 32-character prompt
# (32 tokens: the vocabulary is bytes), and each generates exactly TOKENS greedy tokens (EOS
# ignored). A warm-up stream runs first. tfm serve runs with --parallel = the largest S, so
# every stream has a slot; each is one POST /v1/completions with stream: true, timed on arrival
# of each server-sent event by a Node client on the same machine (bench/server/stream_clients.mjs).
# Prints the JSON lines of both and a table. Heavy: run it under `flock /tmp/heavy.lock`.
set -euo pipefail
tfm="$1" gguf="$2" threads="${3:-2}" streams="${4:-1,4,16}" tokens="${5:-64}" rounds="${6:-2}"
here="$(cd "$(dirname "$0")/../.." && pwd)"
slots="$(echo "$streams" | tr ',' '\n' | sort -n | tail -1)"
tmp="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# ---- tfm serve ---------------------------------------------------------------------------
source "$here/bench/server/start_tfm.sh"
start_tfm "$tmp" "$tfm" -t "$threads" serve -m "$gguf" --host 127.0.0.1 --port 0 --parallel "$slots" --ctx-size 256 --no-log
sed -n '1,3p' "$tmp/serve.err" >&2
node "$here/bench/server/stream_clients.mjs" --url "$url" --streams "$streams" --tokens "$tokens" \
  --prompt-chars 32 --rounds "$rounds" | tee "$tmp/results.jsonl"
kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=""

# ---- llama.cpp (node-llama-cpp) ---------------------------------------------------------
NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node "$here/tools/reference/llama-cpp/bench_parallel.mjs" --model "$gguf" \
  --streams "$streams" --tokens "$tokens" --prompt-chars 32 --threads "$threads" --rounds "$rounds" | tee -a "$tmp/results.jsonl"

# ---- table: the best round (highest tokens/s) of each engine and stream count --------------
node - "$tmp/results.jsonl" <<'JS'
const lines = require("fs").readFileSync(process.argv[2], "utf8").trim().split("\n").map((l) => JSON.parse(l));
const best = new Map();
for (const r of lines) {
  const k = `${r.engine}|${r.streams}`;
  if (!best.has(k) || best.get(k).tokens_per_s < r.tokens_per_s) best.set(k, r);
}
const f = (x, d) => x.toFixed(d).padStart(10);
console.log("\nengine      streams   tokens/s  x 1 stream  TTFT p50 ms  TTFT max ms  ITL p50 ms  ITL p99 ms");
for (const engine of ["tfm serve", "llama.cpp"]) {
  const one = best.get(`${engine}|1`);
  for (const r of [...best.values()].filter((b) => b.engine === engine).sort((a, b) => a.streams - b.streams)) {
    console.log(`${engine.padEnd(10)} ${String(r.streams).padStart(8)} ${f(r.tokens_per_s, 1)} ${one ? f(r.tokens_per_s / one.tokens_per_s, 2) + "  " : "         -  "}` +
                `${f(r.ttft_ms_p50, 1)}   ${f(r.ttft_ms_max, 1)}  ${f(r.itl_ms_p50, 1)}  ${f(r.itl_ms_p99, 1)}`);
  }
}
JS
