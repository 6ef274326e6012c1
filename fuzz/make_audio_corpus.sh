#!/usr/bin/env bash
# The audio fuzz target's seeds (fuzz/corpus/audio): short sounds in each container and
# encoding libsndfile reads, made with sox (Debian's sox package). Run once; the files are
# committed.
set -euo pipefail
out=$(dirname "$0")/corpus/audio
mkdir -p "$out"
s() { sox -n "$@" synth 0.04 sine 440 sine 1000 remix -; }
s -r 8000 -b 16 -c 1 "$out/pcm16_8k.wav"
s -r 11025 -b 8 -c 1 -e unsigned "$out/u8.wav"
sox -n -r 16000 -b 24 -c 2 "$out/stereo24.wav" synth 0.03 sine 300 sine 500
sox -n -r 8000 -b 32 -e floating-point -c 1 "$out/float.wav" synth 0.03 sine 200
s -r 8000 -c 1 "$out/tone.flac"
s -r 8000 -c 1 "$out/tone.ogg"
s -r 8000 -b 16 -c 1 "$out/tone.aiff"
sox -n -r 8000 -e u-law -c 1 "$out/ulaw.wav" synth 0.03 sine 700
