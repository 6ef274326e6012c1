"""Reference for scaled_dot_product_attention, written out with plain torch ops (torch 1.13
has no F.scaled_dot_product_attention): GQA/MQA by repeat_interleave of the kv heads, masks
as boolean (Tq, Tk) matrices with queries aligned to the end of the keys, ALiBi slopes from
Press et al.'s get_slopes. Computed in float64 from float32 inputs, saved as float32.
"""
import math
import os

import torch

from fixtures import grads, save


def get_slopes(n):
    """ALiBi slopes, as in Press et al.'s repository (ofirpress/attention_with_linear_biases)."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest_power_of_2)
            + get_slopes(2 * closest_power_of_2)[0::2][:n - closest_power_of_2])


M64 = (1 << 64) - 1


def splitmix64_next(state):
    """splitmix64 (Steele, Lea, Flood 2014): returns (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


def random_key_blocks(seed, h, qblock, nb, r, causal):
    """BigBird random key blocks of query block `qblock` for head h, as docs/sparse_attention.md
    defines them: Floyd's sampling of min(r, n) distinct blocks of 0..n-1 (n = nb, the blocks
    holding real keys, or min(qblock, nb-1)+1 when causal) from splitmix64 seeded with
    splitmix64(seed) ^ (h<<32 | qblock)."""
    n = min(qblock, nb - 1) + 1 if causal else nb
    m = min(r, n)
    _, s0 = splitmix64_next(seed)
    state = s0 ^ ((h << 32) | (qblock & 0xFFFFFFFF))
    out = []
    for top in range(n - m, n):
        state, x = splitmix64_next(state)
        t = x % (top + 1)
        out.append(top if t in out else t)
    return sorted(out)


def sparse_allowed(Hq, Tq, Tk, window, causal, globals_, random_blocks, block_size, seed, key_end):
    """(Hq, Tq, Tk) boolean: local | global query | global key | random block (before the
    causal / padding masks, which the caller applies). key_end (Tq): the row's real keys."""
    i = (torch.arange(Tq) + (Tk - Tq))[:, None]
    j = torch.arange(Tk)[None, :]
    local = torch.ones(Tq, Tk, dtype=torch.bool) if window == 0 else (j > i - window) & (j < i + window)
    g = torch.zeros(Tk, dtype=torch.bool)
    g[list(globals_)] = True
    allowed = (local | g[i.squeeze(1)][:, None] | g[None, :]).expand(Hq, Tq, Tk).clone()
    if random_blocks:
        for h in range(Hq):
            for qi in range(Tq):
                ip = qi + Tk - Tq
                nb = (min(Tk, int(key_end[qi])) + block_size - 1) // block_size
                for kb in random_key_blocks(seed, h, ip // block_size, nb, random_blocks, causal):
                    allowed[h, qi, kb * block_size:(kb + 1) * block_size] = True
    return allowed


def attention(q, k, v, causal=False, window=0, valid_lens=None, bias=None, slopes=None, sparse=None):
    B, Hq, Tq, D = q.shape
    Hkv, Tk = k.shape[1], k.shape[2]
    k = k.repeat_interleave(Hq // Hkv, dim=1)
    v = v.repeat_interleave(Hq // Hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)                 # (B, Hq, Tq, Tk)
    i = (torch.arange(Tq) + (Tk - Tq))[:, None]                  # i' = i + Tk - Tq
    j = torch.arange(Tk)[None, :]
    allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
    if causal:
        allowed = allowed & (j <= i)
    if sparse is not None:  # the window widened by global tokens and random blocks
        vl = valid_lens if valid_lens is not None else torch.full((B,), Tk)
        vl = vl if vl.dim() == 2 else vl[:, None].expand(B, Tq)
        allowed = allowed & torch.stack([sparse_allowed(Hq, Tq, Tk, window, causal, key_end=vl[b], **sparse)
                                         for b in range(B)])
    elif window:
        allowed = allowed & (j > i - window) & (j < i + window)
    if valid_lens is not None:
        vl = valid_lens if valid_lens.dim() == 2 else valid_lens[:, None].expand(B, Tq)
        allowed = allowed & (j[None] < vl[:, :, None])[:, None]
    if bias is not None:
        s = s + bias
    if slopes is not None:
        s = s - slopes[None, :, None, None] * (i - j).abs().to(s.dtype)
    # Fully masked rows: softmax over all -inf is NaN; give them zero scores, then zero weights.
    row_any = allowed.any(-1, keepdim=True)
    s = torch.where(row_any, s.masked_fill(~allowed, float("-inf")), torch.zeros_like(s))
    p = torch.softmax(s, dim=-1) * row_any
    return p @ v


CONFIGS = {
    # name: (B, Hq, Hkv, Tq, Tk, D, options)
    "basic": (2, 3, 3, 17, 17, 8, {}),
    "causal_gqa": (2, 4, 2, 33, 33, 16, {"causal": True}),
    "mqa_cache": (2, 4, 1, 5, 37, 16, {"causal": True}),
    "pad_batch": (2, 2, 2, 9, 11, 8, {"valid_lens": [0, 7]}),
    "pad_query_causal": (2, 2, 1, 9, 9, 8, {"causal": True, "valid_lens": "per_query"}),
    "alibi": (1, 6, 6, 20, 20, 8, {"causal": True, "alibi": True}),
    "t5_bias": (2, 4, 4, 10, 12, 8, {"bias": (1, 4, 10, 12)}),
    "window": (1, 2, 2, 70, 70, 16, {"causal": True, "window": 8}),
    "long_bias": (1, 2, 2, 130, 130, 32, {"causal": True, "bias": (1, 2, 130, 130)}),
    # Sparse patterns (global tokens, BigBird random blocks) at odd sizes, with padding, GQA,
    # several 64-key blocks (so the fused kernel skips some) and KV-cache alignment.
    "sparse_bidir_pad": (2, 3, 3, 75, 75, 8, {"window": 5, "valid_lens": [75, 60],
                                             "sparse": {"globals_": [0, 40], "random_blocks": 2,
                                                        "block_size": 7, "seed": 11}}),
    "sparse_causal_gqa": (1, 4, 2, 150, 150, 16, {"causal": True, "window": 9,
                                                  "sparse": {"globals_": [0, 1, 2], "random_blocks": 1,
                                                             "block_size": 16, "seed": 5}}),
    "sparse_long": (1, 2, 2, 203, 203, 33, {"window": 17,
                                            "sparse": {"globals_": [0, 130], "random_blocks": 2,
                                                       "block_size": 32, "seed": 2024}}),
    "sparse_global_only": (1, 2, 1, 131, 131, 8, {"window": 3, "valid_lens": [120],
                                                  "sparse": {"globals_": [5, 64, 65, 100], "random_blocks": 0,
                                                             "block_size": 64, "seed": 0}}),
    "sparse_cache": (2, 2, 2, 5, 90, 8, {"causal": True, "window": 4,
                                         "sparse": {"globals_": [1], "random_blocks": 1,
                                                    "block_size": 10, "seed": 3}}),
}


def make(out):
    g = torch.Generator().manual_seed(1234)
    for name, (B, Hq, Hkv, Tq, Tk, D, opt) in CONFIGS.items():
        t = {"q": torch.randn(B, Hq, Tq, D, generator=g), "k": torch.randn(B, Hkv, Tk, D, generator=g),
             "v": torch.randn(B, Hkv, Tk, D, generator=g), "w": torch.randn(B, Hq, Tq, D, generator=g)}
        leaves = {n: t[n].double().requires_grad_() for n in ("q", "k", "v")}
        kwargs = {"causal": opt.get("causal", False), "window": opt.get("window", 0)}
        t["flags"] = torch.tensor([int(kwargs["causal"]), kwargs["window"]], dtype=torch.int64)
        vl = opt.get("valid_lens")
        if vl == "per_query":
            t["valid_lens"] = torch.randint(0, Tk + 1, (B, Tq), generator=g)
        elif vl is not None:
            t["valid_lens"] = torch.tensor(vl, dtype=torch.int64)
        if "valid_lens" in t:
            kwargs["valid_lens"] = t["valid_lens"]
        if "bias" in opt:
            t["bias"] = torch.randn(*opt["bias"], generator=g)
            leaves["bias"] = t["bias"].double().requires_grad_()
            kwargs["bias"] = leaves["bias"]
        if "sparse" in opt:
            sp = opt["sparse"]
            kwargs["sparse"] = sp
            t["sparse.globals"] = torch.tensor(sp["globals_"], dtype=torch.int64)
            t["sparse.params"] = torch.tensor([sp["random_blocks"], sp["block_size"], sp["seed"]], dtype=torch.int64)
        if opt.get("alibi"):
            t["slopes"] = torch.tensor(get_slopes(Hq), dtype=torch.float32)
            kwargs["slopes"] = torch.tensor(get_slopes(Hq), dtype=torch.float64)
        y = attention(leaves["q"], leaves["k"], leaves["v"], **kwargs)
        (y * t["w"].double()).sum().backward()
        t["out"] = y.float()
        t.update({n: x.float() for n, x in grads(leaves).items()})
        save(os.path.join(out, f"attention_{name}.safetensors"), t)
    save(os.path.join(out, "attention_alibi_slopes.safetensors"),
         {f"slopes.{n}": torch.tensor(get_slopes(n), dtype=torch.float32) for n in range(1, 33)})
