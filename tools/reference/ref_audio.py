"""Audio fixtures for the speech front end: WAV files and Whisper's log-mel features (whisper/audio.py's
log_mel_spectrogram and Hugging Face's WhisperFeatureExtractor written out in float64).

Writes OUT/audio/:
  tone16k.wav     16 kHz mono PCM int16, 2.5 s (40000 samples): a 220 Hz sine, a chirp from 600 Hz up to
                  1234.5 Hz and a 3 kHz tone under an attack/decay envelope, with low noise from a fixed
                  torch.Generator (seed 1234), scaled to a peak of 0.6, written with Python's wave module.
  stereo44k.wav   44.1 kHz stereo 32-bit float (WAVE_FORMAT_IEEE_FLOAT, tag 3), 1.3 s (57330 frames),
                  written by hand: RIFF, an 18-byte fmt chunk (cbSize 0), a fact chunk (the frame count),
                  data; left a 440 Hz sine, right 660 Hz plus noise (the channels differ).
  audio.ref.safetensors:
    samples             (40000,) f32: tone16k.wav's samples as a reader returns them, int16 / 32768.0.
    filters80           (80, 201) f32, filters128 (128, 201) f32: torchaudio.functional.melscale_fbanks(
                        n_freqs=201, f_min=0, f_max=8000, n_mels=M, sample_rate=16000, norm="slaney",
                        mel_scale="slaney").T, evaluated in float64 (torch's default dtype set to float64
                        for the call) and rounded to f32; equal to librosa.filters.mel(sr=16000, n_fft=400,
                        n_mels=M), Whisper's mel_filters.npz and WhisperFeatureExtractor's mel_filters.
    mel80               (80, 250) f32, mel128 (128, 250) f32: whisper.audio.log_mel_spectrogram(samples) with
                        no padding: window torch.hann_window(400) (periodic); torch.stft(x, 400, 160,
                        center=True, pad_mode="reflect") (40000 / 160 + 1 = 251 frames); power |X|^2 with
                        the last frame dropped; filters @ power; log10(max(., 1e-10)); max(., max - 8);
                        (. + 4) / 4. The maximum for the clamp is over the whole (M, 250) matrix.
    features80          (80, 3000) f32: WhisperFeatureExtractor's input_features for the same samples: zeros
                        appended up to 480000 samples (30 s) first, then the same log-mel over the padded
                        signal (3001 frames, the last dropped), so the clamp's maximum is over all 30 s.
    silence_features80  (80, 3000) f32: the same for 1 s of zeros: every entry is (-10 + 4) / 4 = -1.5.
    stereo_mono         (57330,) f32: stereo44k.wav's down-mix (left + right) / 2 of the f32 values as
                        written, at 44.1 kHz (exact: a reader's f32 (l + r) * 0.5 gives the same values).
All the spectra are computed in float64 from the f32 samples and stored as f32.
"""
import math
import os
import struct
import wave

import torch
import torchaudio

from fixtures import save

D64 = torch.float64
SR, N_FFT, HOP, N_SAMPLES = 16000, 400, 160, 480000


def tone_signal():
    """The 16 kHz test tone as int16 samples."""
    g = torch.Generator().manual_seed(1234)
    n = int(2.5 * SR)
    t = torch.arange(n, dtype=D64) / SR
    f0, f1, dur = 600.0, 1234.5, 2.5
    chirp_phase = 2 * math.pi * (f0 * t + (f1 - f0) * t * t / (2 * dur))  # linear chirp 600 -> 1234.5 Hz
    env = torch.clamp(t / 0.1, max=1.0) * torch.exp(-0.6 * t)  # 100 ms attack, slow decay
    x = (0.5 * torch.sin(2 * math.pi * 220.0 * t) + 0.3 * torch.sin(chirp_phase)
         + 0.15 * torch.sin(2 * math.pi * 3000.0 * t + 0.3)) * env
    x = x + 0.01 * torch.randn(n, generator=g, dtype=D64)
    x = x * (0.6 / x.abs().max())
    return torch.round(x * 32767.0).to(torch.int16)


def stereo_signal():
    """The 44.1 kHz stereo test signal as (frames, 2) float32."""
    g = torch.Generator().manual_seed(4321)
    sr = 44100
    n = int(round(1.3 * sr))
    t = torch.arange(n, dtype=D64) / sr
    left = 0.5 * torch.sin(2 * math.pi * 440.0 * t)
    right = 0.4 * torch.sin(2 * math.pi * 660.0 * t + 1.0) + 0.05 * torch.randn(n, generator=g, dtype=D64)
    return torch.stack([left, right], 1).float()


def write_pcm16(path, samples, sr):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sr)
        w.writeframes(samples.numpy().astype("<i2").tobytes())


def write_float32_wav(path, frames, sr):
    """RIFF/WAVE, format tag 3 (IEEE float), 32 bits, interleaved; fmt of 18 bytes (cbSize 0) and a fact
    chunk, as the WAVE specification asks of non-PCM formats."""
    n, ch = frames.shape
    data = frames.numpy().astype("<f4").tobytes()
    fmt = struct.pack("<HHIIHHH", 3, ch, sr, sr * ch * 4, ch * 4, 32, 0)
    fact = struct.pack("<I", n)
    body = (b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"fact" + struct.pack("<I", len(fact)) + fact
            + b"data" + struct.pack("<I", len(data)) + data)
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", len(body)) + body)


def mel_filters(n_mels):
    """torchaudio's slaney mel filter bank, (n_mels, 201), computed in float64."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(D64)
    try:
        fb = torchaudio.functional.melscale_fbanks(n_freqs=N_FFT // 2 + 1, f_min=0.0, f_max=8000.0, n_mels=n_mels,
                                                   sample_rate=SR, norm="slaney", mel_scale="slaney")
    finally:
        torch.set_default_dtype(old)
    return fb.T.to(D64).contiguous()


def log_mel(x, filters):
    """whisper.audio.log_mel_spectrogram on an already padded (or unpadded) float64 waveform."""
    window = torch.hann_window(N_FFT, dtype=D64)
    stft = torch.stft(x, N_FFT, HOP, window=window, center=True, pad_mode="reflect", return_complex=True)
    magnitudes = stft[..., :-1].abs() ** 2
    mel = filters @ magnitudes
    log_spec = torch.clamp(mel, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def feature_extractor(x, filters):
    """WhisperFeatureExtractor: pad (or truncate) to 30 s with zeros at the end, then the log-mel."""
    x = x[:N_SAMPLES]
    x = torch.cat([x, torch.zeros(N_SAMPLES - x.shape[0], dtype=x.dtype)])
    return log_mel(x, filters)


def make(out):
    d = os.path.join(out, "audio")
    os.makedirs(d, exist_ok=True)

    pcm = tone_signal()
    write_pcm16(os.path.join(d, "tone16k.wav"), pcm, SR)
    samples = pcm.float() / 32768.0
    stereo = stereo_signal()
    write_float32_wav(os.path.join(d, "stereo44k.wav"), stereo, 44100)
    mono = stereo.double().mean(1).float()

    x = samples.double()
    f80, f128 = mel_filters(80), mel_filters(128)
    save(os.path.join(d, "audio.ref.safetensors"), {
        "samples": samples,
        "filters80": f80.float(), "filters128": f128.float(),
        "mel80": log_mel(x, f80).float(), "mel128": log_mel(x, f128).float(),
        "features80": feature_extractor(x, f80).float(),
        "silence_features80": feature_extractor(torch.zeros(SR, dtype=D64), f80).float(),
        "stereo_mono": mono,
    })
