#!/usr/bin/python3
"""Build a synthetic English speech corpus with espeak-ng + sox (seeded, reproducible).

Usage:
    /usr/bin/python3 tools/speech/make_speech_corpus.py OUT_DIR [--train N] [--test M]
                     [--seed S] [--jobs J] [--data data/cmn-eng.tsv]

Writes
    OUT_DIR/train/NNNNNN.wav, OUT_DIR/test/NNNNNN.wav   16 kHz mono 16-bit PCM, each <= 6 s
    OUT_DIR/train.tsv, OUT_DIR/test.tsv                  "train/000000.wav<TAB>transcript", no header
    OUT_DIR/voices.json                                  held-out scheme, summary, and every
                                                         utterance's settings

Text: the English column of data/cmn-eng.tsv (Tatoeba), whitespace collapsed, <= 12 words and
<= 70 characters, no digits, only ASCII letters, spaces and . , ? ! ' -; deduplicated on a
case- and punctuation-insensitive key. A seeded shuffle puts test sentences at the front and
train sentences at the back, so the two never share a sentence (under that key).

Voices: the test set only uses espeak-ng variants that never occur in train, plus one base
voice (en-us-nyc) that never occurs in train, and speeds/pitches from the edges of the range
while train uses the centre. Train is augmented (white/pink noise 10-30 dB SNR, reverb, tempo
0.9-1.1, gain); test gets milder, unseen augmentation (brown noise 20-35 dB SNR or clean,
gain only). See tools/speech/README.md and voices.json["scheme"].

Deterministic: every utterance's settings and noise come from numpy's SeedSequence
(seed, split, candidate index), sox runs with -R (repeatable) and -D (no dither), and the
output does not depend on --jobs.
"""

import argparse
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import wave

import numpy as np

SR = 16000
MAX_SEC = 6.0
MAX_WORDS = 12
MAX_CHARS = 70
ALLOWED = re.compile(r"^[A-Za-z .,?!'\-]+$")

# --- voice settings -------------------------------------------------------------------------
# Base voices: what `espeak-ng --voices=en` lists, minus the MBROLA ones (mb-*; the mbrola
# binary and voices are not installed).
TRAIN_VOICES = ["en", "en-us", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
                "en-gb-x-gbcwmd", "en-029"]
TEST_ONLY_VOICES = ["en-us-nyc"]

# Variants (`espeak-ng --voices=variant`). Left out everywhere, as unintelligible or too far
# from natural speech: whisper, whisperf, caleb (voicing 0 = whisper), Demonic, fast (unstable
# "fast_test"), announcer, robosoft..robosoft8, UniRobot, anikaRobot, RicishayMax,
# RicishayMax2, RicishayMax3 (robot / long-echo voices).
TEST_ONLY_VARIANTS = ["f4", "belinda", "steph2", "m4", "m7", "klatt3", "michel", "grandpa",
                      "iven2"]
TRAIN_VARIANTS = [
    # plain male/female/klatt family
    "m1", "m2", "m3", "m5", "m6", "m8", "f1", "f2", "f3", "f5",
    "klatt", "klatt2", "klatt4", "klatt5", "klatt6",
    # contributed variants
    "Alex", "Alicia", "Andrea", "Andy", "Annie", "AnxiousAndy", "Denis", "Diogo", "Gene",
    "Gene2", "Henrique", "Hugo", "Jacky", "Lee", "Marco", "Mario", "Michael", "Mike",
    "Mr serious", "Nguyen", "Storm", "Tweaky", "adam", "anika", "antonio", "aunty",
    "benjamin", "boris", "croak", "david", "ed", "edward", "edward2", "grandma", "gustave",
    "iven", "iven3", "iven4", "john", "kaukovalta", "linda", "marcelo", "max", "miguel",
    "norbert", "pablo", "paul", "pedro", "quincy", "rob", "robert", "sandro", "shelby",
    "steph", "steph3", "travis", "victor", "zac",
]
# espeak-ng -s words/min, -p pitch 0-99, -a amplitude 0-200 (100 default). Inclusive
# ranges; the test ranges are disjoint from the train ranges.
TRAIN_SPEED = (130, 185)
TEST_SPEED = [(115, 129), (186, 200)]
TRAIN_PITCH = (25, 75)
TEST_PITCH = [(5, 24), (76, 95)]
TRAIN_AMP = (70, 130)
TEST_AMP = [(50, 69), (131, 150)]

# --- augmentation ---------------------------------------------------------------------------
TRAIN_AUG = {
    "noise": "white (p=0.35) / pink (p=0.35) / none (p=0.3), SNR U(10,30) dB vs active speech",
    "reverb": "p=0.4: sox reverb reverberance U(20,50), HF-damping U(20,80), room-scale U(20,80)",
    "tempo": "p=0.7: sox tempo -s U(0.9,1.1), else 1.0",
    "gain": "peak normalised to U(-24,-1) dBFS",
}
TEST_AUG = {
    "noise": "brown (p=0.6) at SNR U(20,35) dB, else clean",
    "reverb": "none",
    "tempo": "none",
    "gain": "peak normalised to U(-18,-3) dBFS",
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# --- text -----------------------------------------------------------------------------------
def sentence_key(text):
    return " ".join(re.sub(r"[^a-z']", " ", text.lower()).split())


def load_sentences(path):
    stats = {"lines": 0, "digits": 0, "bad_chars": 0, "too_long": 0, "no_letters": 0,
             "duplicates": 0}
    seen = set()
    out = []
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stats["lines"] += 1
            text = " ".join(line.split("\t")[0].split())
            if re.search(r"\d", text):
                stats["digits"] += 1
                continue
            if not ALLOWED.match(text):
                stats["bad_chars"] += 1
                continue
            if len(text.split()) > MAX_WORDS or len(text) > MAX_CHARS:
                stats["too_long"] += 1
                continue
            key = sentence_key(text)
            if not key:
                stats["no_letters"] += 1
                continue
            if key in seen:
                stats["duplicates"] += 1
                continue
            seen.add(key)
            out.append(text)
    stats["kept"] = len(out)
    return out, stats


# --- per-utterance settings -----------------------------------------------------------------
def utt_rng(seed, split, idx):
    return np.random.default_rng(np.random.SeedSequence([seed, 0 if split == "train" else 1,
                                                         idx]))


def pick_range(rng, ranges):
    lo, hi = ranges[int(rng.integers(len(ranges)))]
    return int(rng.integers(lo, hi + 1))


def make_settings(seed, split, idx, text):
    rng = utt_rng(seed, split, idx)
    s = {"text": text}
    if split == "train":
        s["voice"] = TRAIN_VOICES[int(rng.integers(len(TRAIN_VOICES)))]
        s["variant"] = TRAIN_VARIANTS[int(rng.integers(len(TRAIN_VARIANTS)))]
        s["speed"] = int(rng.integers(TRAIN_SPEED[0], TRAIN_SPEED[1] + 1))
        s["pitch"] = int(rng.integers(TRAIN_PITCH[0], TRAIN_PITCH[1] + 1))
        s["amplitude"] = int(rng.integers(TRAIN_AMP[0], TRAIN_AMP[1] + 1))
        u = rng.random()
        s["noise"] = "white" if u < 0.35 else ("pink" if u < 0.7 else "none")
        s["snr_db"] = round(float(rng.uniform(10, 30)), 2) if s["noise"] != "none" else None
        if rng.random() < 0.4:
            s["reverb"] = [int(rng.integers(20, 51)), int(rng.integers(20, 81)),
                           int(rng.integers(20, 81))]
        else:
            s["reverb"] = None
        s["tempo"] = round(float(rng.uniform(0.9, 1.1)), 3) if rng.random() < 0.7 else 1.0
        s["peak_dbfs"] = round(float(rng.uniform(-24, -1)), 2)
    else:
        voices = TRAIN_VOICES + TEST_ONLY_VOICES
        s["voice"] = voices[int(rng.integers(len(voices)))]
        s["variant"] = TEST_ONLY_VARIANTS[int(rng.integers(len(TEST_ONLY_VARIANTS)))]
        s["speed"] = pick_range(rng, TEST_SPEED)
        s["pitch"] = pick_range(rng, TEST_PITCH)
        s["amplitude"] = pick_range(rng, TEST_AMP)
        s["noise"] = "brown" if rng.random() < 0.6 else "none"
        s["snr_db"] = round(float(rng.uniform(20, 35)), 2) if s["noise"] != "none" else None
        s["reverb"] = None
        s["tempo"] = 1.0
        s["peak_dbfs"] = round(float(rng.uniform(-18, -3)), 2)
    s["noise_seed"] = int(rng.integers(2**31 - 1))
    return s


# --- synthesis ------------------------------------------------------------------------------
def colored_noise(rng, n, color):
    white = rng.standard_normal(n)
    if color == "white":
        x = white
    else:
        spec = np.fft.rfft(white)
        f = np.fft.rfftfreq(n, 1.0 / SR)
        f = np.maximum(f, 20.0)  # no DC / sub-20 Hz blow-up
        spec = spec / (np.sqrt(f) if color == "pink" else f)
        x = np.fft.irfft(spec, n)
    x = x - x.mean()
    return x / (np.sqrt(np.mean(x * x)) + 1e-12)


def active_power(x):
    frame = SR // 50  # 20 ms
    m = len(x) // frame
    if m == 0:
        return float(np.mean(x * x)) + 1e-12
    e = np.mean(x[: m * frame].reshape(m, frame) ** 2, axis=1)
    act = e[e > e.max() * 1e-4]  # frames within 40 dB of the loudest
    return float(act.mean()) + 1e-12


def synth(job):
    """job = (split, idx, settings, tmp_path). Returns (idx, duration or None, reason)."""
    split, idx, s, tmp_path = job
    voice = s["voice"] + "+" + s["variant"]
    esp = subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(s["speed"]), "-p", str(s["pitch"]),
         "-a", str(s["amplitude"]), "--stdout"],
        input=s["text"].encode("ascii"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if esp.returncode != 0 or len(esp.stdout) < 100:
        return idx, None, "espeak-ng failed: " + esp.stderr.decode(errors="replace")[:200]
    effects = []
    if s["tempo"] != 1.0:
        effects += ["tempo", "-s", str(s["tempo"])]
    if s["reverb"]:
        effects += ["reverb"] + [str(v) for v in s["reverb"]]
    effects += ["rate", "16k", "channels", "1"]
    sx = subprocess.run(
        ["sox", "-R", "-D", "-V1", "-t", "wav", "-", "-t", "raw", "-e", "floating-point",
         "-b", "32", "-c", "1", "-"] + effects,
        input=esp.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if sx.returncode != 0:
        return idx, None, "sox failed: " + sx.stderr.decode(errors="replace")[:200]
    x = np.frombuffer(sx.stdout, dtype="<f4").astype(np.float64)
    dur = len(x) / SR
    if dur > MAX_SEC:
        return idx, dur, "too long"
    if len(x) < SR // 10 or np.max(np.abs(x)) < 1e-4:
        return idx, None, "silent/empty"
    if s["noise"] != "none":
        rng = np.random.default_rng(s["noise_seed"])
        p = active_power(x)
        x = x + colored_noise(rng, len(x), s["noise"]) * np.sqrt(p / 10 ** (s["snr_db"] / 10))
    x = x * (10 ** (s["peak_dbfs"] / 20) / (np.max(np.abs(x)) + 1e-12))
    pcm = np.clip(np.round(x * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(tmp_path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SR)
        w.writeframes(pcm.tobytes())
    return idx, dur, None


# --- driver ---------------------------------------------------------------------------------
def build_split(pool, split, n, sentences, seed, out_dir, progress_every=200):
    """Generate n utterances for split; sentences is an iterator of candidate texts."""
    d = os.path.join(out_dir, split)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.endswith(".wav"):
            os.remove(os.path.join(d, f))
    kept = []          # (idx, settings, duration) in candidate order
    drops = {}
    next_idx = 0
    t0 = time.time()
    done_since = 0
    while len(kept) < n:
        need = n - len(kept)
        batch = []
        for _ in range(need + 4 + need // 50):  # small margin for >6 s drops
            text = next(sentences)
            s = make_settings(seed, split, next_idx, text)
            batch.append((split, next_idx, s, os.path.join(d, ".cand%07d.wav" % next_idx)))
            next_idx += 1
        by_idx = {j[1]: j for j in batch}
        for idx, dur, reason in pool.imap(synth, batch, chunksize=8):
            if reason is None:
                kept.append((idx, by_idx[idx][2], dur))
            else:
                drops[reason.split(":")[0]] = drops.get(reason.split(":")[0], 0) + 1
                if reason.startswith(("espeak", "sox")):
                    log("  %s #%d: %s" % (split, idx, reason))
            done_since += 1
            if done_since % progress_every == 0:
                el = time.time() - t0
                log("  %s: %d/%d kept, %d candidates, %.0f s" %
                    (split, min(len(kept), n), n, next_idx, el))
    # keep the first n successes in candidate order, rename to sequential names
    kept.sort(key=lambda k: k[0])
    extra = kept[n:]
    kept = kept[:n]
    for idx, _, _ in extra:
        os.remove(os.path.join(d, ".cand%07d.wav" % idx))
    rows = []
    for i, (idx, s, dur) in enumerate(kept):
        rel = "%s/%06d.wav" % (split, i)
        os.replace(os.path.join(d, ".cand%07d.wav" % idx), os.path.join(out_dir, rel))
        r = {"path": rel, "candidate": idx, "duration_s": round(dur, 4)}
        r.update({k: v for k, v in s.items() if k != "noise_seed"})
        r["noise_seed"] = s["noise_seed"]
        rows.append(r)
    log("  %s: %d utterances from %d candidates in %.1f s; dropped %s" %
        (split, n, next_idx, time.time() - t0, drops or "none"))
    return rows, {"candidates": next_idx, "dropped": drops}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--train", type=int, default=15000)
    ap.add_argument("--test", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--jobs", type=int, default=2)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "..", "data", "cmn-eng.tsv"))
    a = ap.parse_args()
    t_start = time.time()

    sents, tstats = load_sentences(a.data)
    log("sentences: %d usable of %d lines (%s)" % (len(sents), tstats["lines"], tstats))
    order = np.random.default_rng(np.random.SeedSequence([a.seed, 7])).permutation(len(sents))
    shuffled = [sents[i] for i in order]
    # test reserves the front of the shuffled list (room for drops); train walks the rest
    # from the back, so the train sentences do not depend on --test
    reserve = min(len(shuffled) // 2, int(a.test * 1.5) + 50)
    test_pool, train_pool = shuffled[:reserve], shuffled[reserve:][::-1]
    if a.train > len(train_pool):
        log("note: %d train utterances > %d train sentences; sentences repeat with other "
            "voices" % (a.train, len(train_pool)))

    def test_iter():
        for t in test_pool:
            yield t
        raise SystemExit("test reserve of %d sentences exhausted" % reserve)

    def train_iter():
        while True:
            for t in train_pool:
                yield t

    os.makedirs(a.out_dir, exist_ok=True)
    with mp.get_context("fork").Pool(max(1, a.jobs)) as pool:
        test_rows, test_info = build_split(pool, "test", a.test, test_iter(), a.seed,
                                           a.out_dir)
        train_rows, train_info = build_split(pool, "train", a.train, train_iter(), a.seed,
                                             a.out_dir)

    for split, rows in (("train", train_rows), ("test", test_rows)):
        with open(os.path.join(a.out_dir, split + ".tsv"), "w", encoding="ascii",
                  newline="\n") as f:
            for r in rows:
                f.write("%s\t%s\n" % (r["path"], r["text"]))

    # sanity: held-out settings / sentences must not occur in train
    train_keys = {sentence_key(r["text"]) for r in train_rows}
    train_combos = {(r["voice"], r["variant"]) for r in train_rows}
    assert not any(sentence_key(r["text"]) in train_keys for r in test_rows)
    assert not any((r["voice"], r["variant"]) in train_combos for r in test_rows)
    assert not any(r["variant"] in TEST_ONLY_VARIANTS or r["voice"] in TEST_ONLY_VOICES
                   for r in train_rows)

    def hours(rows):
        return sum(r["duration_s"] for r in rows) / 3600.0

    summary = {
        "train_utterances": len(train_rows), "test_utterances": len(test_rows),
        "train_hours": round(hours(train_rows), 4), "test_hours": round(hours(test_rows), 4),
        "train_candidates": train_info, "test_candidates": test_info,
        "sentences": tstats, "train_sentence_pool": len(train_pool),
        "test_sentence_reserve": reserve,
        "distinct_train_sentences": len(train_keys),
    }
    manifest = {
        "generator": "tools/speech/make_speech_corpus.py",
        "seed": a.seed,
        "source": "data/cmn-eng.tsv (English column; Tatoeba, CC-BY 2.0 FR)",
        "format": "16 kHz mono 16-bit PCM WAV, <= %.1f s" % MAX_SEC,
        "espeak_ng": subprocess.run(["espeak-ng", "--version"], stdout=subprocess.PIPE,
                                    text=True).stdout.strip(),
        "sox": subprocess.run(["sox", "--version"], stdout=subprocess.PIPE,
                              text=True).stdout.strip(),
        "scheme": {
            "text": "test sentences are disjoint from train sentences (case/punctuation-"
                    "insensitive key)",
            "train_voices": TRAIN_VOICES, "test_only_voices": TEST_ONLY_VOICES,
            "train_variants": TRAIN_VARIANTS, "test_only_variants": TEST_ONLY_VARIANTS,
            "test_voices": "any train voice or a test-only voice, always with a test-only "
                           "variant, so no test (voice, variant) pair occurs in train",
            "train_speed_wpm": TRAIN_SPEED, "test_speed_wpm": TEST_SPEED,
            "train_pitch": TRAIN_PITCH, "test_pitch": TEST_PITCH,
            "train_amplitude": TRAIN_AMP, "test_amplitude": TEST_AMP,
            "note": "train tempo augmentation (0.9-1.1) makes train's effective rate span "
                    "~117-204 wpm, so test's edge speeds are rare in train, not strictly "
                    "absent; espeak -s/-p values themselves are disjoint",
            "train_augmentation": TRAIN_AUG, "test_augmentation": TEST_AUG,
        },
        "summary": summary,
        "utterances": test_rows + train_rows,
    }
    with open(os.path.join(a.out_dir, "voices.json"), "w", encoding="ascii") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    log("done in %.1f s: train %d utt / %.3f h, test %d utt / %.3f h -> %s" %
        (time.time() - t_start, len(train_rows), summary["train_hours"], len(test_rows),
         summary["test_hours"], a.out_dir))


if __name__ == "__main__":
    main()
