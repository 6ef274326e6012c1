"""References for positional encodings, written the way the well-known implementations do:
d2l's PositionalEncoding, Hugging Face's Llama rotate_half and GPT-J rotate_every_two RoPE,
and T5's _relative_position_bucket."""
import math
import os

import torch

from fixtures import grads, save


def sinusoidal(T, D):  # d2l.PositionalEncoding's table
    P = torch.zeros(T, D)
    X = torch.arange(T, dtype=torch.float32).reshape(-1, 1) / torch.pow(
        10000, torch.arange(0, D, 2, dtype=torch.float32) / D)
    P[:, 0::2] = torch.sin(X)
    P[:, 1::2] = torch.cos(X)
    return P


def rope_halves(x, pos, base):  # Llama: q * cos + rotate_half(q) * sin
    D = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    f = pos.double()[:, None] * inv[None, :]
    emb = torch.cat([f, f], dim=-1)
    cos, sin = emb.cos().float(), emb.sin().float()
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


def rope_adjacent(x, pos, base):  # GPT-J: rotate_every_two with interleaved sin/cos
    D = x.shape[-1]
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.float64) / D))
    f = pos.double()[:, None] * inv[None, :]
    cos = f.cos().float().repeat_interleave(2, dim=-1)
    sin = f.sin().float().repeat_interleave(2, dim=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    rot = torch.stack([-x2, x1], dim=-1).flatten(-2)
    return x * cos + rot * sin


def t5_bucket(rel, bidirectional, num_buckets, max_distance):  # T5Attention._relative_position_bucket
    ret = torch.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        ret += (rel > 0).to(torch.long) * num_buckets
        n = torch.abs(rel)
    else:
        n = -torch.min(rel, torch.zeros_like(rel))
    max_exact = num_buckets // 2
    is_small = n < max_exact
    val_if_large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact)
    ).to(torch.long)
    val_if_large = torch.min(val_if_large, torch.full_like(val_if_large, num_buckets - 1))
    return ret + torch.where(is_small, n, val_if_large)


def make(out):
    save(os.path.join(out, "pos_sinusoidal.safetensors"), {"table": sinusoidal(50, 32)})
    for name, fn in (("halves", rope_halves), ("adjacent", rope_adjacent)):
        x = torch.randn(2, 3, 7, 16, requires_grad=True)
        pos = torch.arange(5, 12)
        y = fn(x, pos, 10000.0)
        w = torch.randn_like(y)
        (y * w).sum().backward()
        save(os.path.join(out, f"pos_rope_{name}.safetensors"),
             {"x": x, "pos": pos, "y": y, "w": w, **grads({"x": x})})
    q = torch.arange(40)[:, None]
    k = torch.arange(300)[None, :]
    rel = k - q
    save(os.path.join(out, "pos_t5_buckets.safetensors"), {
        "bidirectional": t5_bucket(rel, True, 32, 128),
        "causal": t5_bucket(rel, False, 32, 128),
    })
