#!/usr/bin/env bash
# The main job on the built-in data. Until the trainer lands this builds the engine and runs
# its benchmark; it will train a small model on data/tinyshakespeare.txt and sample from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
JOBS=${JOBS:-$(nproc)}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$JOBS" --target tfm_cli
build/bin/tfm info
build/bin/tfm bench
