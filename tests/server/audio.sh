#!/bin/bash
# OpenAI's audio API end to end, on the loopback address only: `tfm serve` with a Whisper hub
# directory (random weights, tools/reference/ref_whisper.py) answers tests/server/audio.js,
# which uploads speech (espeak-ng, converted by sox) through the official `openai` npm client's
# audio.transcriptions.create in every response format; each answer equals `tfm transcribe`'s
# for the same file; bad uploads are 4xx and the server keeps serving.
#   usage: audio.sh TFM SOURCE_DIR NODE
set -euo pipefail
TFM=$1 SRC=$2 NODE=${3:-node}
export OMP_WAIT_POLICY=passive
DIR=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$DIR"; }
trap cleanup EXIT
trap 'echo "FAIL: audio.sh line $LINENO: $BASH_COMMAND"' ERR
(cd "$SRC/tools/reference" && /usr/bin/python3 -c "import sys; sys.path.insert(0, '.'); import ref_whisper; ref_whisper.make(sys.argv[1])" "$DIR")
mv "$DIR/hub/whisper_en" "$DIR/whisper"
espeak-ng -v en-us -s 150 -w "$DIR/speech22k.wav" "Speech recognition through the audio API."
sox "$DIR/speech22k.wav" -r 44100 -c 2 "$DIR/speech.flac"
head -c 3000 /dev/urandom > "$DIR/noise.mp3"
# What the CLI says about the same file, for the client to compare with.
for fmt in txt srt vtt json; do
  "$TFM" -t 1 transcribe -m "$DIR/whisper" "$DIR/speech.flac" --beam-size 2 --best-of 1 --format $fmt > "$DIR/cli.$fmt" 2> /dev/null
done
"$TFM" -t 1 transcribe -m "$DIR/whisper" "$DIR/speech.flac" --beam-size 2 --best-of 1 --format json --word-timestamps \
  > "$DIR/cli.words.json" 2> /dev/null
source "$SRC/tests/server/start_server.sh"
# (A narrow search: the random model falls back through every temperature on each request.)
start audio whisper --max-upload-bytes 400000 --beam-size 2 --best-of 1
"$NODE" "$SRC/tests/server/audio.js" "http://127.0.0.1:$PORT" "$SRC/tools/reference/openai" "$DIR"
