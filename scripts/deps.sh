#!/usr/bin/env bash
# Install the build and test dependencies from Debian 12's packages, only those missing.
# Idempotent: a second run installs nothing. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev                            # fp32 GEMM: oneDNN's dnnl_sgemm (docs/benchmarks.md: why)
  libopenblas-dev libopenblas0-pthread libblis-openmp-dev  # the other BLAS candidates (bench/blas, TFM_BLAS=openblas)
  nlohmann-json3-dev libcli11-dev        # config/format parsing, CLI
  libgtest-dev libbenchmark-dev          # tests, benchmarks
  python3 python3-torch python3-numpy    # PyTorch reference for parity tests (tools/reference)
  nodejs npm                             # tiktoken reference for tokenizer parity
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
