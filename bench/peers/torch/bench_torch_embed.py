"""The PyTorch side of `tfm bench embed`: sentence embeddings/s of a BERT-base-shaped encoder
(12 layers, width 768, 12 heads, MLP 3072, vocabulary 30522; random weights, f32), computed as
transformers' BertModel computes it (eager attention, erf GELU, post-norm), then mean pooling
and L2 normalisation, at batch 1 and 64. Prints one JSON object."""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_timing import best_seconds, set_threads  # noqa: E402

C, H, L, I, V, P = 768, 12, 12, 3072, 30522, 512


def params():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g) * 0.02  # noqa: E731
    p = {"tok": r(V, C), "pos": r(P, C), "type": r(2, C), "ln_w": torch.ones(C), "ln_b": torch.zeros(C), "layers": []}
    for _ in range(L):
        p["layers"].append({"qkv": [(r(C, C), torch.zeros(C)) for _ in range(3)], "o": (r(C, C), torch.zeros(C)),
                            "ln1": (torch.ones(C), torch.zeros(C)), "i": (r(I, C), torch.zeros(I)),
                            "out": (r(C, I), torch.zeros(C)), "ln2": (torch.ones(C), torch.zeros(C))})
    return p


def forward(p, ids):
    B, T = ids.shape
    x = p["tok"][ids] + p["pos"][:T] + p["type"][0]
    x = F.layer_norm(x, (C,), p["ln_w"], p["ln_b"], 1e-12)
    mask = torch.zeros(B, 1, 1, T)  # every token valid (the extended attention mask of ones)
    D = C // H
    for lay in p["layers"]:
        q, k, v = (F.linear(x, w, b).view(B, T, H, D).transpose(1, 2) for w, b in lay["qkv"])
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(D) + mask, dim=-1) @ v
        a = F.linear(a.transpose(1, 2).reshape(B, T, C), *lay["o"])
        x = F.layer_norm(a + x, (C,), *lay["ln1"], 1e-12)
        f = F.linear(F.gelu(F.linear(x, *lay["i"])), *lay["out"])
        x = F.layer_norm(f + x, (C,), *lay["ln2"], 1e-12)
    e = x.mean(1)
    return e / e.norm(dim=1, keepdim=True).clamp(min=1e-12)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=34)
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--threads", default="1")
    ap.add_argument("--min-time", type=float, default=0.15)
    ap.add_argument("--min-reps", type=int, default=3)
    a = ap.parse_args()
    p = params()
    results = []
    with torch.no_grad():
        for b in (int(x) for x in a.batches.split(",")):
            ids = (torch.arange(b * a.tokens) * 7919 % 30000 + 100).view(b, a.tokens)
            for t in sorted({int(x) for x in a.threads.split(",")}):
                set_threads(torch, t)
                s = best_seconds(lambda: forward(p, ids), a.min_time, a.min_reps)
                results.append({"batch": b, "threads": t, "texts_per_s": b / s})
    print(json.dumps({"torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
