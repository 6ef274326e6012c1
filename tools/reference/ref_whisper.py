"""Whisper (English-only, whisper-tiny.en's layout) as a Hugging Face hub directory with random weights and its
PyTorch reference: modeling_whisper's WhisperForConditionalGeneration written out in float64 (transformers is
not in Debian 12), as ref_hub.py does for Marian.

Writes OUT/hub/whisper_en: config.json (WhisperConfig of openai/whisper-tiny.en with d_model 16, 2 + 2 layers,
4 heads, ffn 32, the real vocabulary of 51864), generation_config.json (whisper-tiny.en's), model.safetensors
(f32, HF's names, proj_out absent: tied to model.decoder.embed_tokens), the tokenizer (vocab.json and merges.txt:
GPT-2's, data/gpt2-tokenizer; tokenizer.json: byte-level BPE with <|endoftext|> and Whisper's specials and 1501
timestamps as added tokens, ids 50256..51863; added_tokens.json, special_tokens_map.json, tokenizer_config.json)
and preprocessor_config.json (WhisperFeatureExtractor's, without mel_filters).

The model: encoder: conv1 (80 -> 16, k 3, pad 1), GELU (erf), conv2 (16 -> 16, k 3, stride 2, pad 1), GELU,
(B, 1500, 16) + model.encoder.embed_positions.weight (holding whisper's sinusoids(1500, 16)), 2 pre-LN layers
(self_attn_layer_norm, self-attention, final_layer_norm, fc1, GELU, fc2), model.encoder.layer_norm. Attention:
q_proj(x) * head_dim^-0.5, k_proj without bias, v_proj, out_proj. Decoder: embed_tokens[ids] (no scale) +
embed_positions.weight[offset : offset + T], 2 pre-LN layers (causal self-attention, cross-attention on the
encoder output (encoder_attn.*, k_proj without bias), FFN), model.decoder.layer_norm, logits = h @ embed_tokens.T.
LayerNorm eps 1e-5. Weights ~ N(0, 0.2^2) (LayerNorm weights 1 + N(0, 0.1^2)), stored f32; the reference
computes in float64 on the stored values.

OUT/hub/whisper_en.ref.safetensors:
  input_features   (1, 80, 3000) f32: randn * 0.5 clamped to [-1.5, 1.5] (no dependence on the mel code).
  encoder_hidden   (1, 1500, 16) f32: the encoder output, after model.encoder.layer_norm.
  decoder_input_ids (1, 6) i64: [50257, 50362, 464, 3797, 3332, 257] (<|startoftranscript|>, <|notimestamps|>,
                   text); logits (1, 6, 51864) f32: the decoder on the whole prefix (causal), positions 0..5.
  w                (1, 6, 51864) f32 and grad.<name> for every parameter in model.safetensors (the encoder's
                   sinusoid table included): the gradient of sum(logits * w), in float64, stored f32.
  greedy           (n,) i64: greedy decoding without timestamps, the tokens after the prompt [50257, 50362]
                   (the prompt not included). Each step: the last position's logits; suppress_tokens -> -inf
                   (SuppressTokensLogitsProcessor); at the first generated step also begin_suppress_tokens
                   [220, 50256] -> -inf (SuppressTokensAtBeginLogitsProcessor); nothing else (timestamp
                   tokens and <|notimestamps|> stay allowed: they are not in suppress_tokens); argmax; stop after
                   <|endoftext|> 50256 (kept) or after 20 new tokens.
  greedy_ts        (m,) i64: the same with timestamps: prompt [50257] (sample_begin 1), suppress_tokens every
                   step, begin_suppress_tokens at the first step, then timestamp_filter below; at most 20 new.
                   Neither reaches <|endoftext|> (both are 20 long). The smallest gap between the chosen logit and
                   the runner-up is 0.026 (greedy) and 0.0055 (greedy_ts); rule 5's two sides differ by at least
                   0.46 at every step of greedy_ts: far above f32 rounding.
  ts_filter_in, ts_filter_prefix, ts_filter_out and ts_filter_{in,prefix,out}_{1..5}: timestamp_filter alone
                   (no suppress_tokens, no begin_suppress_tokens) on a (51864,) f32 row (randn), the prefix (i64:
                   all the tokens so far, the prompt [50257] included, sample_begin = 1 in every case) and the
                   filtered row (f32, -inf where suppressed, the input's values elsewhere):
                     ""  [50257, 50363, 464, 50400], <|endoftext|>'s logit raised by 14 (rule 5 stays off): one
                         timestamp after text: text < 50256 forbidden, eos and the specials 50256..50361 kept
                         (50362 forbidden), timestamps < 50400 forbidden (50400 itself allowed: a segment's
                         closing timestamp may repeat the opening one);
                     _1  [50257]: the first step: everything below 50363 and above 50363 + 50 forbidden;
                     _2  [50257, 50363]: one timestamp directly after the prompt counts as a closed pair (no
                         penultimate token): every timestamp forbidden, text kept;
                     _3  [50257, 50363, 464, 50400, 50400]: a closed pair: every timestamp forbidden;
                     _4  [50257, 50363, 464, 11], the timestamps' logits raised by 2: text last; rule 5 fires:
                         every token below 50363 forbidden, and timestamps <= 50363 (rule 3, strictly later);
                     _5  the same prefix, two text logits (318, 1110) raised by 14: rule 5 stays off: only
                         50362 and the timestamps <= 50363 forbidden.
timestamp_filter(logits, tokens, sample_begin) is transformers' WhisperTimeStampLogitsProcessor as in its
current main branch (the same rules as openai-whisper's ApplyTimestampRules; timestamp_begin = 50363 =
no_timestamps_token_id + 1, eos = 50256, max_initial_timestamp_index = 50), with seq = tokens[sample_begin:]:
  1. <|notimestamps|> 50362 -> -inf, always.
  2. last_was_timestamp = len(seq) >= 1 and seq[-1] >= 50363;
     penultimate_was_timestamp = len(seq) < 2 or seq[-2] >= 50363 (true when there is no penultimate token).
     If last_was_timestamp: if penultimate_was_timestamp, every timestamp (>= 50363) -> -inf (text must follow
     a closed pair); else every token below eos (< 50256) -> -inf (a timestamp after text: another timestamp
     or eos must follow; the specials 50256..50361 stay allowed).
  3. Timestamps must not decrease: if seq holds a timestamp, with last = the last timestamp in seq:
     if last_was_timestamp and not penultimate_was_timestamp (closing a segment), tokens 50363 .. last - 1
     -> -inf (the same timestamp may repeat); otherwise 50363 .. last -> -inf (strictly later).
  4. At the first generated step (len(tokens) == sample_begin): every token below 50363 -> -inf (eos too) and
     every timestamp above 50363 + max_initial_timestamp_index (50, i.e. 1.00 s) -> -inf.
  5. logprobs = log_softmax of the row so far; if logsumexp(logprobs[50363:]) > max(logprobs[:50363]), every
     token below 50363 -> -inf.
The older processor (transformers of the 4.27 - 4.33 period, which the generation config's 4.31 names; read from
a copy of that code, not from the 4.31 tag) differed: it forced the first generated token to be exactly <|0.00|>
(all else -inf) and counted seq from after it, had no rule 3, and at the step after <|0.00|> applied only the
max_initial_timestamp cap (no text suppression); its rules 1, 2 and 5 are the ones above.
"""
import json
import math
import os
import shutil

import torch
import torch.nn.functional as F

from fixtures import save
from ref_hub import D64, attend, causal, heads, layer_norm, lin, merge, near_one, rnd, stored, write_dir

SOT, EOT, NO_TIMESTAMPS, TIMESTAMP_BEGIN = 50257, 50256, 50362, 50363
MAX_INITIAL_TIMESTAMP_INDEX = 50
SUPPRESS_TOKENS = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 357, 366,
                   438, 532, 685, 705, 796, 930, 1058, 1220, 1267, 1279, 1303, 1343, 1377, 1391, 1635, 1782, 1875,
                   2162, 2361, 2488, 3467, 4008, 4211, 4600, 4808, 5299, 5855, 6329, 7203, 9609, 9959, 10563, 10786,
                   11420, 11709, 11907, 13163, 13697, 13700, 14808, 15306, 16410, 16791, 17992, 19203, 19510, 20724,
                   22305, 22935, 27007, 30109, 30420, 33409, 34949, 40283, 40493, 40549, 47282, 49146, 50257, 50357,
                   50358, 50359, 50360, 50361]
BEGIN_SUPPRESS_TOKENS = [220, 50256]
LANGUAGES = ["en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id",
             "hi", "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg",
             "lt", "la", "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br",
             "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so",
             "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt",
             "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su"]
REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def whisper_config():
    return {"_name_or_path": "openai/whisper-tiny.en", "activation_dropout": 0.0, "activation_function": "gelu",
            "apply_spec_augment": False, "architectures": ["WhisperForConditionalGeneration"],
            "attention_dropout": 0.0, "begin_suppress_tokens": BEGIN_SUPPRESS_TOKENS, "bos_token_id": 50257,
            "classifier_proj_size": 256, "d_model": 16, "decoder_attention_heads": 4, "decoder_ffn_dim": 32,
            "decoder_layerdrop": 0.0, "decoder_layers": 2, "decoder_start_token_id": 50257, "dropout": 0.0,
            "encoder_attention_heads": 4, "encoder_ffn_dim": 32, "encoder_layerdrop": 0.0, "encoder_layers": 2,
            "eos_token_id": 50256, "forced_decoder_ids": [[1, 50362]], "init_std": 0.02, "is_encoder_decoder": True,
            "mask_feature_length": 10, "mask_feature_min_masks": 0, "mask_feature_prob": 0.0, "mask_time_length": 10,
            "mask_time_min_masks": 2, "mask_time_prob": 0.05, "max_length": 448, "max_source_positions": 1500,
            "max_target_positions": 448, "median_filter_width": 7, "model_type": "whisper", "num_hidden_layers": 2,
            "num_mel_bins": 80, "pad_token_id": 50256, "scale_embedding": False, "suppress_tokens": SUPPRESS_TOKENS,
            "tie_word_embeddings": True, "torch_dtype": "float32", "transformers_version": "4.27.0.dev0",
            "use_cache": True, "use_weighted_layer_sum": False, "vocab_size": 51864}


def generation_config():
    return {"alignment_heads": [[1, 0], [1, 2]], "begin_suppress_tokens": BEGIN_SUPPRESS_TOKENS, "bos_token_id": 50257,
            "decoder_start_token_id": 50257, "eos_token_id": 50256, "forced_decoder_ids": [[1, 50362]],
            "is_multilingual": False, "max_initial_timestamp_index": MAX_INITIAL_TIMESTAMP_INDEX, "max_length": 448,
            "no_timestamps_token_id": 50362, "pad_token_id": 50256, "prev_sot_token_id": 50360,
            "return_timestamps": False, "suppress_tokens": SUPPRESS_TOKENS, "transformers_version": "4.31.0.dev0"}


def sinusoids(length, channels, max_timescale=10000):
    """whisper.model.sinusoids: sin in the first half of the channels, cos in the second."""
    inc = math.log(max_timescale) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=D64))
    scaled = torch.arange(length, dtype=D64)[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], 1)


def whisper_params(cfg):
    C, V, M = cfg["d_model"], cfg["vocab_size"], cfg["num_mel_bins"]
    p = {"model.encoder.conv1.weight": rnd(C, M, 3), "model.encoder.conv1.bias": rnd(C, std=0.1),
         "model.encoder.conv2.weight": rnd(C, C, 3), "model.encoder.conv2.bias": rnd(C, std=0.1),
         "model.encoder.embed_positions.weight": sinusoids(cfg["max_source_positions"], C).float()}
    for side in ("encoder", "decoder"):
        I = cfg[side + "_ffn_dim"]
        for i in range(cfg[side + "_layers"]):
            h = f"model.{side}.layers.{i}."
            for a in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    p[f"{h}{a}.{m}.weight"] = rnd(C, C)
                    if m != "k_proj":
                        p[f"{h}{a}.{m}.bias"] = rnd(C, std=0.1)
                p[f"{h}{a}_layer_norm.weight"], p[f"{h}{a}_layer_norm.bias"] = near_one(C), rnd(C, std=0.1)
            p[h + "fc1.weight"], p[h + "fc1.bias"] = rnd(I, C), rnd(I, std=0.1)
            p[h + "fc2.weight"], p[h + "fc2.bias"] = rnd(C, I), rnd(C, std=0.1)
            p[h + "final_layer_norm.weight"], p[h + "final_layer_norm.bias"] = near_one(C), rnd(C, std=0.1)
        p[f"model.{side}.layer_norm.weight"], p[f"model.{side}.layer_norm.bias"] = near_one(C), rnd(C, std=0.1)
    p["model.decoder.embed_tokens.weight"] = rnd(V, C)
    p["model.decoder.embed_positions.weight"] = rnd(cfg["max_target_positions"], C)
    return p


def _attn(H, p, x, kv, pre, add):
    """WhisperAttention: q_proj(x) * head_dim^-0.5 (scaling the scores is the same), k_proj without bias."""
    q, k, v = (heads(lin(p, pre + n, t), H) for n, t in (("q_proj", x), ("k_proj", kv), ("v_proj", kv)))
    return lin(p, pre + "out_proj", merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), add)))


def _ln(p, x, n):
    return layer_norm(x, p[n + ".weight"], p[n + ".bias"], 1e-5)


def _ffn(p, x, h):
    return lin(p, h + "fc2", F.gelu(lin(p, h + "fc1", x)))


def encode(cfg, p, features):
    """WhisperEncoder: features (B, n_mels, 3000) -> (B, 1500, d)."""
    x = F.gelu(F.conv1d(features, p["model.encoder.conv1.weight"], p["model.encoder.conv1.bias"], padding=1))
    x = F.gelu(F.conv1d(x, p["model.encoder.conv2.weight"], p["model.encoder.conv2.bias"], stride=2, padding=1))
    x = x.transpose(1, 2) + p["model.encoder.embed_positions.weight"]
    for i in range(cfg["encoder_layers"]):
        h = f"model.encoder.layers.{i}."
        a = _ln(p, x, h + "self_attn_layer_norm")
        x = x + _attn(cfg["encoder_attention_heads"], p, a, a, h + "self_attn.", None)
        x = x + _ffn(p, _ln(p, x, h + "final_layer_norm"), h)
    return _ln(p, x, "model.encoder.layer_norm")


def decode(cfg, p, enc, ids, last_only=False):
    """WhisperDecoder + proj_out (tied): ids (B, T) at positions 0..T-1 -> logits (B, T, V)."""
    T, H = ids.shape[1], cfg["decoder_attention_heads"]
    E = p["model.decoder.embed_tokens.weight"]
    y = E[ids] + p["model.decoder.embed_positions.weight"][:T]
    for i in range(cfg["decoder_layers"]):
        h = f"model.decoder.layers.{i}."
        a = _ln(p, y, h + "self_attn_layer_norm")
        y = y + _attn(H, p, a, a, h + "self_attn.", causal(T))
        y = y + _attn(H, p, _ln(p, y, h + "encoder_attn_layer_norm"), enc, h + "encoder_attn.", None)
        y = y + _ffn(p, _ln(p, y, h + "final_layer_norm"), h)
    y = _ln(p, y, "model.decoder.layer_norm")
    if last_only:
        y = y[:, -1:]
    return y @ E.T


def timestamp_filter(logits, tokens, sample_begin):
    """WhisperTimeStampLogitsProcessor (transformers main; openai-whisper's ApplyTimestampRules) on one row of
    logits (V,) given all the tokens so far (the prompt included; the first sample_begin are the prompt).
    Returns a filtered copy (-inf where suppressed). The rules are in the module's docstring."""
    out = logits.clone()
    out[NO_TIMESTAMPS] = -math.inf
    seq = list(tokens[sample_begin:])
    last_was = len(seq) >= 1 and seq[-1] >= TIMESTAMP_BEGIN
    penult_was = len(seq) < 2 or seq[-2] >= TIMESTAMP_BEGIN
    if last_was:
        if penult_was:
            out[TIMESTAMP_BEGIN:] = -math.inf
        else:
            out[:EOT] = -math.inf
    stamps = [t for t in seq if t >= TIMESTAMP_BEGIN]
    if stamps:
        last = stamps[-1] if (last_was and not penult_was) else stamps[-1] + 1
        out[TIMESTAMP_BEGIN:last] = -math.inf
    if len(tokens) == sample_begin:
        out[:TIMESTAMP_BEGIN] = -math.inf
        out[TIMESTAMP_BEGIN + MAX_INITIAL_TIMESTAMP_INDEX + 1:] = -math.inf
    logprobs = torch.log_softmax(out.to(D64), -1)
    if logprobs[TIMESTAMP_BEGIN:].logsumexp(-1) > logprobs[:TIMESTAMP_BEGIN].max():
        out[:TIMESTAMP_BEGIN] = -math.inf
    return out


def whisper_greedy(cfg, p, enc, prompt, timestamps, n_max=20):
    """generate()'s greedy search with Whisper's processors; returns the new tokens and the smallest gap between
    the chosen logit and the runner-up over the steps (how robust the choice is to rounding)."""
    tokens = list(prompt)
    margin = math.inf
    for _ in range(n_max):
        row = decode(cfg, p, enc, torch.tensor([tokens]), last_only=True)[0, -1].clone()
        row[SUPPRESS_TOKENS] = -math.inf
        if len(tokens) == len(prompt):
            row[BEGIN_SUPPRESS_TOKENS] = -math.inf
        if timestamps:
            row = timestamp_filter(row, tokens, len(prompt))
        top = row.topk(2).values
        margin = min(margin, float(top[0] - top[1]))
        nxt = int(row.argmax())
        tokens.append(nxt)
        if nxt == EOT:
            break
    return torch.tensor(tokens[len(prompt):], dtype=torch.int64), margin


def filter_cases():
    """Rows and prefixes for timestamp_filter alone (see the docstring)."""
    g = torch.Generator().manual_seed(77)
    cases = []
    for prefix, boost in (([SOT, 50363, 464, 50400], "eot"), ([SOT], None), ([SOT, 50363], None),
                          ([SOT, 50363, 464, 50400, 50400], None), ([SOT, 50363, 464, 11], "stamps"),
                          ([SOT, 50363, 464, 11], "text")):
        row = torch.randn(51864, generator=g)
        if boost == "eot":  # <|endoftext|> strong: the probability rule stays off
            row[EOT] += 14.0
        if boost == "text":  # two strong text tokens: the probability rule stays off
            row[[318, 1110]] += 14.0
        if boost == "stamps":  # the timestamps' total mass above every other token's
            row[TIMESTAMP_BEGIN:] += 2.0
        cases.append((row, torch.tensor(prefix, dtype=torch.int64)))
    return cases


def tokenizer_files(d):
    tok_dir = os.path.join(REPO, "data", "gpt2-tokenizer")
    with open(os.path.join(tok_dir, "encoder.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(tok_dir, "vocab.bpe"), encoding="utf-8") as f:
        merges_txt = f.read()
    merges = [ln for ln in merges_txt.split("\n")[1:] if ln]
    specials = ["<|endoftext|>", "<|startoftranscript|>"] + [f"<|{c}|>" for c in LANGUAGES] + [
        "<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
    stamps = ["<|%.2f|>" % (i * 0.02) for i in range(1501)]
    added = {t: 50256 + i for i, t in enumerate(specials + stamps)}
    assert added["<|notimestamps|>"] == NO_TIMESTAMPS and added["<|30.00|>"] == 51863 and len(set(added)) == 1608
    assert vocab["<|endoftext|>"] == EOT and len(vocab) == 50257
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = {"version": "1.0", "truncation": None, "padding": None,
           "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for t, i in added.items()],
           "normalizer": None, "pre_tokenizer": byte_level,
           "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                     "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                     "merges": merges}}

    def dump(name, obj, **kw):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, **kw)

    dump("tokenizer.json", tok)
    shutil.copyfile(os.path.join(tok_dir, "encoder.json"), os.path.join(d, "vocab.json"))
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write(merges_txt)
    dump("added_tokens.json", {t: i for t, i in added.items() if i > EOT}, indent=2)
    dump("special_tokens_map.json", {"additional_special_tokens": specials, "bos_token": "<|endoftext|>",
                                     "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
                                     "unk_token": "<|endoftext|>"}, indent=2)
    dump("tokenizer_config.json", {"add_bos_token": False, "add_prefix_space": False, "bos_token": "<|endoftext|>",
                                   "clean_up_tokenization_spaces": True, "eos_token": "<|endoftext|>",
                                   "errors": "replace", "model_max_length": 1024, "pad_token": "<|endoftext|>",
                                   "processor_class": "WhisperProcessor", "return_attention_mask": False,
                                   "tokenizer_class": "WhisperTokenizer", "unk_token": "<|endoftext|>"}, indent=2)
    dump("preprocessor_config.json", {"chunk_length": 30, "feature_extractor_type": "WhisperFeatureExtractor",
                                      "feature_size": 80, "hop_length": 160, "n_fft": 400, "n_samples": 480000,
                                      "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
                                      "processor_class": "WhisperProcessor", "return_attention_mask": False,
                                      "sampling_rate": 16000}, indent=2)


def make(out):
    root = os.path.join(out, "hub")
    os.makedirs(root, exist_ok=True)
    torch.manual_seed(306)  # chosen for a varied greedy output with margins well above f32 rounding
    cfg = whisper_config()
    disk, p = stored(whisper_params(cfg), torch.float32)
    d = os.path.join(root, "whisper_en")
    write_dir(d, cfg, disk, gen=generation_config())
    tokenizer_files(d)

    feats = (torch.randn(1, 80, 3000) * 0.5).clamp(-1.5, 1.5)
    ids = torch.tensor([[SOT, NO_TIMESTAMPS, 464, 3797, 3332, 257]])
    w = torch.randn(1, 6, cfg["vocab_size"])
    for t in p.values():
        t.requires_grad_(True)
    enc = encode(cfg, p, feats.double())
    logits = decode(cfg, p, enc, ids)
    (logits * w.double()).sum().backward()
    ref = {"input_features": feats, "encoder_hidden": enc.detach().float(), "decoder_input_ids": ids,
           "logits": logits.detach().float(), "w": w,
           **{"grad." + k: v.grad.float() for k, v in p.items()}}
    with torch.no_grad():
        for t in p.values():
            t.requires_grad_(False)
        enc = enc.detach()
        ref["greedy"], _ = whisper_greedy(cfg, p, enc, [SOT, NO_TIMESTAMPS], timestamps=False)
        ref["greedy_ts"], _ = whisper_greedy(cfg, p, enc, [SOT], timestamps=True)
        for k, (row, prefix) in enumerate(filter_cases()):
            sfx = f"_{k}" if k else ""
            ref["ts_filter_in" + sfx] = row
            ref["ts_filter_prefix" + sfx] = prefix
            ref["ts_filter_out" + sfx] = timestamp_filter(row.double(), prefix.tolist(), 1).float()
    save(os.path.join(root, "whisper_en.ref.safetensors"), ref)
