#!/usr/bin/env bash
# Quantized decode side by side (docs/benchmarks.md, "Quantized decode"): tfm bench decode and
# llama.cpp (node-llama-cpp's prebuilt CPU build, tools/reference/llama-cpp/bench_decode.mjs) on
# the same GGUF files, one per weight type; peak RSS of each run.
#   bench/quant/decode_vs_llamacpp.sh [WORKDIR]     (run from the repository root, after a build)
# Environment (defaults in brackets):
#   MODEL    gpt2 (GPT-2 size, 124M) or llama1b (TinyLlama's shape: 22 layers, d 2048, 32 heads,
#            4 KV heads, FFN 5632, vocabulary 32000; 1.1B) [gpt2]
#   TYPES    weight types [f32 bf16 q8_0 q4_0 q4_k]
#   THREADS  thread counts [1 2]
#   REPS     timed runs per figure after a warm-up, best reported [3]
#   ENGINES  which engines to run [tfm llama.cpp]
#   LLAMA_CPU  llama.cpp's CPU build to load, e.g. haswell (AVX2 + FMA + F16C) on an AVX-512
#            machine, to compare with TFM_ISA=avx2 [the best this CPU runs]. ggml loads the
#            highest-scoring libggml-cpu-*.so it finds, so the copy in WORKDIR keeps only that one.
# gpt2 with the defaults takes about 6 minutes on a quiet 2-core machine. llama1b is ~9x larger
# (the f32 file is 4.4 GB): run it one type and thread count at a time, e.g.
#   MODEL=llama1b TYPES=q4_k THREADS=1 REPS=2 flock /tmp/heavy.lock bench/quant/decode_vs_llamacpp.sh
# (the first call writes the files: ~1 minute for the random hub directory, ~1 minute per type).
set -euo pipefail
# OpenMP waiting is left to tfm (a bounded spin on an idle machine: src/base/process.cpp);
# llama.cpp runs its own thread pool.
root=$(pwd)
bin=$root/build/bin
work=${1:-/tmp/tfm-quant-bench}
model=${MODEL:-gpt2}
read -r -a types <<<"${TYPES:-f32 bf16 q8_0 q4_0 q4_k}"
read -r -a threads <<<"${THREADS:-1 2}"
reps=${REPS:-3}
engines=" ${ENGINES:-tfm llama.cpp} "
case $model in gpt2 | llama1b) ;; *) echo "MODEL must be gpt2 or llama1b, not '$model'" >&2; exit 2 ;; esac
mkdir -p "$work"
cd "$work"
# Random f32 weights in hub layout (bench_load write), a small BPE tokenizer (the GGUF writer pads
# the vocabulary to the model's size with unused tokens), then one GGUF per type.
[ -f "hub/$model/config.json" ] || "$bin/bench_load" write "hub/$model" "$model"
[ -f "hub/$model/tokenizer.json" ] ||
  "$bin/tfm" tokenizer train --type bpe --vocab-size 1000 --input "$root/data/tinyshakespeare.txt" -o "hub/$model/tokenizer.json"
for t in "${types[@]}"; do
  [ -f "$model-$t.gguf" ] || "$bin/tfm" -t 2 quantize -m "hub/$model" -o "$model-$t.gguf" --type "$t"
done
llama_dir=$root/tools/reference/llama-cpp
if [ -n "${LLAMA_CPU:-}" ]; then
  bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  [ -f "$llama_dir/$bins/libggml-cpu-$LLAMA_CPU.so" ] || { echo "no llama.cpp CPU build '$LLAMA_CPU' in $llama_dir/$bins" >&2; exit 2; }
  rm -rf "llama-cpp-$LLAMA_CPU"
  cp -r "$llama_dir" "llama-cpp-$LLAMA_CPU"
  find "llama-cpp-$LLAMA_CPU/$bins" -name 'libggml-cpu-*.so' ! -name "libggml-cpu-$LLAMA_CPU.so" -delete
  llama_dir=$(pwd)/llama-cpp-$LLAMA_CPU
fi
for th in "${threads[@]}"; do
  for t in "${types[@]}"; do
    if [[ $engines == *" tfm "* ]]; then
      echo "=== tfm $model $t threads=$th $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
      /usr/bin/time -f "peak_rss_kb %M wall %e" "$bin/tfm" -t "$th" bench decode -m "$model-$t.gguf" --model-only --no-torch \
        --min-reps "$reps" --min-time 0 2>&1 | grep -v '^\s*$'
    fi
    if [[ $engines == *" llama.cpp "* ]]; then
      echo "=== llama.cpp $model $t threads=$th $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
      /usr/bin/time -f "peak_rss_kb %M wall %e" node "$llama_dir/bench_decode.mjs" "$model-$t.gguf" "$th" 32 "$reps" 2>&1 |
        tail -3
    fi
  done
done
