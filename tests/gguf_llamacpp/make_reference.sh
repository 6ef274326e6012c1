#!/usr/bin/env bash
# llama.cpp's view of GGUF files the engine writes: tfm convert re-exports each
# llama.cpp-convention fixture (tools/reference/ref_gguf.py) with the engine's own writer,
# then llama.cpp (node-llama-cpp, tools/reference/llama-cpp) tokenizes the prompt, scores
# the ids and decodes greedily. tests/gguf_llamacpp/test_llamacpp_parity.cpp compares.
#   make_reference.sh TFM SOURCE_DIR FIXTURE_DIR
set -euo pipefail
tfm=$1 src=$2 fix=$3
export NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
ids=5,72,101,108,108,111,258,262,263,32,120
for arch in llama qwen2 gpt2; do
  "$tfm" convert -m "$fix/gguf_$arch.gguf" -o "$fix/tfm_$arch.gguf" --type f32 --name "tfm-$arch" >/dev/null
  node "$src/tools/reference/llama-cpp/run_gguf.mjs" "$fix/tfm_$arch.gguf" "hello the world" "$ids" 8 \
    "$fix/llamacpp_$arch.json"
done
echo "llama.cpp reference for llama, qwen2, gpt2 in $fix"
