"""GGUF fixtures written by llama.cpp's conventions (gguf_convention.py), independent of the
engine's writer, with PyTorch reference logits:

  gguf_llama.gguf   llama: GQA (4 heads, 2 kv), Q/K rows permuted as convert_hf_to_gguf.py does,
                    untied output, byte-level BPE vocabulary (tokenizer.ggml.model gpt2)
  gguf_qwen2.gguf   qwen2: q/k/v biases, no permutation, tied embeddings, rope theta 1e6
  gguf_gpt2.gguf    gpt2: Conv1D weights transposed, learned positions, tied embeddings
  gguf_llama_quant.gguf  llama whose matrices are random blocks of every quantized type (Q4_K, Q5_K,
                    Q6_K, Q8_0, Q4_0, Q4_1, Q5_0); the reference model uses their numpy dequantization
  gguf_spm.gguf     llama with a SentencePiece BPE vocabulary (tokenizer.ggml.model llama: scores,
                    token types, byte fallback) trained here with sentencepiece, and the ids
                    sentencepiece gives a few lines (gguf_spm.safetensors)
  gguf_blocks.gguf  one tensor per block type (random blocks) + gguf_blocks.safetensors with the
                    numpy dequantization of each (quants.py's definitions) and a Q8_0 quantization
The logits come from the Hugging Face form of each model (before any GGUF permutation).
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

import gguf_convention as g
from fixtures import save
from ref_position import rope_halves

S, A = g.STRING, g.ARRAY


def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def byte_level_vocab():
    """256 byte tokens, a few merges, then <|endoftext|> (control)."""
    tokens = [bytes_to_unicode()[b] for b in range(256)]
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("o", "r"), ("Ġ", "w"), ("Ġw", "or"), ("l", "d"),
              ("e", "ll"), ("h", "ell")]
    for a, b in merges:
        tokens.append(a + b)
    tokens.append("<|endoftext|>")
    types = [1] * (len(tokens) - 1) + [3]
    eot = len(tokens) - 1
    meta = [("tokenizer.ggml.model", (S, "gpt2")), ("tokenizer.ggml.pre", (S, "gpt-2")),
            ("tokenizer.ggml.tokens", (A, (S, tokens))), ("tokenizer.ggml.token_type", (A, (g.I32, types))),
            ("tokenizer.ggml.merges", (A, (S, [a + " " + b for a, b in merges]))),
            ("tokenizer.ggml.bos_token_id", (g.U32, eot)), ("tokenizer.ggml.eos_token_id", (g.U32, eot)),
            ("tokenizer.chat_template", (S, "{% for m in messages %}{{ m['content'] }}{% endfor %}"))]
    return len(tokens), meta


def W(*shape, std=0.2):
    return torch.randn(*shape) * std


def tensor(name, t, tname="F32"):
    a = t.detach().numpy().astype(np.float32)
    return (name, tname, g.encode(a, tname), list(a.shape))


def attention(q, k, v, T):
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1]) + torch.triu(torch.full((T, T), float("-inf")), 1)
    return torch.softmax(s, -1) @ v


def llama_like(out, arch):
    torch.manual_seed(21 if arch == "llama" else 22)
    V, tok_meta = byte_level_vocab()
    C, H, KV, FF, L, ctx = 64, 4, 2, 96, 2, 128
    D = C // H
    theta, eps = (10000.0, 1e-5) if arch == "llama" else (1000000.0, 1e-6)
    bias, tied = arch == "qwen2", arch == "qwen2"
    p = {"embed": W(V, C), "norm": 1 + 0.1 * torch.randn(C), "lm_head": W(V, C)}
    layers = []
    for _ in range(L):
        layers.append({"in_norm": 1 + 0.1 * torch.randn(C), "q": W(H * D, C), "k": W(KV * D, C), "v": W(KV * D, C),
                       "qb": W(H * D, std=0.1), "kb": W(KV * D, std=0.1), "vb": W(KV * D, std=0.1),
                       "o": W(C, H * D), "post_norm": 1 + 0.1 * torch.randn(C), "gate": W(FF, C), "up": W(FF, C),
                       "down": W(C, FF)})
    T = 12
    ids = torch.randint(0, V, (1, T))
    pos = torch.arange(T)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    x = p["embed"][ids]
    for ly in layers:
        a = rms(x, ly["in_norm"])
        q, k, v = a @ ly["q"].T, a @ ly["k"].T, a @ ly["v"].T
        if bias:
            q, k, v = q + ly["qb"], k + ly["kb"], v + ly["vb"]
        q = q.reshape(1, T, H, D).transpose(1, 2)
        k = k.reshape(1, T, KV, D).transpose(1, 2)
        v = v.reshape(1, T, KV, D).transpose(1, 2)
        q, k = rope_halves(q, pos, theta), rope_halves(k, pos, theta)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        x = x + attention(q, k, v, T).transpose(1, 2).reshape(1, T, C) @ ly["o"].T
        m = rms(x, ly["post_norm"])
        x = x + (F.silu(m @ ly["gate"].T) * (m @ ly["up"].T)) @ ly["down"].T
    x = rms(x, p["norm"])
    logits = x @ (p["embed"] if tied else p["lm_head"]).T

    meta = [("general.architecture", (S, arch)), ("general.name", (S, f"tiny-{arch}")),
            ("general.file_type", (g.U32, 0)),
            (f"{arch}.context_length", (g.U32, ctx)), (f"{arch}.embedding_length", (g.U32, C)),
            (f"{arch}.block_count", (g.U32, L)), (f"{arch}.feed_forward_length", (g.U32, FF)),
            (f"{arch}.attention.head_count", (g.U32, H)), (f"{arch}.attention.head_count_kv", (g.U32, KV)),
            (f"{arch}.rope.freq_base", (g.F32, theta)), (f"{arch}.rope.dimension_count", (g.U32, D)),
            (f"{arch}.attention.layer_norm_rms_epsilon", (g.F32, eps))] + tok_meta
    # llama.cpp's llama architecture rotates adjacent pairs: its converter permutes Q/K rows.
    perm_q = (lambda w: torch.from_numpy(g.permute_qk(w.numpy(), H))) if arch == "llama" else (lambda w: w)
    perm_k = (lambda w: torch.from_numpy(g.permute_qk(w.numpy(), KV))) if arch == "llama" else (lambda w: w)
    ts = [tensor("token_embd.weight", p["embed"])]
    for i, ly in enumerate(layers):
        b = f"blk.{i}."
        ts += [tensor(b + "attn_norm.weight", ly["in_norm"]), tensor(b + "attn_q.weight", perm_q(ly["q"])),
               tensor(b + "attn_k.weight", perm_k(ly["k"])), tensor(b + "attn_v.weight", ly["v"])]
        if bias:
            ts += [tensor(b + "attn_q.bias", perm_q(ly["qb"])), tensor(b + "attn_k.bias", perm_k(ly["kb"])),
                   tensor(b + "attn_v.bias", ly["vb"])]
        ts += [tensor(b + "attn_output.weight", ly["o"]), tensor(b + "ffn_norm.weight", ly["post_norm"]),
               tensor(b + "ffn_gate.weight", ly["gate"]), tensor(b + "ffn_up.weight", ly["up"]),
               tensor(b + "ffn_down.weight", ly["down"])]
    ts.append(tensor("output_norm.weight", p["norm"]))
    if not tied:
        ts.append(tensor("output.weight", p["lm_head"]))
    g.write_gguf(os.path.join(out, f"gguf_{arch}.gguf"), meta, ts)
    save(os.path.join(out, f"gguf_{arch}.safetensors"), {"input_ids": ids, "logits": logits})


def llama_quant(out):
    """Every matrix a random quantized tensor (in GGUF row order); torch runs on the numpy
    dequantization, un-permuted back to Hugging Face's Q/K order."""
    torch.manual_seed(24)
    rng = np.random.default_rng(24)
    V, tok_meta = byte_level_vocab()
    C, H, KV, FF, ctx, eps, theta = 256, 4, 2, 512, 64, 1e-5, 10000.0
    D = C // H

    def quant(name, tname, shape):
        n_blocks = int(np.prod(shape)) // g.GGML[tname][1]
        raw = g.random_blocks(tname, n_blocks, rng, g.WEIGHT_SCALE[tname])
        w = torch.from_numpy(g.DEQUANT[tname](raw).reshape(shape).astype(np.float32))
        return (name, tname, raw.tobytes(), list(shape)), w

    def unpermute(w, n_head):  # inverse of permute_qk
        return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    ts, w = [], {}
    for name, tname, shape in [("token_embd.weight", "Q6_K", (V, C)), ("blk.0.attn_q.weight", "Q4_K", (H * D, C)),
                               ("blk.0.attn_k.weight", "Q5_K", (KV * D, C)), ("blk.0.attn_v.weight", "Q6_K", (KV * D, C)),
                               ("blk.0.attn_output.weight", "Q8_0", (C, H * D)), ("blk.0.ffn_gate.weight", "Q4_0", (FF, C)),
                               ("blk.0.ffn_up.weight", "Q4_1", (FF, C)), ("blk.0.ffn_down.weight", "Q5_0", (C, FF)),
                               ("output.weight", "Q8_0", (V, C))]:
        t, w[name] = quant(name, tname, shape)
        ts.append(t)
    n1, n2, nf = (1 + 0.1 * torch.randn(C) for _ in range(3))
    ts += [tensor("blk.0.attn_norm.weight", n1), tensor("blk.0.ffn_norm.weight", n2), tensor("output_norm.weight", nf)]
    q_w, k_w = unpermute(w["blk.0.attn_q.weight"], H), unpermute(w["blk.0.attn_k.weight"], KV)

    T = 10
    ids = torch.randint(0, V, (1, T))
    pos = torch.arange(T)

    def rms(x, g_):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g_

    x = w["token_embd.weight"][ids]
    a = rms(x, n1)
    q = (a @ q_w.T).reshape(1, T, H, D).transpose(1, 2)
    k = (a @ k_w.T).reshape(1, T, KV, D).transpose(1, 2)
    v = (a @ w["blk.0.attn_v.weight"].T).reshape(1, T, KV, D).transpose(1, 2)
    q, k = rope_halves(q, pos, theta), rope_halves(k, pos, theta)
    k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
    x = x + attention(q, k, v, T).transpose(1, 2).reshape(1, T, C) @ w["blk.0.attn_output.weight"].T
    m = rms(x, n2)
    x = x + (F.silu(m @ w["blk.0.ffn_gate.weight"].T) * (m @ w["blk.0.ffn_up.weight"].T)) @ w["blk.0.ffn_down.weight"].T
    logits = rms(x, nf) @ w["output.weight"].T
    meta = [("general.architecture", (S, "llama")), ("general.file_type", (g.U32, 15)),
            ("general.quantization_version", (g.U32, 2)),
            ("llama.context_length", (g.U32, ctx)), ("llama.embedding_length", (g.U32, C)),
            ("llama.block_count", (g.U32, 1)), ("llama.feed_forward_length", (g.U32, FF)),
            ("llama.attention.head_count", (g.U32, H)), ("llama.attention.head_count_kv", (g.U32, KV)),
            ("llama.rope.freq_base", (g.F32, theta)), ("llama.rope.dimension_count", (g.U32, D)),
            ("llama.attention.layer_norm_rms_epsilon", (g.F32, eps))] + tok_meta
    g.write_gguf(os.path.join(out, "gguf_llama_quant.gguf"), meta, ts)
    save(os.path.join(out, "gguf_llama_quant.safetensors"), {"input_ids": ids, "logits": logits})


def gpt2(out):
    torch.manual_seed(23)
    V, tok_meta = byte_level_vocab()
    C, H, L, ctx = 64, 4, 2, 64
    D, eps = C // H, 1e-5
    wte, wpe = W(V, C), W(ctx, C, std=0.1)
    layers = [{"ln1w": 1 + 0.1 * torch.randn(C), "ln1b": W(C, std=0.1), "attn_w": W(C, 3 * C), "attn_b": W(3 * C, std=0.1),
               "proj_w": W(C, C), "proj_b": W(C, std=0.1), "ln2w": 1 + 0.1 * torch.randn(C), "ln2b": W(C, std=0.1),
               "fc_w": W(C, 4 * C), "fc_b": W(4 * C, std=0.1), "fc2_w": W(4 * C, C), "fc2_b": W(C, std=0.1)}
              for _ in range(L)]  # Conv1D weights (in, out), as Hugging Face's GPT-2 stores them
    lnf_w, lnf_b = 1 + 0.1 * torch.randn(C), W(C, std=0.1)
    T = 12
    ids = torch.randint(0, V, (1, T))
    x = wte[ids] + wpe[torch.arange(T)]
    for ly in layers:
        a = F.layer_norm(x, (C,), ly["ln1w"], ly["ln1b"], eps)
        q, k, v = (a @ ly["attn_w"] + ly["attn_b"]).split(C, dim=-1)
        q, k, v = (t.reshape(1, T, H, D).transpose(1, 2) for t in (q, k, v))
        x = x + attention(q, k, v, T).transpose(1, 2).reshape(1, T, C) @ ly["proj_w"] + ly["proj_b"]
        m = F.layer_norm(x, (C,), ly["ln2w"], ly["ln2b"], eps)
        m = F.gelu(m @ ly["fc_w"] + ly["fc_b"], approximate="tanh")
        x = x + m @ ly["fc2_w"] + ly["fc2_b"]
    x = F.layer_norm(x, (C,), lnf_w, lnf_b, eps)
    logits = x @ wte.T

    meta = [("general.architecture", (S, "gpt2")), ("general.name", (S, "tiny-gpt2")), ("general.file_type", (g.U32, 0)),
            ("gpt2.context_length", (g.U32, ctx)), ("gpt2.embedding_length", (g.U32, C)),
            ("gpt2.feed_forward_length", (g.U32, 4 * C)), ("gpt2.block_count", (g.U32, L)),
            ("gpt2.attention.head_count", (g.U32, H)), ("gpt2.attention.layer_norm_epsilon", (g.F32, eps))] + tok_meta
    ts = [tensor("token_embd.weight", wte), tensor("position_embd.weight", wpe)]
    for i, ly in enumerate(layers):
        b = f"blk.{i}."
        ts += [tensor(b + "attn_norm.weight", ly["ln1w"]), tensor(b + "attn_norm.bias", ly["ln1b"]),
               tensor(b + "attn_qkv.weight", ly["attn_w"].T), tensor(b + "attn_qkv.bias", ly["attn_b"]),
               tensor(b + "attn_output.weight", ly["proj_w"].T), tensor(b + "attn_output.bias", ly["proj_b"]),
               tensor(b + "ffn_norm.weight", ly["ln2w"]), tensor(b + "ffn_norm.bias", ly["ln2b"]),
               tensor(b + "ffn_up.weight", ly["fc_w"].T), tensor(b + "ffn_up.bias", ly["fc_b"]),
               tensor(b + "ffn_down.weight", ly["fc2_w"].T), tensor(b + "ffn_down.bias", ly["fc2_b"])]
    ts += [tensor("output_norm.weight", lnf_w), tensor("output_norm.bias", lnf_b)]
    g.write_gguf(os.path.join(out, "gguf_gpt2.gguf"), meta, ts)
    save(os.path.join(out, "gguf_gpt2.safetensors"), {"input_ids": ids, "logits": logits})


def blocks(out):
    rng = np.random.default_rng(5)
    fixture, ts = {}, []
    for tname, deq in g.DEQUANT.items():
        _, block, size = g.GGML[tname]
        n = 2 * 256 // block * 3  # 3 rows of 512 weights
        raw = g.random_blocks(tname, n, rng)
        want = deq(raw).reshape(3, 512).astype(np.float32)
        fixture["raw." + tname] = torch.from_numpy(raw.copy())
        fixture["want." + tname] = torch.from_numpy(want)
        ts.append(("t." + tname, tname, raw.tobytes(), [3, 512]))
    h = rng.standard_normal((3, 40)).astype(np.float16)
    fixture["want.F16"] = torch.from_numpy(h.astype(np.float32))
    ts.append(("t.F16", "F16", h.tobytes(), [3, 40]))
    x = (rng.standard_normal(32 * 7) * 3).astype(np.float32)
    x[:32] = 0.0  # an all-zero block: d = 0
    x[40] = 127.0 / 2 * (np.abs(x[32:64]).max() / 127.0) * 2  # exercise rounding near the top
    fixture["q8_0.input"] = torch.from_numpy(x)
    fixture["q8_0.bytes"] = torch.from_numpy(g.quantize_q8_0(x).reshape(-1).copy())
    # The other reference quantizers (ggml's quantize_row_*_ref): 4 super-blocks of mixed scales
    # (one all zero, one with a zero sub-block, one with an outlier, one all positive).
    xq = (rng.standard_normal(256 * 4) * 0.05).astype(np.float32)
    xq[:256] = 0.0
    xq[256:288] = 0.0
    xq[600] = 1.5
    xq[768:] = np.abs(xq[768:]) + 0.01
    fixture["quant.input"] = torch.from_numpy(xq)
    for tname, quantize in g.QUANTIZE.items():
        if tname != "Q8_0":
            fixture["quant." + tname] = torch.from_numpy(quantize(xq).reshape(-1).copy())
    g.write_gguf(os.path.join(out, "gguf_blocks.gguf"), [("general.architecture", (S, "none"))], ts)
    save(os.path.join(out, "gguf_blocks.safetensors"), fixture)


SPM_LINES = ["Hello world, how are you?", "  leading spaces and  double  spaces",
             "ROMEO: O, she doth teach the torches to burn bright!", "unicode: caf\u00e9 \u00fcber \u65e5\u672c \U0001F600",
             "numbers 12345 and symbols #@!"]


def spm_llama(out):
    """A SentencePiece BPE model trained on Shakespeare (Llama-2 style: no normalization, spaces kept),
    stored as llama.cpp's converter stores it."""
    import io
    import pathlib

    import sentencepiece as spm

    text = (pathlib.Path(__file__).resolve().parents[2] / "data" / "tinyshakespeare.txt").read_text()[:60000]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text.splitlines()), model_writer=model, model_type="bpe",
                                   vocab_size=400, byte_fallback=True, character_coverage=1.0, num_threads=1,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = [2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 5 if sp.is_unused(i) else 6 if sp.is_byte(i) else 1
             for i in range(n)]
    meta = [("general.architecture", (S, "llama")), ("llama.context_length", (g.U32, 32)),
            ("llama.embedding_length", (g.U32, 8)), ("llama.block_count", (g.U32, 1)),
            ("llama.feed_forward_length", (g.U32, 16)), ("llama.attention.head_count", (g.U32, 2)),
            ("tokenizer.ggml.model", (S, "llama")), ("tokenizer.ggml.tokens", (A, (S, tokens))),
            ("tokenizer.ggml.scores", (A, (g.F32, scores))), ("tokenizer.ggml.token_type", (A, (g.I32, types))),
            ("tokenizer.ggml.bos_token_id", (g.U32, sp.bos_id())), ("tokenizer.ggml.eos_token_id", (g.U32, sp.eos_id())),
            ("tokenizer.ggml.unknown_token_id", (g.U32, sp.unk_id())),
            ("tokenizer.ggml.add_bos_token", (g.BOOL, False))]
    ts = [tensor("token_embd.weight", W(n, 8))]
    for name, shape in [("attn_norm", (8,)), ("attn_q", (8, 8)), ("attn_k", (8, 8)), ("attn_v", (8, 8)),
                        ("attn_output", (8, 8)), ("ffn_norm", (8,)), ("ffn_gate", (16, 8)), ("ffn_up", (16, 8)),
                        ("ffn_down", (8, 16))]:
        ts.append(tensor(f"blk.0.{name}.weight", W(*shape)))
    ts.append(tensor("output_norm.weight", W(8)))
    g.write_gguf(os.path.join(out, "gguf_spm.gguf"), meta, ts)
    ids = {f"ids.{i}": torch.tensor(sp.encode(line), dtype=torch.int64) for i, line in enumerate(SPM_LINES)}
    save(os.path.join(out, "gguf_spm.safetensors"), ids)


def make(out):
    spm_llama(out)
    llama_like(out, "llama")
    llama_like(out, "qwen2")
    llama_quant(out)
    gpt2(out)
    blocks(out)
