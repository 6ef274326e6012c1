"""Whisper transcription speed in PyTorch 1.13, float32, the peer of `tfm transcribe` in
bench/speech/whisper_rtf.sh (which documents the protocol and prints the table).

Usage (Debian's /usr/bin/python3, which has torch and torchaudio):
  bench_torch_whisper.py make DIR SIZE
      A Hugging Face hub directory of random weights: SIZE tiny (d_model 384, 4 + 4 layers, 6 heads, ffn
      1536) or base (512, 6 + 6, 8 heads, ffn 2048); 80 mels, the English-only vocabulary of 51864 in
      whisper-tiny.en's layout. config.json, generation_config.json and the tokenizer files are those of
      tools/reference/ref_whisper.py (its writers, with the sizes above); model.safetensors is f32, HF's
      names, proj_out tied to model.decoder.embed_tokens. Weights as HF's _init_weights: every Linear /
      Conv1d / Embedding weight ~ N(0, 0.02^2) (init_std), biases 0, LayerNorm weight 1 and bias 0; the
      encoder's positions are whisper's sinusoids(1500, d_model). Seeded: the same SIZE gives the same file.
  bench_torch_whisper.py run DIR AUDIO --threads N --tokens K[,K2,...] [--dump-tokens FILE]
      Transcribes a 16 kHz mono 16-bit WAV as OpenAI's long-form loop does without timestamps, with fixed
      work: the log-mel of the whole file with 30 s of zeros behind it (torch.stft, as whisper's
      log_mel_spectrogram; the clamp's maximum is the whole file's), windows of 3000 frames at seek 0, 3000,
      ... while seek < samples // 160; per window the encoder once, the cross-attention K/V of every decoder
      layer once, then greedy decoding of exactly K tokens after the prompt [50257, 50362]: the prompt in
      one step (its last position's logits give token 1), then K - 1 one-token steps over the self-attention
      cache. No end-token stop, no suppression, no log-probabilities: argmax only. --tokens with a list:
      window i decodes the i-th count (the last repeats). Prints one JSON line:
      {"seconds", "mel_s", "encoder_s", "decoder_s", "load_s", "windows", "tokens", "audio_seconds", "rtf",
       "threads", "torch"}: seconds = mel_s + encoder_s + decoder_s, the wall time from the samples in memory
      to the last token (interpreter start, imports, the file read and load_s, reading the weights, are
      outside it); rtf = seconds / audio_seconds. --dump-tokens: the argmax tokens, a list per window (JSON),
      for a check against tfm's.
  bench_torch_whisper.py mel AUDIO --threads N [--compare NPY] [--reps R]
      The log-mel of the file alone (no padding: what `tfm mel AUDIO -o NPY` writes, (80, samples // 160)),
      timed in process after the file is read, best of R: "stft" = whisper's log_mel_spectrogram (torch.stft,
      |X|^2 without the last frame, Slaney filters from torchaudio.functional.melscale_fbanks, log10, clamp
      to max - 8, (x + 4) / 4); "torchaudio" = torchaudio.transforms.MelSpectrogram (the same STFT and
      filters inside one module) + the same compression. --compare: the largest |difference| from tfm's NPY.

The model is whisper's forward (ref_whisper.py's, which follows transformers' modeling_whisper) in float32
with torch.nn.functional: conv1d + GELU (erf) twice, F.layer_norm (eps 1e-5), attention as
softmax(q k^T) v with q = q_proj(x) * head_dim^-0.5, separate q / k / v projections (k without bias) as HF
and openai-whisper have them; the decoder's self-attention cache is preallocated (layers, H, 448, Dh) and
each step's K / V are written at its position (appending without torch.cat's copies); the logits of the
last position only, F.linear on the tied embedding. torch.inference_mode(); torch.set_num_threads(N) and
the same for Debian's OpenBLAS pool (bench_timing.set_threads).
"""
import argparse
import json
import math
import os
import struct
import sys
import time
import wave

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, HERE)
from bench_timing import set_threads  # noqa: E402

SOT, NO_TIMESTAMPS = 50257, 50362
SIZES = {"tiny": dict(d_model=384, layers=4, heads=6, ffn=1536, name="openai/whisper-tiny.en"),
         "base": dict(d_model=512, layers=6, heads=8, ffn=2048, name="openai/whisper-base.en")}
SAMPLE_RATE, N_FFT, HOP, N_MELS, WINDOW_FRAMES = 16000, 400, 160, 80, 3000


# ---- make ------------------------------------------------------------------------------------
def make(d, size):
    sys.path.insert(0, os.path.join(REPO, "tools", "reference"))
    import ref_whisper as rw  # noqa: E402
    from ref_hub import write_dir  # noqa: E402

    s = SIZES[size]
    C, L, H, I = s["d_model"], s["layers"], s["heads"], s["ffn"]
    cfg = rw.whisper_config()
    cfg.update({"_name_or_path": s["name"], "d_model": C, "encoder_layers": L, "decoder_layers": L,
                "num_hidden_layers": L, "encoder_attention_heads": H, "decoder_attention_heads": H,
                "encoder_ffn_dim": I, "decoder_ffn_dim": I})
    gen = rw.generation_config()
    gen["alignment_heads"] = [[L - 1, 0], [L - 1, H // 2]]  # not read here; whisper's shape
    V, M = cfg["vocab_size"], cfg["num_mel_bins"]
    g = torch.Generator().manual_seed({"tiny": 1, "base": 2}[size])
    w = lambda *shape: torch.randn(*shape, generator=g) * cfg["init_std"]  # noqa: E731
    z = torch.zeros
    p = {"model.encoder.conv1.weight": w(C, M, 3), "model.encoder.conv1.bias": z(C),
         "model.encoder.conv2.weight": w(C, C, 3), "model.encoder.conv2.bias": z(C),
         "model.encoder.embed_positions.weight": rw.sinusoids(cfg["max_source_positions"], C).float()}
    for side in ("encoder", "decoder"):
        for i in range(L):
            h = f"model.{side}.layers.{i}."
            for a in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    p[f"{h}{a}.{m}.weight"] = w(C, C)
                    if m != "k_proj":
                        p[f"{h}{a}.{m}.bias"] = z(C)
                p[f"{h}{a}_layer_norm.weight"], p[f"{h}{a}_layer_norm.bias"] = torch.ones(C), z(C)
            p[h + "fc1.weight"], p[h + "fc1.bias"] = w(I, C), z(I)
            p[h + "fc2.weight"], p[h + "fc2.bias"] = w(C, I), z(C)
            p[h + "final_layer_norm.weight"], p[h + "final_layer_norm.bias"] = torch.ones(C), z(C)
        p[f"model.{side}.layer_norm.weight"], p[f"model.{side}.layer_norm.bias"] = torch.ones(C), z(C)
    p["model.decoder.embed_tokens.weight"] = w(V, C)
    p["model.decoder.embed_positions.weight"] = w(cfg["max_target_positions"], C)
    write_dir(d, cfg, {k: v.float().contiguous() for k, v in p.items()}, gen=gen)
    rw.tokenizer_files(d)
    n = sum(v.numel() for v in p.values()) - p["model.encoder.embed_positions.weight"].numel()
    print(json.dumps({"dir": d, "size": size, "parameters": n}))


# ---- shared ----------------------------------------------------------------------------------
def read_safetensors(path):
    """name -> float32 tensor (F32 only)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {meta['dtype']}; only F32 is read here")
        a, b = meta["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data, dtype="<f4", count=(b - a) // 4, offset=a)
                                     .reshape(meta["shape"]).copy())
    return out


def read_wav(path):
    with wave.open(path, "rb") as f:
        if f.getframerate() != SAMPLE_RATE or f.getnchannels() != 1 or f.getsampwidth() != 2:
            raise SystemExit(f"{path}: need 16 kHz mono 16-bit PCM, got {f.getframerate()} Hz, "
                             f"{f.getnchannels()} ch, {8 * f.getsampwidth()} bit")
        raw = f.readframes(f.getnframes())
    return torch.from_numpy(np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0)


_FILTERS = {}


def mel_filters():
    if "f" not in _FILTERS:
        import torchaudio
        _FILTERS["f"] = torchaudio.functional.melscale_fbanks(N_FFT // 2 + 1, 0.0, SAMPLE_RATE / 2, N_MELS, SAMPLE_RATE,
                                                              norm="slaney", mel_scale="slaney").T.contiguous()
    return _FILTERS["f"]  # (n_mels, 201)


def compress(mel):
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def log_mel(audio, window):
    """whisper.audio.log_mel_spectrogram: (n_mels, len(audio) // 160)."""
    stft = torch.stft(audio, N_FFT, HOP, window=window, return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    return compress(mel_filters() @ magnitudes)


# ---- the model -------------------------------------------------------------------------------
class Whisper:
    def __init__(self, cfg, p):
        self.p = p
        self.C = cfg["d_model"]
        self.L_enc, self.L_dec = cfg["encoder_layers"], cfg["decoder_layers"]
        self.H_enc, self.H_dec = cfg["encoder_attention_heads"], cfg["decoder_attention_heads"]
        self.max_T = cfg["max_target_positions"]
        self.E = p["model.decoder.embed_tokens.weight"]
        self.pos = p["model.decoder.embed_positions.weight"]

    def lin(self, x, n):
        return F.linear(x, self.p[n + ".weight"], self.p.get(n + ".bias"))

    def ln(self, x, n):
        return F.layer_norm(x, (self.C,), self.p[n + ".weight"], self.p[n + ".bias"], 1e-5)

    def ffn(self, x, h):
        return self.lin(F.gelu(self.lin(x, h + "fc1")), h + "fc2")

    @staticmethod
    def split(x, H):  # (T, C) -> (H, T, Dh)
        return x.view(x.shape[0], H, -1).transpose(0, 1)

    def attend(self, q, k, v):  # q (H, T, Dh) already scaled; k, v (H, S, Dh) -> (T, C)
        o = torch.matmul(torch.softmax(torch.matmul(q, k.transpose(-1, -2)), -1), v)
        return o.transpose(0, 1).reshape(q.shape[1], self.C)

    def encode(self, feats):
        """feats (80, 3000) -> (1500, C)."""
        p = self.p
        x = F.gelu(F.conv1d(feats[None], p["model.encoder.conv1.weight"], p["model.encoder.conv1.bias"], padding=1))
        x = F.gelu(F.conv1d(x, p["model.encoder.conv2.weight"], p["model.encoder.conv2.bias"], stride=2, padding=1))
        x = x[0].T + p["model.encoder.embed_positions.weight"]
        H = self.H_enc
        scale = (self.C // H) ** -0.5
        for i in range(self.L_enc):
            h = f"model.encoder.layers.{i}."
            a = self.ln(x, h + "self_attn_layer_norm")
            q = self.split(self.lin(a, h + "self_attn.q_proj") * scale, H)
            k = self.split(self.lin(a, h + "self_attn.k_proj"), H)
            v = self.split(self.lin(a, h + "self_attn.v_proj"), H)
            x = x + self.lin(self.attend(q, k, v), h + "self_attn.out_proj")
            x = x + self.ffn(self.ln(x, h + "final_layer_norm"), h)
        return self.ln(x, "model.encoder.layer_norm")

    def cross_kv(self, enc):
        """Each decoder layer's cross-attention K / V (H, 1500, Dh), once per window."""
        H = self.H_dec
        return [(self.split(self.lin(enc, f"model.decoder.layers.{i}.encoder_attn.k_proj"), H),
                 self.split(self.lin(enc, f"model.decoder.layers.{i}.encoder_attn.v_proj"), H)) for i in range(self.L_dec)]

    def new_cache(self):
        shape = (self.L_dec, self.H_dec, self.max_T, self.C // self.H_dec)
        return torch.zeros(shape), torch.zeros(shape)

    def decode(self, ids, pos, cache, cross):
        """ids (T,) at positions pos..pos+T-1 appended to the cache; the last position's logits (V,)."""
        T, H = ids.shape[0], self.H_dec
        scale = (self.C // H) ** -0.5
        kc, vc = cache
        y = F.embedding(ids, self.E) + self.pos[pos:pos + T]
        mask = torch.triu(torch.full((T, pos + T), float("-inf")), pos + 1) if T > 1 else None
        for i in range(self.L_dec):
            h = f"model.decoder.layers.{i}."
            a = self.ln(y, h + "self_attn_layer_norm")
            q = self.split(self.lin(a, h + "self_attn.q_proj") * scale, H)
            kc[i, :, pos:pos + T] = self.split(self.lin(a, h + "self_attn.k_proj"), H)
            vc[i, :, pos:pos + T] = self.split(self.lin(a, h + "self_attn.v_proj"), H)
            s = torch.matmul(q, kc[i, :, :pos + T].transpose(-1, -2))
            if mask is not None:
                s = s + mask
            o = torch.matmul(torch.softmax(s, -1), vc[i, :, :pos + T]).transpose(0, 1).reshape(T, self.C)
            y = y + self.lin(o, h + "self_attn.out_proj")
            a = self.ln(y, h + "encoder_attn_layer_norm")
            q = self.split(self.lin(a, h + "encoder_attn.q_proj") * scale, H)
            y = y + self.lin(self.attend(q, *cross[i]), h + "encoder_attn.out_proj")
            y = y + self.ffn(self.ln(y, h + "final_layer_norm"), h)
        y = self.ln(y[-1], "model.decoder.layer_norm")
        return F.linear(y, self.E)


def run(a):
    set_threads(torch, a.threads)
    counts = [int(k) for k in a.tokens.split(",")]
    with torch.inference_mode():
        t0 = time.perf_counter()
        with open(os.path.join(a.dir, "config.json")) as f:
            cfg = json.load(f)
        model = Whisper(cfg, read_safetensors(os.path.join(a.dir, "model.safetensors")))
        load_s = time.perf_counter() - t0
        audio = read_wav(a.audio)
        n = audio.shape[0]
        window = torch.hann_window(N_FFT)
        mel_filters()

        t0 = time.perf_counter()
        mel = log_mel(torch.cat([audio, torch.zeros(WINDOW_FRAMES * HOP)]), window)
        t1 = time.perf_counter()
        mel_s, enc_s, dec_s = t1 - t0, 0.0, 0.0
        content = n // HOP
        seek, windows, tokens, generated = 0, 0, 0, []
        cache = model.new_cache()
        while seek < content:
            K = counts[min(windows, len(counts) - 1)]
            if not 1 <= K <= model.max_T - 2:
                raise SystemExit(f"--tokens {K}: 1 .. {model.max_T - 2}")
            t0 = time.perf_counter()
            enc = model.encode(mel[:, seek:seek + WINDOW_FRAMES].contiguous())
            t1 = time.perf_counter()
            cross = model.cross_kv(enc)
            prompt = torch.tensor([SOT, NO_TIMESTAMPS])
            nxt = int(model.decode(prompt, 0, cache, cross).argmax())
            out = [nxt]
            pos = prompt.shape[0]
            for _ in range(K - 1):
                nxt = int(model.decode(torch.tensor([nxt]), pos, cache, cross).argmax())
                out.append(nxt)
                pos += 1
            t2 = time.perf_counter()
            generated.append(out)
            enc_s += t1 - t0
            dec_s += t2 - t1
            tokens += K
            windows += 1
            seek += min(WINDOW_FRAMES, content - seek)
    seconds = mel_s + enc_s + dec_s
    audio_s = n / SAMPLE_RATE
    print(json.dumps({"seconds": round(seconds, 4), "mel_s": round(mel_s, 4), "encoder_s": round(enc_s, 4),
                      "decoder_s": round(dec_s, 4), "load_s": round(load_s, 4), "windows": windows, "tokens": tokens,
                      "audio_seconds": audio_s, "rtf": round(seconds / audio_s, 5), "threads": a.threads,
                      "torch": torch.__version__}))
    if a.dump_tokens:
        with open(a.dump_tokens, "w") as f:
            json.dump(generated, f)


def mel_bench(a):
    import torchaudio
    set_threads(torch, a.threads)
    audio = read_wav(a.audio)
    window = torch.hann_window(N_FFT)
    mel_filters()
    ta = torchaudio.transforms.MelSpectrogram(sample_rate=SAMPLE_RATE, n_fft=N_FFT, hop_length=HOP, n_mels=N_MELS,
                                              f_min=0.0, f_max=SAMPLE_RATE / 2, power=2.0, norm="slaney",
                                              mel_scale="slaney")

    def via_torchaudio(x):
        return compress(ta(x)[:, :-1])

    out = {"threads": a.threads, "audio_seconds": audio.shape[0] / SAMPLE_RATE, "torch": torch.__version__,
           "torchaudio": torchaudio.__version__}
    ref = torch.from_numpy(np.load(a.compare)) if a.compare else None
    with torch.inference_mode():
        for name, fn in (("stft", lambda: log_mel(audio, window)), ("torchaudio", lambda: via_torchaudio(audio))):
            m = fn()  # warm-up
            best = math.inf
            for _ in range(a.reps):
                t0 = time.perf_counter()
                m = fn()
                best = min(best, time.perf_counter() - t0)
            out[name + "_s"] = round(best, 5)
            out[name + "_shape"] = list(m.shape)
            if ref is not None:
                out[name + "_max_abs_diff_vs_npy"] = float((m - ref).abs().max()) if m.shape == ref.shape else "shape"
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("dir")
    m.add_argument("size", choices=sorted(SIZES))
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("audio")
    r.add_argument("--threads", type=int, default=1)
    r.add_argument("--tokens", default="224", help="tokens per window: K, or K1,K2,... (the last repeats)")
    r.add_argument("--dump-tokens", help="write the generated tokens, a list per window, to this JSON file")
    s = sub.add_parser("mel")
    s.add_argument("audio")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--compare", help="tfm mel's .npy of the same file")
    s.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if a.cmd == "make":
        make(a.dir, a.size)
    elif a.cmd == "run":
        run(a)
    else:
        mel_bench(a)


if __name__ == "__main__":
    main()
