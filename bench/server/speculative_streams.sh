#!/usr/bin/env bash
# Speculative decoding at several streams: STREAMS concurrent greedy completions of TOKENS
# tokens each on a `tfm serve --parallel STREAMS` server, plain and with --lookup (and with
# --draft-model FILE when DRAFT is set); the aggregate decode rate (all completion tokens over
# the wall time of the round of requests, best of REPS after a warm-up) and the server's
# speculative rounds and the model steps that scored them. TFM=OTHER_BINARY compares another
# build (e.g. one from before the rounds were batched). docs/benchmarks.md, "Speculative
# decoding".
#   bench/server/speculative_streams.sh MODEL.gguf [THREADS] [STREAMS] [TOKENS] [REPS]   (from the repository root)
set -euo pipefail
root=$(pwd)
model=$1 threads=${2:-1} streams=${3:-4} tokens=${4:-96} reps=${5:-2}
bin=${TFM:-$root/build/bin/tfm}
dir=$(mktemp -d)
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
source "$root/bench/server/start_tfm.sh"
prompts=("The quick brown fox jumps over the lazy dog. The quick brown fox" "Once upon a time there was a"
         "In the beginning was the word, and the word" "ROMEO: But soft, what light through yonder window breaks"
         "To be, or not to be, that is the question" "It was the best of times, it was the worst of times"
         "Call me Ishmael. Some years ago" "All happy families are alike; each unhappy family")
modes="plain lookup"
[ -n "${DRAFT:-}" ] && modes="$modes draft"
for mode in $modes; do
  case $mode in
    lookup) extra=(--lookup) ;;
    draft) extra=(--draft-model "$DRAFT") ;;
    *) extra=() ;;
  esac
  start_tfm "$dir" "$bin" -t "$threads" serve -m "$model" --port 0 --parallel "$streams" -c 512 --no-log "${extra[@]}"
  best=0
  for r in $(seq 0 "$reps"); do  # run 0 warms up
    t0=$(date +%s.%N)
    for i in $(seq 0 $((streams - 1))); do
      body=$(printf '{"prompt": "%s", "max_tokens": %d, "temperature": 0, "ignore_eos": true}' "${prompts[$((i % 8))]}" "$tokens")
      curl -s "$url/v1/completions" -H 'Content-Type: application/json' -d "$body" > "$dir/out.$i" &
    done
    wait $(jobs -p | grep -v "^$server_pid$") 2>/dev/null || true
    t1=$(date +%s.%N)
    tps=$(/usr/bin/python3 -c "print(round($streams * $tokens / ($t1 - $t0), 2))")
    [ "$r" -gt 0 ] && best=$(/usr/bin/python3 -c "print(max($best, $tps))")
  done
  echo "tfm $mode, $streams streams: $best tok/s in all"
  curl -s "$url/metrics" | grep -E '^tfm_speculative_(rounds|steps|drafted|accepted)' || true
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
done
