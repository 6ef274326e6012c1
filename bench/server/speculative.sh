#!/usr/bin/env bash
# Speculative decoding at one stream, side by side: `tfm serve` plain and with --lookup (a greedy
# completion of TOKENS tokens through HTTP, its `timings.predicted_per_second`), and llama.cpp
# (node-llama-cpp) plain and with its prompt-lookup predictor on the same GGUF file
# (tools/reference/llama-cpp/bench_speculative.mjs). docs/benchmarks.md, "Speculative decoding".
# tfm's lookup searches the prompt and the generated text; node-llama-cpp's only the prompt.
#   bench/server/speculative.sh MODEL.gguf [THREADS] [TOKENS] [REPS]   (from the repository root)
# DRAFT=FILE adds tfm with --draft-model FILE (DRAFT_DTYPE=TYPE: at that weight type);
# DRAFT_MAX=N sets --draft (8).
set -euo pipefail
root=$(pwd)
model=$1 threads=${2:-1} tokens=${3:-128} reps=${4:-3}
prompt="The quick brown fox jumps over the lazy dog. The quick brown fox"
dir=$(mktemp -d)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
source "$root/bench/server/start_tfm.sh"
serve() { start_tfm "$dir" "$root/build/bin/tfm" -t "$threads" serve -m "$model" --port 0 --parallel 1 -c 512 --no-log "$@"; }
body=$(printf '{"prompt": "%s", "max_tokens": %d, "temperature": 0, "ignore_eos": true}' "$prompt" "$tokens")
modes="plain lookup"
[ -n "${DRAFT:-}" ] && modes="$modes draft"
for mode in $modes; do
  case $mode in
    lookup) serve --lookup --draft "${DRAFT_MAX:-8}" ;;
    draft) serve --draft-model "$DRAFT" --draft "${DRAFT_MAX:-8}" ${DRAFT_DTYPE:+--draft-dtype "$DRAFT_DTYPE"} ;;
    *) serve ;;
  esac
  best=0
  for r in $(seq 0 "$reps"); do  # run 0 warms up
    tps=$(curl -s "$url/v1/completions" -H 'Content-Type: application/json' -d "$body" |
      /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["timings"]["predicted_per_second"])')
    [ "$r" -gt 0 ] && best=$(/usr/bin/python3 -c "print(max($best, $tps))")
  done
  echo "tfm $mode: $best tok/s"
  curl -s "$url/metrics" | grep '^tfm_speculative' || true
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
node "$root/tools/reference/llama-cpp/bench_speculative.mjs" "$model" "$threads" "$tokens" "$reps" "$prompt"
