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

OUT/hub/whisper_en_beam: a second model for beam search (whisper_en's own beams never reach <|endoftext|>):
config.json, generation_config.json as whisper_en's, the tokenizer and preprocessor files copied from it;
model.safetensors: whisper_params under torch.manual_seed(1003), then embed_tokens' <|endoftext|> row (50256)
scaled by 3.5 (only eot's logit changes: eot is never fed back), so that some beams end within 20 tokens.
make() restores the global generator afterwards. OUT/hub/whisper_en_beam.ref.safetensors:
  input_features   (1, 80, 3000) f32: drawn as whisper_en's, right after the weights under the same seed.
  encoder_hidden   (1, 1500, 16) f32.
  greedy           (13,) i64: as whisper_en's; it ends with <|endoftext|> (kept): [37842 x5, 46455 x5, 24305,
                   24305, 50256]. greedy_ts (2,) i64: [50398, 50256].
  beam             (20,) i64 and beam_sum_logprob (1,) f32: beam search without timestamps, prompt [50257, 50362];
  beam_ts          (4,) i64 and beam_ts_sum_logprob (1,) f32: with timestamps, prompt [50257], the filters as
                   greedy_ts's. The sums are f32 because neither fixtures.save nor the C++ reader has F64
                   (the float64 values: -145.583184369, -24.826136677).
whisper_beam is openai-whisper's BeamSearchDecoder + MaximumLikelihoodRanker (decoding.py of v20231117) for one
audio, beam_size 5, patience 1.0 (max_candidates = round(5 * 1.0) = 5), length_penalty None, at most 20 new
tokens (openai's sample_len), computed in float64 (openai: log_softmax and the running sums in float32):
  * the 5 beams start as the prompt with sum_logprob 0 (repeat_interleave). Each step, for each beam j in order:
    its last position's logits, the filters whisper_greedy applies (suppress_tokens; begin_suppress_tokens
    [220, 50256] when the beam holds only the prompt, i.e. at the first step; then timestamp_filter on the
    beam's own tokens), log_softmax, topk(6); candidate = beam + [token] with score sums[j] + logprob, in a dict
    keyed by the whole sequence: a repeated sequence keeps its first position and takes the last score, so at
    the first step (5 equal beams) there are 6 candidates, later up to 30.
  * the candidates sorted by score, descending, stable (ties keep dict order: beam order, then topk order);
    walking that list: one ending in <|endoftext|> goes to this step's finished dict; any other becomes the
    next live beam (its score the new sum); the walk stops once 5 are live, so eot candidates after that
    point are dropped. Then this step's finished, best first, join the audio's finished list (an ordered dict)
    while it holds fewer than 5 (the rest dropped). If it holds 5 (completed) the loop ends, else the next step
    runs on the 5 live beams. A sequence can't end at the first generated step: begin_suppress_tokens (and
    timestamp rule 4) puts eot at -inf there, so finished sequences hold at least one token (no zero length).
  * after 20 steps, or on completion: finalize: when the list holds fewer than beam_size (5) the live beams
    (their 20 tokens + eot, with their sums) are added best first (np.argsort(sums)[::-1]: equal sums in
    reverse beam order) until it holds 5; a completed list gets nothing. If nothing finished all 5 live beams
    are the candidates.
  * rank: each candidate's tokens after the prompt up to the first eot (eot excluded), score = sum_logprob /
    len (length_penalty None); the first maximum in the list's order (np.argmax) is chosen; stored: its tokens
    (no eot) and its sum_logprob (the eot's logprob included when it ended with eot; the live ones have none).
  Here: beam: 4 candidates end at step 2 ([38314], [37842], [41071], [3328], sums -14.67 .. -14.99), none
  later; at the limit finalize adds the best live beam (20 tokens, -145.58, -7.28 a token), which wins
  (greedy ends at step 13 instead). beam_ts: 4 end at step 2 ([50398], [50369], [50400], [50408]), the 5th at
  step 5 ([50398, 46220, 51344, 51344], -24.83, -6.21 a token): completed, it wins. Robustness (whisper_beam's
  info): every score gap that decides the result (the last live beam kept against every eot candidate, every
  lower candidate and every beam's 7th token; a 6th token against the 7th when that is above the cut; the
  finished list's and finalize's cut-offs) is >= 0.0028 (beam) and 0.0065 (beam_ts); the ranking's best beats
  the runner-up by 7.39 and 2.66 a token; rule 5's sides differ by >= 2.2; greedy's margins 0.012 and 0.49.
  The f32 forward gives the same beams, its sums within 5e-7.
check() (python3 ref_whisper.py, about 15 s, not part of make()) compares whisper_beam with _beam_plain (a
second implementation: one decoder call per beam, numpy, lists instead of dicts) for beam sizes 5, 3 with
patience 2, and 2, on both models, with and without timestamps; beam_size 1 with whisper_greedy (eot dropped);
the f32 forward's beams with the float64 ones.
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
        y = y + _attn(H, p, a, a, h + "self_attn.", causal(T).to(y.dtype))
        y = y + _attn(H, p, _ln(p, y, h + "encoder_attn_layer_norm"), enc, h + "encoder_attn.", None)
        y = y + _ffn(p, _ln(p, y, h + "final_layer_norm"), h)
    y = _ln(p, y, "model.decoder.layer_norm")
    if last_only:
        y = y[:, -1:]
    return y @ E.T


def timestamp_filter(logits, tokens, sample_begin, rule5_gaps=None):
    """WhisperTimeStampLogitsProcessor (transformers main; openai-whisper's ApplyTimestampRules) on one row of
    logits (V,) given all the tokens so far (the prompt included; the first sample_begin are the prompt).
    Returns a filtered copy (-inf where suppressed). The rules are in the module's docstring. rule5_gaps: a list
    to which |rule 5's two sides| is appended (a diagnostic; nothing else changes)."""
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
    if rule5_gaps is not None:
        rule5_gaps.append(abs(float(logprobs[TIMESTAMP_BEGIN:].logsumexp(-1) - logprobs[:TIMESTAMP_BEGIN].max())))
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


def _filtered(row, tokens, n_prompt, timestamps, rule5_gaps=None):
    """The logit filters whisper_greedy applies, on a copy of one row: suppress_tokens, begin_suppress_tokens at
    the first generated step, then (timestamps) timestamp_filter."""
    row = row.clone()
    row[SUPPRESS_TOKENS] = -math.inf
    if len(tokens) == n_prompt:
        row[BEGIN_SUPPRESS_TOKENS] = -math.inf
    if timestamps:
        row = timestamp_filter(row, tokens, n_prompt, rule5_gaps)
    return row


def whisper_beam(cfg, p, enc, prompt, timestamps, beam_size=5, patience=1.0, n_max=20):
    """openai-whisper's BeamSearchDecoder + MaximumLikelihoodRanker (length_penalty None), decoding.py of
    v20231117, for one audio, in float64 (openai: log_softmax and sum_logprobs in float32). Returns the chosen
    candidate's tokens after the prompt without <|endoftext|>, its sum_logprob, and diagnostics (see below)."""
    n_prompt, max_candidates = len(prompt), round(beam_size * patience)
    beams, sums = [list(prompt) for _ in range(beam_size)], [0.0] * beam_size  # repeat_interleave: all the prompt
    finished = {}  # the audio's finished_sequences: sequence (prompt .. eot) -> sum_logprob, in insertion order
    info = {"margin": math.inf, "rule5": math.inf, "steps": 0, "completed": False, "eot_candidates": 0}
    rule5 = []
    for _ in range(n_max):  # openai: range(sample_len)
        info["steps"] += 1
        logits = decode(cfg, p, enc.expand(beam_size, -1, -1), torch.tensor(beams), last_only=True)[:, -1].to(D64)
        scores, beyond = {}, []  # sequence -> score (a dict: equal sequences from equal beams collapse)
        for j in range(beam_size):
            lp = torch.log_softmax(_filtered(logits[j], beams[j], n_prompt, timestamps, rule5), -1)
            top = lp.topk(beam_size + 2)  # the first beam_size + 1: openai's topk(beam_size + 1)
            for v, t in zip(top.values[:-1].tolist(), top.indices[:-1].tolist()):
                scores[tuple(beams[j] + [t])] = sums[j] + v
            beyond.append((sums[j] + float(top.values[-2]), sums[j] + float(top.values[-1])))  # diagnostic
        ranked = sorted(scores, key=scores.get, reverse=True)  # stable: ties stay in insertion order
        next_beams, next_sums, newly = [], [], {}
        for seq in ranked:
            if seq[-1] == EOT:
                newly[seq] = scores[seq]
            else:
                next_beams.append(list(seq))
                next_sums.append(scores[seq])
                if len(next_beams) == beam_size:
                    break
        assert len(next_beams) == beam_size and all(math.isfinite(s) for s in next_sums)
        info["eot_candidates"] += len(newly)
        room = max_candidates - len(finished)
        for seq in sorted(newly, key=newly.get, reverse=True):
            if len(finished) >= max_candidates:
                break  # the candidate list is full
            finished[seq] = newly[seq]
        # robustness (how far f32 rounding is from changing the result): the smallest gap between the last live
        # beam kept and every eot candidate, every lower candidate and every beam's best token beyond its topk;
        # between a beam's last topk token and its next when that next is above the cut; between the last
        # finished sequence added and the first dropped when the list filled up
        cut = next_sums[-1]
        gaps = [abs(cut - s) for q, s in scores.items() if q[-1] == EOT or s < cut]
        gaps += [abs(cut - nxt) for _, nxt in beyond] + [last - nxt for last, nxt in beyond if nxt > cut]
        done = sorted(newly.values(), reverse=True)
        if 0 < room < len(done):
            gaps.append(done[room - 1] - done[room])
        info["margin"] = min([info["margin"]] + [g for g in gaps if math.isfinite(g)])
        beams, sums = next_beams, next_sums
        if len(finished) >= max_candidates:  # completed
            info["completed"] = True
            break
    info["finished_by_eot"] = len(finished)
    need = beam_size - len(finished)
    if 0 < need < beam_size:  # finalize takes some of the live beams: the gap at its boundary
        live = sorted(sums, reverse=True)
        info["margin"] = min(info["margin"], live[need - 1] - live[need])
    if len(finished) < beam_size:  # finalize: the live beams, best first (np.argsort(sum_logprobs)[::-1])
        for j in sorted(range(beam_size), key=lambda j: (sums[j], j), reverse=True):
            finished[tuple(beams[j] + [EOT])] = sums[j]
            if len(finished) >= beam_size:
                break
    bodies = [list(seq[n_prompt:seq.index(EOT, n_prompt)]) for seq in finished]  # t[sample_begin : first eot]
    sum_lps = list(finished.values())
    ranks = [s / len(b) for b, s in zip(bodies, sum_lps)]  # MaximumLikelihoodRanker, length_penalty None
    best = ranks.index(max(ranks))  # np.argmax: the first of equal maxima
    order = sorted(ranks, reverse=True)
    info["rank_margin"] = order[0] - order[1] if len(order) > 1 else math.inf
    info["rule5"] = min(rule5) if rule5 else math.inf
    info["candidates"] = list(zip(bodies, sum_lps))
    return torch.tensor(bodies[best], dtype=torch.int64), sum_lps[best], info


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
    make_beam(root, cfg)


BEAM_SEED, BEAM_EOT_SCALE = 1003, 3.5


def beam_model(cfg):
    """whisper_en_beam's weights (f32 as stored, and their float64 values) and input_features: whisper_params under
    seed 1003 with embed_tokens' <|endoftext|> row scaled by 3.5 (its logit competes: some beams end)."""
    torch.manual_seed(BEAM_SEED)
    raw = whisper_params(cfg)
    raw["model.decoder.embed_tokens.weight"][EOT] *= BEAM_EOT_SCALE
    disk, p = stored(raw, torch.float32)
    feats = (torch.randn(1, 80, 3000) * 0.5).clamp(-1.5, 1.5)
    return disk, p, feats


def make_beam(root, cfg):
    """OUT/hub/whisper_en_beam and whisper_en_beam.ref.safetensors (the module's docstring)."""
    rng = torch.get_rng_state()  # make()'s callers see the generator as before
    disk, p, feats = beam_model(cfg)
    torch.set_rng_state(rng)
    d = os.path.join(root, "whisper_en_beam")
    write_dir(d, cfg, disk, gen=generation_config())
    src = os.path.join(root, "whisper_en")
    for f in sorted(os.listdir(src)):
        if f not in ("config.json", "generation_config.json", "model.safetensors"):
            shutil.copyfile(os.path.join(src, f), os.path.join(d, f))
    with torch.no_grad():
        enc = encode(cfg, p, feats.double())
        ref = {"input_features": feats, "encoder_hidden": enc.float()}
        ref["greedy"], _ = whisper_greedy(cfg, p, enc, [SOT, NO_TIMESTAMPS], timestamps=False)
        ref["greedy_ts"], _ = whisper_greedy(cfg, p, enc, [SOT], timestamps=True)
        for name, prompt, ts in (("beam", [SOT, NO_TIMESTAMPS], False), ("beam_ts", [SOT], True)):
            ref[name], s, _ = whisper_beam(cfg, p, enc, prompt, ts)
            ref[name + "_sum_logprob"] = torch.tensor([s], dtype=torch.float32)
    save(os.path.join(root, "whisper_en_beam.ref.safetensors"), ref)


def _beam_plain(cfg, p, enc, prompt, timestamps, beam_size, patience=1.0, n_max=20):
    """whisper_beam written a second way, for check(): one decoder call per beam, numpy rows, lists of pairs
    instead of dicts, the sorts as index sorts, finalize and the ranker on numpy as openai's code has them."""
    import numpy as np
    n_prompt, max_candidates = len(prompt), round(beam_size * patience)
    beams, sums, finished = [list(prompt)] * beam_size, np.zeros(beam_size), []  # finished: [tokens, score]
    for _ in range(n_max):
        cands = []  # [sequence, score] in insertion order; a repeated sequence overwrites its score in place
        for j in range(beam_size):
            row = decode(cfg, p, enc, torch.tensor([beams[j]]))[0, -1].numpy().copy()
            row[SUPPRESS_TOKENS] = -np.inf
            if len(beams[j]) == n_prompt:
                row[BEGIN_SUPPRESS_TOKENS] = -np.inf
            if timestamps:
                row = timestamp_filter(torch.from_numpy(row), beams[j], n_prompt).numpy()
            m = row.max()
            lp = row - m - np.log(np.exp(row - m).sum())
            for t in np.argsort(-lp, kind="stable")[:beam_size + 1]:
                seq, score = beams[j] + [int(t)], float(sums[j] + lp[t])
                hit = [c for c in cands if c[0] == seq]
                if hit:
                    hit[0][1] = score
                else:
                    cands.append([seq, score])
        order = sorted(range(len(cands)), key=lambda i: (-cands[i][1], i))
        live, ended = [], []
        for i in order:
            (ended if cands[i][0][-1] == EOT else live).append(cands[i])
            if len(live) == beam_size:
                break
        for seq, score in sorted(ended, key=lambda c: -c[1]):
            if len(finished) < max_candidates:
                finished.append([seq, score])
        beams, sums = [c[0] for c in live], np.array([c[1] for c in live])
        if len(finished) >= max_candidates:
            break
    if len(finished) < beam_size:
        for j in list(np.argsort(sums))[::-1]:
            finished.append([beams[j] + [EOT], float(sums[j])])
            if len(finished) >= beam_size:
                break
    bodies = [np.array(seq)[n_prompt:np.nonzero(np.array(seq) == EOT)[0][0]] for seq, _ in finished]
    best = int(np.argmax([s / len(b) for b, (_, s) in zip(bodies, finished)]))
    return bodies[best].tolist(), finished[best][1]


def check():
    """Checks of whisper_beam (python3 ref_whisper.py): against _beam_plain (beam sizes 5, 3 with patience 2, 2),
    beam_size 1 against whisper_greedy, the f32 forward (as the C++ code computes) giving the same beams, and
    the main model's fixtures unchanged by the beam model (make() leaves the generator as it found it)."""
    cfg = whisper_config()
    torch.manual_seed(306)
    _, p_main = stored(whisper_params(cfg), torch.float32)
    feats_main = (torch.randn(1, 80, 3000) * 0.5).clamp(-1.5, 1.5)
    _, p_beam, feats_beam = beam_model(cfg)
    with torch.no_grad():
        for label, p, feats in (("whisper_en", p_main, feats_main), ("whisper_en_beam", p_beam, feats_beam)):
            enc = encode(cfg, p, feats.double())
            p32 = {k: v.float() for k, v in p.items()}
            enc32 = encode(cfg, p32, feats)
            for prompt, ts in (([SOT, NO_TIMESTAMPS], False), ([SOT], True)):
                tag = f"{label} {'ts' if ts else 'no ts'}"
                g, _ = whisper_greedy(cfg, p, enc, prompt, ts)
                g = g.tolist()
                b1, _, _ = whisper_beam(cfg, p, enc, prompt, ts, beam_size=1)
                assert b1.tolist() == (g[:-1] if g[-1] == EOT else g), tag
                for size, patience in ((5, 1.0), (3, 2.0), (2, 1.0)):
                    b, s, info = whisper_beam(cfg, p, enc, prompt, ts, size, patience)
                    b2, s2 = _beam_plain(cfg, p, enc, prompt, ts, size, patience)
                    assert b.tolist() == b2 and abs(s - s2) < 1e-9, (tag, size, b.tolist(), b2, s, s2)
                    if size == 5:
                        b3, s3, _ = whisper_beam(cfg, p32, enc32, prompt, ts)
                        assert b3.tolist() == b.tolist() and abs(s3 - s) < 1e-3, (tag, b3.tolist(), s3, s)
                        print(f"{tag}: greedy {g}\n  beam {b.tolist()} sum_logprob {s:.6f} (f32 forward "
                              f"{s3 - s:+.2e}) steps {info['steps']} completed {info['completed']} finished "
                              f"{info['finished_by_eot']}/{info['eot_candidates']} margin {info['margin']:.4f} "
                              f"rank margin {info['rank_margin']:.4f} rule5 {info['rule5']:.3f}")
                        for body, lp in info["candidates"]:
                            print(f"    {len(body):2d} {lp:.6f} {lp / len(body):.6f} {body}")
    print("ok")


if __name__ == "__main__":
    check()
