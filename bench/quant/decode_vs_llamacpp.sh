#!/usr/bin/env bash
# Quantized decode side by side (docs/benchmarks.md, "Quantized decode"): tfm bench decode and
# llama.cpp (node-llama-cpp's prebuilt CPU build, tools/reference/llama-cpp/bench_decode.mjs) on
# the same GPT-2-size GGUF files, one per weight type, at 1 and 2 threads; peak RSS of each run.
#   bench/quant/decode_vs_llamacpp.sh [WORKDIR]     (run from the repository root, after a build;
#                                                   on a quiet machine: it takes about 6 minutes)
set -euo pipefail
export OMP_WAIT_POLICY=passive
root=$(pwd)
bin=$root/build/bin
work=${1:-/tmp/tfm-quant-bench}
mkdir -p "$work"
cd "$work"
# Random f32 GPT-2-size weights in hub layout, a small BPE tokenizer, then one GGUF per type.
[ -f hub/gpt2/config.json ] || "$bin/bench_load" write hub/gpt2 gpt2
[ -f hub/gpt2/tokenizer.json ] ||
  "$bin/tfm" tokenizer train --type bpe --vocab-size 1000 --input "$root/data/tinyshakespeare.txt" -o hub/gpt2/tokenizer.json
types=(f32 bf16 q8_0 q4_0 q4_k)
for t in "${types[@]}"; do
  [ -f "gpt2-$t.gguf" ] || "$bin/tfm" -t 1 quantize -m hub/gpt2 -o "gpt2-$t.gguf" --type "$t"
done
for th in 1 2; do
  for t in "${types[@]}"; do
    echo "=== tfm $t threads=$th"
    /usr/bin/time -f "peak_rss_kb %M wall %e" "$bin/tfm" -t "$th" bench decode -m "gpt2-$t.gguf" --model-only --no-torch 2>&1 |
      grep -v '^\s*$'
    echo "=== llama.cpp $t threads=$th"
    /usr/bin/time -f "peak_rss_kb %M wall %e" node "$root/tools/reference/llama-cpp/bench_decode.mjs" "gpt2-$t.gguf" "$th" 32 3 2>&1 |
      tail -3
  done
done
