#!/usr/bin/env bash
# Speech from the command line on a Whisper hub directory with random weights (written at test
# time by tools/reference/ref_whisper.py, the parity reference): speech spoken by espeak-ng and
# converted by sox into WAV, FLAC and Ogg/Vorbis at other rates and channel counts, and by lame
# into MP3. tfm mel
# writes .npy files NumPy reads ([n_mels, frames], the 30-s window with --window) and reads
# every container to the same features; tfm transcribe gives txt, srt, vtt and json with
# ordered times, one segment per window without timestamps, several windows (and progress on
# stderr) for long audio, the same output for the same file in any container; q8_0 weights
# run; tfm wer prints jiwer's figures; a file that is not audio, a text model and an
# English-only model asked to translate are one-line errors. tfm train (task speech) on a tiny
# corpus made by tools/speech/make_speech_corpus.py writes a WER and a directory tfm transcribe reads.
#   usage: speech_commands.sh TFM SOURCE_DIR
set -euo pipefail
TFM=$1 SRC=$2
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export OMP_WAIT_POLICY=passive

(cd "$SRC/tools/reference" && /usr/bin/python3 -c "import sys; sys.path.insert(0, '.'); import ref_whisper; ref_whisper.make(sys.argv[1])" "$DIR") \
  || fail "ref_whisper.py"
M=$DIR/hub/whisper_en
espeak-ng -v en-us -s 150 -w "$DIR/speech22k.wav" "The quick brown fox jumps over the lazy dog."
sox "$DIR/speech22k.wav" -r 16000 "$DIR/speech.wav"
sox "$DIR/speech22k.wav" -r 44100 -c 2 "$DIR/speech.flac"
sox "$DIR/speech22k.wav" -r 16000 "$DIR/speech.ogg"
lame --quiet -b 64 "$DIR/speech.wav" "$DIR/speech.mp3"

# ---- tfm mel --------------------------------------------------------------------------------
"$TFM" mel "$DIR/speech.wav" -o "$DIR/wav.npy" 2> "$DIR/mel.err" || { cat "$DIR/mel.err"; fail "tfm mel"; }
grep -q "16000 Hz (1 ch" "$DIR/mel.err" || fail "tfm mel report: $(cat "$DIR/mel.err")"
"$TFM" mel "$DIR/speech.flac" -o "$DIR/flac.npy" 2> "$DIR/mel.err" || { cat "$DIR/mel.err"; fail "tfm mel flac"; }
grep -q "44100 Hz (2 ch, FLAC" "$DIR/mel.err" || fail "tfm mel flac report: $(cat "$DIR/mel.err")"
"$TFM" mel "$DIR/speech.ogg" -o "$DIR/ogg.npy" 2> /dev/null || fail "tfm mel ogg"
"$TFM" mel "$DIR/speech.mp3" -o "$DIR/mp3.npy" 2> "$DIR/mel.err" || { cat "$DIR/mel.err"; fail "tfm mel mp3"; }
grep -q "MPEG" "$DIR/mel.err" || fail "tfm mel mp3 report: $(cat "$DIR/mel.err")"
"$TFM" mel "$DIR/speech.wav" -o "$DIR/window.npy" --window -m "$M" 2> /dev/null || fail "tfm mel --window"
"$TFM" mel "$DIR/speech.wav" -o "$DIR/m128.npy" --n-mels 128 2> /dev/null || fail "tfm mel --n-mels"
/usr/bin/python3 - "$DIR" <<'PY' || fail "the .npy files"
import sys, numpy as np
d = sys.argv[1]
wav, flac, ogg, mp3, win, m128 = (np.load(f"{d}/{n}.npy") for n in ("wav", "flac", "ogg", "mp3", "window", "m128"))
assert wav.dtype == np.float32 and wav.ndim == 2 and wav.shape[0] == 80, wav.shape
assert m128.shape[0] == 128 and m128.shape[1] == wav.shape[1], m128.shape
assert win.shape == (80, 3000), win.shape
assert abs(flac.shape[1] - wav.shape[1]) <= 1 and abs(ogg.shape[1] - wav.shape[1]) <= 1
n = min(wav.shape[1], flac.shape[1], ogg.shape[1])
# The same speech through another rate and container: close features (resampling and the lossy
# codec move them slightly; the dynamic range is 2.0).
assert np.abs(flac[:, :n] - wav[:, :n]).mean() < 0.02, np.abs(flac[:, :n] - wav[:, :n]).mean()
assert np.abs(ogg[:, :n] - wav[:, :n]).mean() < 0.05, np.abs(ogg[:, :n] - wav[:, :n]).mean()
# MP3 adds the encoder's delay (lame: ~1,100 samples of padding at the start): compare the best shift.
m = min(mp3.shape[1], wav.shape[1]) - 20
err = min(np.abs(mp3[:, s:s + m] - wav[:, :m]).mean() for s in range(0, 15))
assert err < 0.08, err
assert np.allclose(win[:, :wav.shape[1] - 2], wav[:, :wav.shape[1] - 2], atol=0.5)
PY
echo "mel: wav/flac/ogg/mp3 features agree; --window gives 3000 frames"

# ---- tfm transcribe ---------------------------------------------------------------------------
# (One temperature: the random model fails every fallback test, and each would decode again.)
for fmt in txt srt vtt json; do
  "$TFM" -t 1 transcribe -m "$M" "$DIR/speech.wav" --temperature 0 --format $fmt > "$DIR/out.$fmt" 2> "$DIR/tr.err" || { cat "$DIR/tr.err"; fail "transcribe --format $fmt"; }
  [ -s "$DIR/out.$fmt" ] || fail "empty $fmt output"
done
head -1 "$DIR/out.srt" | grep -qx 1 || fail "srt numbering: $(head -3 "$DIR/out.srt")"
grep -qE '^00:00:[0-9]{2},[0-9]{3} --> [0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]{3}$' "$DIR/out.srt" || fail "srt times"
head -1 "$DIR/out.vtt" | grep -qx WEBVTT || fail "vtt header"
grep -qE '^00:00:[0-9]{2}\.[0-9]{3} --> ' "$DIR/out.vtt" || fail "vtt times"
/usr/bin/python3 - "$DIR/out.json" <<'PY' || fail "json transcript"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["language"] == "english" and 2.5 < t["duration"] < 4.5, t["duration"]
segs = t["segments"]
assert segs and all(s["start"] < s["end"] for s in segs)
assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(segs, segs[1:])), "segments overlap"
assert all(x >= 50363 for s in segs for x in s["tokens"][:1]), "a timestamped segment starts with a timestamp"
assert t["text"].strip() == "".join(s["text"] for s in segs).strip()
PY
"$TFM" -t 1 transcribe -m "$M" "$DIR/speech.wav" --temperature 0 --format json --no-timestamps > "$DIR/nots.json" 2> /dev/null
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); s = t["segments"]
assert len(s) == 1 and s[0]["start"] == 0 and all(x < 50363 or x > 50363 for x in s[0]["tokens"]), s' "$DIR/nots.json" \
  || fail "--no-timestamps gives one segment per window"
# Word timestamps: each segment's words (whisper's shape: the text as the tokens spell it, times,
# probability) and OpenAI's list of them (trimmed), in time order within each segment. (What
# the words are is the parity test's: a random model's segments come and go as their bounds
# are fitted to their words.)
"$TFM" -t 1 transcribe -m "$M" "$DIR/speech.wav" --temperature 0 --format json --word-timestamps > "$DIR/words.json" 2> /dev/null \
  || fail "transcribe --word-timestamps"
/usr/bin/python3 - "$DIR/words.json" "$DIR/out.json" <<'PY' || fail "word timestamps"
import json, sys
t, plain = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
words = [w for s in t["segments"] for w in s.get("words", [])]
assert words and len(t["words"]) == len(words), (len(words), t.get("words"))
assert all(w["start"] <= w["end"] and 0 <= w["probability"] <= 1 for w in words), words
assert all(set(w) == {"word", "start", "end"} for w in t["words"]), t["words"][:3]
assert [w["word"] for w in t["words"]] == [w["word"].strip() for w in words] and all(w["word"] for w in words)
for s in t["segments"]:
    starts = [w["start"] for w in s.get("words", [])]
    assert starts == sorted(starts), s
PY
# The same samples in another container give the same transcript (a 16 kHz FLAC: lossless).
sox "$DIR/speech.wav" "$DIR/speech16.flac"
"$TFM" -t 1 transcribe -m "$M" "$DIR/speech16.flac" --temperature 0 > "$DIR/flac.txt" 2> /dev/null
cmp -s "$DIR/out.txt" "$DIR/flac.txt" || fail "a lossless FLAC of the WAV transcribes differently"
# q8_0 weights (the rows of 16 fall back to f16) run the same path.
"$TFM" -t 1 transcribe -m "$M" "$DIR/speech.wav" --temperature 0 --dtype q8_0 > /dev/null 2>&1 || fail "transcribe --dtype q8_0"
echo "transcribe: txt, srt, vtt, json; --no-timestamps; --word-timestamps; FLAC == WAV; q8_0"

# Long audio: 72 s (speech, silence, speech) is three windows, with progress on stderr; the
# temperature fallback runs here (every window falls back to 1.0 on this model).
sox "$DIR/speech.wav" "$DIR/pad.wav" pad 0 31
sox "$DIR/pad.wav" "$DIR/pad.wav" "$DIR/speech.wav" "$DIR/long.wav"
"$TFM" -t 1 transcribe -m "$M" "$DIR/long.wav" --beam-size 2 --best-of 2 --format json > "$DIR/long.json" 2> "$DIR/long.err" || { cat "$DIR/long.err"; fail "long-form"; }
grep -q "long.wav: 30 / 7[1-4] s" "$DIR/long.err" || fail "no progress on stderr: $(cat "$DIR/long.err")"
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); s = t["segments"]
assert 70 < t["duration"] < 74 and max(x["start"] for x in s) >= 30, [(x["start"], x["end"]) for x in s]
assert all(a["seek"] <= b["seek"] for a, b in zip(s, s[1:]))
assert all(x["temperature"] == 1.0 for x in s), [x["temperature"] for x in s]' "$DIR/long.json" || fail "long-form windows"
echo "transcribe: 71 s in several windows, progress shown"

# ---- errors -----------------------------------------------------------------------------------
echo "not audio" > "$DIR/notes.wav"
if "$TFM" transcribe -m "$M" "$DIR/notes.wav" 2> "$DIR/err"; then fail "a text file was transcribed"; fi
grep -q "notes.wav.*not a readable audio file" "$DIR/err" || fail "bad file message: $(cat "$DIR/err")"
[ "$(wc -l < "$DIR/err")" -eq 1 ] || fail "more than one line: $(cat "$DIR/err")"
if "$TFM" transcribe -m "$M" "$DIR/speech.wav" --task translate 2> "$DIR/err"; then fail "an English-only model translated"; fi
grep -q "English-only model cannot translate" "$DIR/err" || fail "translate message: $(cat "$DIR/err")"
if "$TFM" mel "$DIR/notes.wav" -o "$DIR/x.npy" 2> "$DIR/err"; then fail "tfm mel read a text file"; fi
[ ! -e "$DIR/x.npy" ] || fail "tfm mel wrote a file for bad input"
echo "errors: bad audio, translation on an English-only model"

# ---- tfm wer ----------------------------------------------------------------------------------
printf 'i love cats\nhello world\n' > "$DIR/ref.txt"
printf 'i hate cats\nhello\n' > "$DIR/hyp.txt"
"$TFM" wer "$DIR/ref.txt" "$DIR/hyp.txt" > "$DIR/wer.txt"
grep -q "^WER 40.00% (5 words: 1 substitutions, 1 deletions, 0 insertions)" "$DIR/wer.txt" || fail "wer: $(cat "$DIR/wer.txt")"
printf 'Hello, World!\n' > "$DIR/ref.txt"
printf 'hello world\n' | "$TFM" wer "$DIR/ref.txt" --normalize basic --json > "$DIR/wer.json"
/usr/bin/python3 -c 'import json, sys; w = json.load(open(sys.argv[1])); assert w["wer"]["rate"] == 0 and w["cer"]["rate"] == 0, w' "$DIR/wer.json" \
  || fail "wer --normalize basic: $(cat "$DIR/wer.json")"
echo "wer: jiwer's counts; basic normalisation"
# ---- tfm train (task speech) --------------------------------------------------------------------
# A tiny corpus from tools/speech (espeak-ng + sox), a few steps with the joint CTC loss: the run
# writes the WER, and its directory is a Whisper hub layout tfm transcribe reads (the front end,
# the decoding rules).
/usr/bin/python3 "$SRC/tools/speech/make_speech_corpus.py" "$DIR/corpus" --train 24 --test 4 --jobs 1 2> /dev/null \
  || fail "make_speech_corpus.py"
cat > "$DIR/speech.json" <<JSON
{ "task": "speech", "seed": 3,
  "model": { "model_type": "whisper", "num_mel_bins": 80, "d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
             "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
             "max_target_positions": 64 },
  "tokenizer": { "kind": "bpe", "vocab_size": 300 },
  "data": { "train": "$DIR/corpus/train.tsv", "test": "$DIR/corpus/test.tsv", "chunk_length": 6,
            "spec_augment": { "time_masks": 1, "time_width": 10, "freq_masks": 1, "freq_width": 5 } },
  "training": { "batch_size": 4, "max_steps": 4, "ctc_weight": 0.3 },
  "eval": { "every": 4, "log_every": 2, "wer_examples": 4, "beam": 2, "ctc_weight": 0.5 } }
JSON
"$TFM" -t 1 train "$DIR/speech.json" --out "$DIR/asr" > "$DIR/asr.log" 2>&1 || { cat "$DIR/asr.log"; fail "train task speech"; }
grep -q '"split":"val".*"ctc_wer".*"wer"' "$DIR/asr/metrics.jsonl" || fail "no wer and ctc_wer in metrics.jsonl: $(cat "$DIR/asr/metrics.jsonl")"
for f in preprocessor_config.json generation_config.json tokenizer.json config.json model.safetensors; do
  [ -s "$DIR/asr/$f" ] || fail "the speech model directory has no $f"
done
grep -q '"chunk_length": 6' "$DIR/asr/preprocessor_config.json" || fail "chunk_length not saved"
"$TFM" -t 1 transcribe -m "$DIR/asr" "$DIR/corpus/test/000000.wav" --format json > "$DIR/asr.json" 2> "$DIR/err" \
  || { cat "$DIR/err"; fail "transcribe with the trained model"; }
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert "segments" in t and t["duration"] > 0' "$DIR/asr.json" \
  || fail "the trained model's transcript"
# Joint CTC/attention decoding reads the CTC head the run trained.
"$TFM" -t 1 transcribe -m "$DIR/asr" "$DIR/corpus/test/000000.wav" --ctc-weight 0.5 --beam-size 2 --format json \
  > "$DIR/asr-ctc.json" 2> "$DIR/err" || { cat "$DIR/err"; fail "transcribe --ctc-weight"; }
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); assert "segments" in t and t["duration"] > 0' "$DIR/asr-ctc.json" \
  || fail "the joint CTC/attention transcript"
# hop_length 320 (50 feature frames a second, half the encoder's positions) and windows packed
# with several clips and their timestamps: the saved front end says so, and the model
# transcribes with timestamps and word timings inside the file.
sed 's|"chunk_length": 6,|"chunk_length": 6, "hop_length": 320, "pack_fraction": 1, "timestamps_fraction": 1,|' "$DIR/speech.json" > "$DIR/hop.json"
"$TFM" -t 1 train "$DIR/hop.json" --out "$DIR/asr320" > "$DIR/asr320.log" 2>&1 || { cat "$DIR/asr320.log"; fail "train hop_length 320, packed"; }
grep -q '"hop_length": 320' "$DIR/asr320/preprocessor_config.json" || fail "hop_length not saved"
grep -q '"nb_max_frames": 300' "$DIR/asr320/preprocessor_config.json" || fail "nb_max_frames for hop 320"
grep -q '"max_source_positions": 150' "$DIR/asr320/config.json" || fail "max_source_positions for hop 320: $(cat "$DIR/asr320/config.json")"
"$TFM" -t 1 transcribe -m "$DIR/asr320" "$DIR/corpus/test/000000.wav" --format json --word-timestamps > "$DIR/asr320.json" 2> "$DIR/err" \
  || { cat "$DIR/err"; fail "transcribe with the hop-320 model"; }
/usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1]))
assert t["duration"] > 0 and all(w["end"] <= 6.0 for s in t["segments"] for w in s.get("words", [])), t' "$DIR/asr320.json" \
  || fail "the hop-320 model's transcript: $(cat "$DIR/asr320.json")"
# Decoding with a CTC head that was never trained is refused, naming the key.
sed 's|"ctc_weight": 0.3 }|"ctc_weight": 0 }|' "$DIR/speech.json" > "$DIR/noctc.json"
if "$TFM" train "$DIR/noctc.json" --out "$DIR/noctc" 2> "$DIR/err" > /dev/null; then fail "eval.ctc_weight without a CTC loss trained"; fi
grep -q "eval.ctc_weight.*training.ctc_weight" "$DIR/err" || fail "eval.ctc_weight message: $(cat "$DIR/err")"
# A wrong manifest is an error naming it.
printf 'missing.wav\thello\n' > "$DIR/bad.tsv"
sed "s|$DIR/corpus/test.tsv|$DIR/bad.tsv|" "$DIR/speech.json" > "$DIR/bad.json"
if "$TFM" train "$DIR/bad.json" --out "$DIR/bad" 2> "$DIR/err" > /dev/null; then fail "a missing clip trained"; fi
grep -q "missing.wav.*not a readable audio file" "$DIR/err" || fail "missing clip message: $(cat "$DIR/err")"
echo "train: task speech writes wer; its directory transcribes; hop_length 320 and packed windows"
echo "speech commands: ok"
