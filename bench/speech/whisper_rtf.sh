#!/usr/bin/env bash
# Whisper transcription speed side by side: the real-time factor (wall seconds / audio seconds) of
# `tfm transcribe` (f32 and q8_0 weights) and of the same f32 weights in PyTorch 1.13
# (bench/peers/torch/bench_torch_whisper.py), on 30 s and 5 min of espeak-ng speech, at each thread
# count; then the log-mel front end alone (`tfm mel` against torch.stft and torchaudio).
#   bench/speech/whisper_rtf.sh TFM [SIZES] [THREADS]     e.g.  bench/speech/whisper_rtf.sh build/bin/tfm "tiny base" "1 2"
# (from anywhere; run it alone on the machine: flock /tmp/heavy.lock bench/speech/whisper_rtf.sh ...)
# Environment (defaults in brackets):
#   LONG_SIZES  the sizes also run on the 5-minute file [tiny] (base at 5 min adds ~10 minutes on 2 cores)
#   WORK        models, audio and raw results [build/bench-whisper]
#   PYTHON      a Python with torch and torchaudio [/usr/bin/python3]
#
# Models: random weights in the hub layout, whisper-tiny.en's and whisper-base.en's shapes (tiny: d_model
# 384, 4 + 4 layers, 6 heads, ffn 1536; base: 512, 6 + 6, 8 heads, ffn 2048; 80 mels, vocabulary 51864),
# written once by `bench_torch_whisper.py make` into $WORK/whisper-SIZE (f32). Audio: espeak-ng sentences
# concatenated with sox, resampled to 16 kHz mono 16-bit, repeated and cut to exactly 30 s / 300 s.
#
# Fixed work on both sides. tfm runs
#   OMP_WAIT_POLICY=passive tfm -t N transcribe -m DIR AUDIO --beam-size 1 [--dtype q8_0] --no-timestamps
#       --temperature 0 --no-condition-on-previous-text --format json
# (--beam-size 1: greedy, tfm's default being whisper's 5 beams; --temperature 0 alone: no fallback
# decoding; --no-condition-on-previous-text: every window's prompt is
# [<|startoftranscript|>, <|notimestamps|>], without it windows after the first would be prompted with up to
# 223 previous tokens and decode fewer). tfm stops a window at <|endoftext|> or after 224 tokens and applies
# suppress_tokens / begin_suppress_tokens; with random weights it runs to 224. The tokens it kept per window
# (segments[].tokens of the json: one segment per window without timestamps) set the PyTorch side's
# --tokens: K = the count, or the count + 1 where the window ended at <|endoftext|> (tfm computed that
# token's logits too), so both run the prompt step and the same number of one-token decoder steps. The
# PyTorch side does not suppress or stop: it takes the argmax K times; its tokens are compared with tfm
# f32's ("agree": tokens equal before the first difference, summed over windows) as a check that both run
# the same model. The windows are checked to be samples / 160 / 3000 rounded up (a window skipped as
# silence or dropped as empty text would break the count; the table says so).
#
# Times: tfm's is the whole command (/usr/bin/time: process start, reading and converting the weights
# (q8_0 quantizes at load), reading the audio, mel, encoder, decoder, writing json). PyTorch's "compute" is
# measured inside the process from the samples in memory to the last token (mel + encoder + decoder), the
# weights already read; "process" is its whole command (interpreter start and `import torch` included).
# torch/tfm = PyTorch compute / tfm wall: the ratio that leaves PyTorch's fixed costs out and keeps tfm's.
set -euo pipefail
tfm=$(realpath "${1:?usage: whisper_rtf.sh TFM [SIZES] [THREADS]}")
read -r -a sizes <<<"${2:-tiny base}"
read -r -a threads <<<"${3:-1 2}"
long_sizes=" ${LONG_SIZES:-tiny} "
root=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-/usr/bin/python3}
peer=$root/bench/peers/torch/bench_torch_whisper.py
work=${WORK:-$root/build/bench-whisper}
mkdir -p "$work"
work=$(realpath "$work")
res=$work/results-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$res"
tsv=$res/table.tsv

# ---- models and audio -----------------------------------------------------------------------------
for s in "${sizes[@]}"; do
  case $s in tiny | base) ;; *) echo "size must be tiny or base, not '$s'" >&2; exit 2 ;; esac
  [ -f "$work/whisper-$s/model.safetensors" ] || "$py" "$peer" make "$work/whisper-$s" "$s" >&2
done
sentences=(
  "The quick brown fox jumps over the lazy dog, and the dog does not seem to mind at all."
  "A journey of a thousand miles begins with a single step, or so the old saying goes."
  "Speech recognition turns spoken words into text, one thirty second window at a time."
  "She sells sea shells by the sea shore, and the shells she sells are surely sea shells."
  "The weather today will be cloudy in the morning, with a chance of rain in the afternoon."
  "Please remember to bring your notebook, a pencil, and something to drink to the meeting."
  "In the beginning the universe was created, which made a lot of people very angry."
  "The train to the city leaves at seven fifteen, and the next one comes an hour later."
)
if [ ! -f "$work/speech-300s.wav" ] || [ ! -f "$work/speech-30s.wav" ]; then
  tmp=$(mktemp -d)
  parts=()
  for i in "${!sentences[@]}"; do
    espeak-ng -v en-us -s 165 -w "$tmp/s$i.wav" "${sentences[$i]}"
    parts+=("$tmp/s$i.wav")
  done
  sox "${parts[@]}" -r 16000 -c 1 -b 16 -e signed-integer "$tmp/all.wav"
  one=$(soxi -D "$tmp/all.wav")
  for secs in 30 300; do
    reps=$("$py" -c "import math; print(max(0, math.ceil($secs / $one) - 1))")
    sox "$tmp/all.wav" "$work/speech-${secs}s.wav" repeat "$reps" trim 0 "$secs"
    n=$(soxi -s "$work/speech-${secs}s.wav")
    [ "$n" -eq $((secs * 16000)) ] || { echo "speech-${secs}s.wav has $n samples, not $((secs * 16000))" >&2; exit 1; }
  done
  rm -rf "$tmp"
fi

# ---- the machine ------------------------------------------------------------------------------------
echo "== $(date -u '+%F %T UTC')  $(uname -n)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
echo "   flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512[a-z_0-9]*|amx[a-z_0-9]*)$' | tr '\n' ' ')"
echo "   $("$tfm" --version 2>&1 | head -1); $("$py" -c 'import torch, torchaudio; print("torch", torch.__version__, "torchaudio", torchaudio.__version__)')"
echo "   uptime:$(uptime)"
echo "   raw results: $res"

# ---- transcription ----------------------------------------------------------------------------------
# Greedy decoding: since f935f3e tfm transcribe defaults to 5-beam search at temperature 0 (whisper's command
# line); a binary without --beam-size is greedy already.
greedy=()
if "$tfm" transcribe --help 2>&1 | grep -q -- --beam-size; then greedy=(--beam-size 1); fi
printf 'size\taudio\tthreads\tengine\twall_s\trtf\twindows\ttokens\tagree\tnote\n' >"$tsv"
jq_py() { "$py" -c "$1" "${@:2}"; }

for secs in 30 300; do
  audio=$work/speech-${secs}s.wav
  for s in "${sizes[@]}"; do
    if [ "$secs" = 300 ] && [[ $long_sizes != *" $s "* ]]; then
      printf '%s\t%ss\t-\t(skipped)\t\t\t\t\t\tnot in LONG_SIZES\n' "$s" "$secs" >>"$tsv"
      continue
    fi
    dir=$work/whisper-$s
    for th in "${threads[@]}"; do
      tag=$s-${secs}s-t$th
      tfm_wall_f32=
      for dt in f32 q8_0; do
        out=$res/$tag-tfm-$dt
        extra=("${greedy[@]}")
        [ "$dt" = f32 ] || extra+=(--dtype "$dt")
        echo "-- tfm $dt $s ${secs}s threads=$th $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        set +e
        OMP_WAIT_POLICY=passive /usr/bin/time -f %e -o "$out.time" "$tfm" -t "$th" transcribe -m "$dir" "$audio" "${extra[@]}" \
          --no-timestamps --temperature 0 --no-condition-on-previous-text --format json >"$out.json" 2>"$out.err"
        rc=$?
        set -e
        if [ $rc -ne 0 ]; then
          echo "!! tfm $dt $s ${secs}s threads=$th failed (exit $rc):" >&2
          tail -20 "$out.err" >&2
          printf '%s\t%ss\t%s\ttfm %s\t\t\t\t\t\tFAILED exit %s\n' "$s" "$secs" "$th" "$dt" "$rc" >>"$tsv"
          continue
        fi
        wall=$(tail -1 "$out.time")
        # windows, tokens kept per window, the torch side's K per window, and a note
        read -r windows tokens ks note < <(jq_py '
import json, sys, math
d = json.load(open(sys.argv[1])); secs = int(sys.argv[2])
want = math.ceil(secs * 16000 // 160 / 3000)
kept = [len(x["tokens"]) for x in d["segments"]]
ks = [n if n >= 224 else n + 1 for n in kept]
note = "ok" if len(kept) == want else f"{len(kept)}-segments-for-{want}-windows"
if len(kept) != want: ks = [224]
short = [n for n in kept if n < 224]
if short: note += f",{len(short)}-windows-ended-early(min-{min(short)})"
print(len(kept), sum(kept), ",".join(map(str, ks)), note)' "$out.json" "$secs")
        rtf=$(jq_py "print(f'{$wall / $secs:.4f}')")
        printf '%s\t%ss\t%s\ttfm %s\t%s\t%s\t%s\t%s\t\t%s\n' "$s" "$secs" "$th" "$dt" "$wall" "$rtf" "$windows" "$tokens" "$note" >>"$tsv"
        if [ "$dt" = f32 ]; then
          tfm_wall_f32=$wall
          torch_ks=$ks
          cp "$out.json" "$res/$tag-tfm-tokens.json"
        fi
      done
      [ -n "$tfm_wall_f32" ] || { torch_ks=224; echo "!! no tfm f32 token counts for $tag: torch decodes 224 a window" >&2; }
      out=$res/$tag-torch-f32
      echo "-- torch f32 $s ${secs}s threads=$th tokens=$torch_ks $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
      /usr/bin/time -f %e -o "$out.time" "$py" "$peer" run "$dir" "$audio" --threads "$th" --tokens "$torch_ks" \
        --dump-tokens "$out.tokens.json" >"$out.json" 2>"$out.err" || { tail -20 "$out.err" >&2; exit 1; }
      proc=$(tail -1 "$out.time")
      jq_py '
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
mine = json.load(open(sys.argv[2]))
try:
    theirs = [x["tokens"] for x in json.load(open(sys.argv[3]))["segments"]]
except OSError:
    theirs = []
agree = 0
for a, b in zip(mine, theirs):
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    agree += n
size, secs, th, proc = sys.argv[4:8]
note = "process {} s (load {load_s:.2f}), mel {mel_s:.2f} enc {encoder_s:.2f} dec {decoder_s:.2f}".format(proc, **r)
print("\t".join([size, secs + "s", th, "torch f32", "%.2f" % r["seconds"], "%.4f" % r["rtf"], str(r["windows"]),
                 str(r["tokens"]), "%d/%d" % (agree, sum(map(len, theirs))), note]))' \
        "$out.json" "$out.tokens.json" "$res/$tag-tfm-tokens.json" "$s" "$secs" "$th" "$proc" >>"$tsv"
    done
  done
done

# ---- the table ----------------------------------------------------------------------------------------
echo
echo "== transcription (wall s: tfm = whole command, torch = in-process compute; rtf = wall / audio s)"
jq_py '
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
hdr = ["size", "audio", "thr", "engine", "wall_s", "rtf", "windows", "tokens", "agree", "torch/tfm", "note"]
out = [hdr]
for r in rows:
    ratio = ""
    if r[3].startswith("tfm") and r[4]:
        t = next((x for x in rows if x[:3] == r[:3] and x[3] == "torch f32" and x[4]), None)
        if t:
            ratio = f"{float(t[4]) / float(r[4]):.2f}x"
    out.append(r[:9] + [ratio, r[9]])
w = [max(len(row[i]) for row in out) for i in range(len(hdr) - 1)]
for row in out:
    print("  ".join(c.ljust(w[i]) for i, c in enumerate(row[:-1])) + "  " + row[-1])
' "$tsv"

# ---- the mel front end alone ---------------------------------------------------------------------------
echo
echo "== log-mel of speech-300s.wav (80 x 30000): tfm mel = whole command (process start, reading the WAV, writing"
echo "   the 9.6 MB .npy); the same command on 1 s of audio shows its fixed cost. torch = in process, the samples"
echo "   in memory, best of 3 after a warm-up."
sox "$work/speech-30s.wav" "$res/speech-1s.wav" trim 0 1
for th in "${threads[@]}"; do
  OMP_WAIT_POLICY=passive /usr/bin/time -f %e -o "$res/mel-t$th.time" "$tfm" -t "$th" mel "$work/speech-300s.wav" -o "$res/mel-300s.npy" 2>/dev/null
  OMP_WAIT_POLICY=passive /usr/bin/time -f %e -o "$res/mel1-t$th.time" "$tfm" -t "$th" mel "$res/speech-1s.wav" -o "$res/mel-1s.npy" 2>/dev/null
  "$py" "$peer" mel "$work/speech-300s.wav" --threads "$th" --compare "$res/mel-300s.npy" >"$res/mel-torch-t$th.json"
  jq_py '
import json, sys
r = json.load(open(sys.argv[1]))
tfm300, tfm1, th = float(open(sys.argv[2]).read().split()[-1]), float(open(sys.argv[3]).read().split()[-1]), sys.argv[4]
print(("  threads {}: tfm mel {:.3f} s (1-s file: {:.3f} s)   torch.stft {stft_s:.3f} s   torchaudio {torchaudio_s:.3f} s"
       "   max |torch.stft - tfm| {stft_max_abs_diff_vs_npy:.2e}, |torchaudio - tfm| {torchaudio_max_abs_diff_vs_npy:.2e}")
      .format(th, tfm300, tfm1, **r))' \
    "$res/mel-torch-t$th.json" "$res/mel-t$th.time" "$res/mel1-t$th.time" "$th"
done
echo
echo "   uptime at the end:$(uptime)"
