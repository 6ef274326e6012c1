"""Word timestamps as openai-whisper computes them (timing.py of v20231117: find_alignment, median_filter,
dtw_cpu, merge_punctuations, add_word_timestamps; tokenizer.py: split_to_word_tokens), on the whisper_en hub
directory that ref_whisper.py writes (read back from OUT/hub/whisper_en: its weights, its input_features), in
float64. Whisper's hooks record each cross-attention's scaled scores q·k / sqrt(d) before the softmax; here the
decoder is written out (modeling_whisper's, as ref_whisper.decode) with those scores kept.

OUT/hub/whisper_en.words.safetensors:
  tokens (21,) i64: ' "The quick brown fox tokenization, jumps (over) the lazy dog." 你好' in GPT-2's BPE (a
      prepended quote, a word of two tokens, trailing commas and brackets, a lone space token, two Chinese
      characters split across byte tokens); num_frames (1,) i64: 2400 (the first 1200 encoder positions).
  align_{start,end,prob} (n,) f32, align_ntok (n,) i64, align_text (u8): find_alignment's words (text joined
      by NUL bytes), language "en", alignment heads [[1, 0], [1, 2]] (generation_config.json), medfilt 7.
  zh_*: the same with language "zh" (words split on character boundaries).
  aw_{start,end,prob} f32, aw_segment i64, aw_text u8, seg_start, seg_end (2,) f32: add_word_timestamps on two
      segments of those tokens (the first 8 text tokens at [0.00, 1.30], the rest at [1.30, 3.00], window seek
      0), last_speech_timestamp 0, whisper's default punctuation sets.
"""
import json
import math
import os
import string

import torch

from fixtures import load, save
from ref_hub import causal, heads, lin, merge
from ref_whisper import EOT, NO_TIMESTAMPS, REPO, SOT, TIMESTAMP_BEGIN, _attn, _ffn, _ln, encode, whisper_config

TOKENS = [366, 464, 2068, 7586, 21831, 11241, 1634, 11, 18045, 357, 2502, 8, 262, 16931, 3290, 526, 220, 19526, 254,
          25001, 121]
NUM_FRAMES = 2400
ALIGNMENT_HEADS = [(1, 0), (1, 2)]
PREPEND = "\"'“¿([{-"
APPEND = "\"'.。,，!！?？:：”)]}、"
TOKENS_PER_SECOND = 50


def bytes_to_unicode():
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(keep, map(chr, chars)))


class Gpt2Text:
    """decode(ids) as tiktoken's GPT-2 encoding with Whisper's specials does: bytes joined, UTF-8 with errors
    replaced (one U+FFFD per maximal invalid subpart), a special token as its name."""

    def __init__(self):
        with open(os.path.join(REPO, "data", "gpt2-tokenizer", "encoder.json")) as f:
            self.vocab = {i: s for s, i in json.load(f).items()}
        self.byte = {c: b for b, c in bytes_to_unicode().items()}

    def decode(self, ids):
        out, raw = "", bytearray()
        for i in ids:
            if i >= EOT:
                out += raw.decode("utf-8", errors="replace") + ("<|endoftext|>" if i == EOT else f"<|{i}|>")
                raw = bytearray()
            else:
                raw += bytes(self.byte[c] for c in self.vocab[i])
        return out + raw.decode("utf-8", errors="replace")


def split_tokens_on_unicode(tok, tokens):
    decoded_full = tok.decode(tokens)
    words, word_tokens, current, offset = [], [], [], 0
    for t in tokens:
        current.append(t)
        decoded = tok.decode(current)
        if "\ufffd" not in decoded or decoded_full[offset + decoded.index("\ufffd")] == "\ufffd":
            words.append(decoded)
            word_tokens.append(current)
            current = []
            offset += len(decoded)
    return words, word_tokens


def split_to_word_tokens(tok, tokens, language):
    if language in {"zh", "ja", "th", "lo", "my", "yue"}:
        return split_tokens_on_unicode(tok, tokens)
    subwords, subword_tokens = split_tokens_on_unicode(tok, tokens)
    words, word_tokens = [], []
    for sub, sub_tokens in zip(subwords, subword_tokens):
        special = sub_tokens[0] >= EOT
        with_space = sub.startswith(" ")
        punctuation = sub.strip() in string.punctuation
        if special or with_space or punctuation or len(words) == 0:
            words.append(sub)
            word_tokens.append(list(sub_tokens))
        else:
            words[-1] = words[-1] + sub
            word_tokens[-1].extend(sub_tokens)
    return words, word_tokens


def median_filter(x, width):
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    x = torch.nn.functional.pad(x[None], (pad, pad, 0, 0), mode="reflect")[0]
    return x.unfold(-1, width, 1).sort()[0][..., pad]


def dtw(x):
    """whisper's dtw_cpu: float64 costs in, the accumulated cost kept in float32."""
    import numpy as np
    x = x.numpy()
    N, M = x.shape
    cost = np.ones((N + 1, M + 1), dtype=np.float32) * np.inf
    trace = -np.ones((N + 1, M + 1), dtype=np.float32)
    cost[0, 0] = 0
    for j in range(1, M + 1):
        for i in range(1, N + 1):
            c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
            if c0 < c1 and c0 < c2:
                c, t = c0, 0
            elif c1 < c0 and c1 < c2:
                c, t = c1, 1
            else:
                c, t = c2, 2
            cost[i, j] = x[i - 1, j - 1] + c
            trace[i, j] = t
    i, j = trace.shape[0] - 1, trace.shape[1] - 1
    trace[0, :] = 2
    trace[:, 0] = 1
    result = []
    while i > 0 or j > 0:
        result.append((i - 1, j - 1))
        if trace[i, j] == 0:
            i, j = i - 1, j - 1
        elif trace[i, j] == 1:
            i -= 1
        else:
            j -= 1
    result = np.array(result)[::-1, :].T
    return result[0], result[1]


def decode_scores(cfg, p, enc, ids):
    """ref_whisper.decode with each layer's cross-attention scores q·k / sqrt(d) (H, T, S) kept."""
    T, H = ids.shape[1], cfg["decoder_attention_heads"]
    E = p["model.decoder.embed_tokens.weight"]
    y = E[ids] + p["model.decoder.embed_positions.weight"][:T]
    scores = []
    for i in range(cfg["decoder_layers"]):
        h = f"model.decoder.layers.{i}."
        a = _ln(p, y, h + "self_attn_layer_norm")
        y = y + _attn(H, p, a, a, h + "self_attn.", causal(T).to(y.dtype))
        x, pre = _ln(p, y, h + "encoder_attn_layer_norm"), h + "encoder_attn."
        q, k, v = (heads(lin(p, pre + n, t), H) for n, t in (("q_proj", x), ("k_proj", enc), ("v_proj", enc)))
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores.append(s[0])
        y = y + lin(p, pre + "out_proj", merge(torch.softmax(s, -1) @ v))
        y = y + _ffn(p, _ln(p, y, h + "final_layer_norm"), h)
    return _ln(p, y, "model.decoder.layer_norm") @ E.T, scores


def find_alignment(cfg, p, enc, tok, text_tokens, num_frames, language):
    sot_sequence = [SOT]  # English-only: no language or task tokens
    tokens = torch.tensor([sot_sequence + [NO_TIMESTAMPS] + text_tokens + [EOT]])
    logits, QKs = decode_scores(cfg, p, enc, tokens)
    sampled = logits[0, len(sot_sequence):, :EOT]
    token_probs = sampled.softmax(-1)
    text_token_probs = token_probs[torch.arange(len(text_tokens)), text_tokens].tolist()
    weights = torch.stack([QKs[l][h] for l, h in ALIGNMENT_HEADS])
    weights = weights[:, :, : num_frames // 2].softmax(-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std, 7)
    matrix = weights.mean(0)[len(sot_sequence): -1]
    text_indices, time_indices = dtw(-matrix)
    words, word_tokens = split_to_word_tokens(tok, text_tokens + [EOT], language)
    if len(word_tokens) <= 1:
        return []
    import numpy as np
    bounds = np.pad(np.cumsum([len(t) for t in word_tokens[:-1]]), (1, 0))
    jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    jump_times = time_indices[jumps] / TOKENS_PER_SECOND
    starts, ends = jump_times[bounds[:-1]], jump_times[bounds[1:]]
    probs = [float(np.mean(text_token_probs[i:j])) for i, j in zip(bounds[:-1], bounds[1:])]
    return [dict(word=w, tokens=t, start=float(s), end=float(e), probability=pr)
            for w, t, s, e, pr in zip(words, word_tokens, starts, ends, probs)]


def merge_punctuations(alignment, prepended, appended):
    i, j = len(alignment) - 2, len(alignment) - 1
    while i >= 0:
        prev, nxt = alignment[i], alignment[j]
        if prev["word"].startswith(" ") and prev["word"].strip() in prepended:
            nxt["word"] = prev["word"] + nxt["word"]
            nxt["tokens"] = prev["tokens"] + nxt["tokens"]
            prev["word"], prev["tokens"] = "", []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(alignment):
        prev, nxt = alignment[i], alignment[j]
        if not prev["word"].endswith(" ") and nxt["word"] in appended:
            prev["word"] = prev["word"] + nxt["word"]
            prev["tokens"] = prev["tokens"] + nxt["tokens"]
            nxt["word"], nxt["tokens"] = "", []
        else:
            i = j
        j += 1


def add_word_timestamps(segments, alignment, last_speech_timestamp):
    """transcribe.py's add_word_timestamps after find_alignment (segments: dicts with seek (frames), start,
    end, tokens)."""
    import numpy as np
    text_tokens_per_segment = [[t for t in s["tokens"] if t < EOT] for s in segments]
    durations = np.array([t["end"] - t["start"] for t in alignment])
    durations = durations[durations.nonzero()]
    median = min(0.7, float(np.median(durations) if len(durations) > 0 else 0.0))
    max_duration = median * 2
    if len(durations) > 0:
        marks = ".。!！?？"
        for i in range(1, len(alignment)):
            if alignment[i]["end"] - alignment[i]["start"] > max_duration:
                if alignment[i]["word"] in marks:
                    alignment[i]["end"] = alignment[i]["start"] + max_duration
                elif alignment[i - 1]["word"] in marks:
                    alignment[i]["start"] = alignment[i]["end"] - max_duration
    merge_punctuations(alignment, PREPEND, APPEND)
    time_offset = segments[0]["seek"] * 160 / 16000
    word_index = 0
    for segment, text_tokens in zip(segments, text_tokens_per_segment):
        saved, words = 0, []
        while word_index < len(alignment) and saved < len(text_tokens):
            t = alignment[word_index]
            if t["word"]:
                words.append(dict(word=t["word"], start=round(time_offset + t["start"], 2),
                                  end=round(time_offset + t["end"], 2), probability=t["probability"]))
            saved += len(t["tokens"])
            word_index += 1
        if len(words) > 0:
            if words[0]["end"] - last_speech_timestamp > median * 4 and (
                    words[0]["end"] - words[0]["start"] > max_duration
                    or (len(words) > 1 and words[1]["end"] - words[0]["start"] > max_duration * 2)):
                if len(words) > 1 and words[1]["end"] - words[1]["start"] > max_duration:
                    boundary = max(words[1]["end"] / 2, words[1]["end"] - max_duration)
                    words[0]["end"] = words[1]["start"] = boundary
                words[0]["start"] = max(0, words[0]["end"] - max_duration)
            if segment["start"] < words[0]["end"] and segment["start"] - 0.5 > words[0]["start"]:
                words[0]["start"] = max(0, min(words[0]["end"] - median, segment["start"]))
            else:
                segment["start"] = words[0]["start"]
            if segment["end"] > words[-1]["start"] and segment["end"] + 0.5 < words[-1]["end"]:
                words[-1]["end"] = max(words[-1]["start"] + median, segment["end"])
            else:
                segment["end"] = words[-1]["end"]
            last_speech_timestamp = segment["end"]
        segment["words"] = words


def text_bytes(words):
    return torch.tensor(list(b"\0".join(w["word"].encode("utf-8") for w in words)), dtype=torch.uint8)


def make(out):
    d = os.path.join(out, "hub", "whisper_en")
    cfg = whisper_config()
    p = {k: v.double() for k, v in load(os.path.join(d, "model.safetensors")).items()}
    feats = load(os.path.join(out, "hub", "whisper_en.ref.safetensors"))["input_features"]
    tok = Gpt2Text()
    with torch.no_grad():
        enc = encode(cfg, p, feats.double())
        ref = {"tokens": torch.tensor(TOKENS), "num_frames": torch.tensor([NUM_FRAMES])}
        for tag, language in (("align", "en"), ("zh", "zh")):
            a = find_alignment(cfg, p, enc, tok, TOKENS, NUM_FRAMES, language)
            ref.update({tag + "_start": torch.tensor([w["start"] for w in a]), tag + "_end": torch.tensor([w["end"] for w in a]),
                        tag + "_prob": torch.tensor([w["probability"] for w in a]),
                        tag + "_ntok": torch.tensor([len(w["tokens"]) for w in a]), tag + "_text": text_bytes(a)})
        segments = [{"seek": 0, "start": 0.0, "end": 1.3, "tokens": [TIMESTAMP_BEGIN] + TOKENS[:8] + [TIMESTAMP_BEGIN + 65]},
                    {"seek": 0, "start": 1.3, "end": 3.0, "tokens": [TIMESTAMP_BEGIN + 65] + TOKENS[8:] + [TIMESTAMP_BEGIN + 150]}]
        alignment = find_alignment(cfg, p, enc, tok, TOKENS, NUM_FRAMES, "en")
        add_word_timestamps(segments, alignment, 0.0)
        words = [(k, w) for k, s in enumerate(segments) for w in s["words"]]
        ref.update({"aw_start": torch.tensor([w["start"] for _, w in words]), "aw_end": torch.tensor([w["end"] for _, w in words]),
                    "aw_prob": torch.tensor([w["probability"] for _, w in words]),
                    "aw_segment": torch.tensor([k for k, _ in words]), "aw_text": text_bytes([w for _, w in words]),
                    "seg_start": torch.tensor([s["start"] for s in segments]), "seg_end": torch.tensor([s["end"] for s in segments])})
    save(os.path.join(out, "hub", "whisper_en.words.safetensors"),
         {k: (v.float() if v.is_floating_point() else v) for k, v in ref.items()})
