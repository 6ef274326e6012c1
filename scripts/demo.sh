#!/usr/bin/env bash
# The main job on the built-in data: build tfm, train a small character-level GPT on
# data/tinyshakespeare.txt (configs/shakespeare-gpt.json, a few minutes on 2 cores) and print a
# sample from it with `tfm generate`. The model directory, metrics.jsonl and curves.svg land in runs/shakespeare.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS" --target tfm_cli
build/bin/tfm info
build/bin/tfm train configs/shakespeare-gpt.json --out runs/shakespeare "$@"
echo "metrics: runs/shakespeare/metrics.jsonl   curves: runs/shakespeare/curves.svg"
# Run the trained model: KV-cache sampling, streamed as it is generated, with timings.
build/bin/tfm generate -m runs/shakespeare -p "ROMEO:" -n 300 --seed 1 --verbose
