"""One training step (forward, cross-entropy on the head, backward; no optimizer) of small
models of each preset family in PyTorch 1.13, for the side-by-side table of
`tfm bench train-step`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_train_step.py --configs JSON --B 8 --T 128
           --threads 2 [--min-time 0.15] [--min-reps 3]
--configs is the list tfm sends: one object per preset with the sizes and switches of its
ModelConfig (arch, norm, placement, activation, position, bias, head...). Model below builds
that model by hand, the way the families' reference code computes it (HF GPT-2 / Llama / BERT
/ T5 and nn.Transformer-style Vaswani), with separate q/k/v projections and attention composed
as softmax(q k^T * scale + bias) v (1.13 has no fused attention). Dropout is off.
Prints {"torch", "params_match", "results": [{"name", "seconds", "params"}]}; params_match
says whether every model's parameter count equals tfm's (sent as "params" when known).
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_timing import best_seconds, set_threads

# The position encodings of the parity references (tools/reference/ref_position.py): the script
# moved to bench/peers/torch/ without them, and its import failed since (the train-step torch
# column read "-").
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tools", "reference"))
from ref_position import rope_halves, sinusoidal, t5_bucket  # noqa: E402


class Norm(nn.Module):
    def __init__(self, c, cfg):
        super().__init__()
        self.rms, self.eps = cfg["norm"] == "rms_norm", cfg["eps"]
        self.weight = nn.Parameter(torch.ones(c))
        self.bias = None if self.rms else nn.Parameter(torch.zeros(c))

    def forward(self, x):
        if self.rms:  # 1.13 has no fused RMSNorm
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, H, KV, D, b = cfg["C"], cfg["H"], cfg["KV"], cfg["Dh"], cfg["bias"]
        self.H, self.KV, self.D = H, KV, D
        self.q, self.k = nn.Linear(C, H * D, bias=b), nn.Linear(C, KV * D, bias=b)
        self.v, self.o = nn.Linear(C, KV * D, bias=b), nn.Linear(H * D, C, bias=b)
        self.scale = D ** -0.5 if cfg["scale_scores"] else 1.0
        self.rope, self.rope_base = cfg["position"] == "rope", cfg["rope_base"]

    def forward(self, x, mem, add):  # x (B, T, C), mem (B, S, C), add broadcastable to (B, H, T, S)
        B, T, _ = x.shape
        S = mem.shape[1]
        q = self.q(x).view(B, T, self.H, self.D).transpose(1, 2)
        k = self.k(mem).view(B, S, self.KV, self.D).transpose(1, 2)
        v = self.v(mem).view(B, S, self.KV, self.D).transpose(1, 2)
        if self.rope:
            q, k = rope_halves(q, torch.arange(T), self.rope_base), rope_halves(k, torch.arange(S), self.rope_base)
        if self.KV != self.H:
            k, v = k.repeat_interleave(self.H // self.KV, 1), v.repeat_interleave(self.H // self.KV, 1)
        s = q @ k.transpose(-1, -2) * self.scale
        if add is not None:
            s = s + add
        return self.o((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, self.H * self.D))


class FFN(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, FF, b, act = cfg["C"], cfg["FF"], cfg["bias"], cfg["activation"]
        self.gated = act in ("swiglu", "geglu", "reglu")
        self.act = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
                    "silu": F.silu, "swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}[act]
        self.up, self.down = nn.Linear(C, FF, bias=b), nn.Linear(FF, C, bias=b)
        self.gate = nn.Linear(C, FF, bias=b) if self.gated else None

    def forward(self, x):
        h = self.act(self.gate(x)) * self.up(x) if self.gated else self.act(self.up(x))
        return self.down(h)


class Layer(nn.Module):
    def __init__(self, cfg, cross):
        super().__init__()
        C = cfg["C"]
        self.pre = cfg["placement"] == "pre"
        self.self_attn, self.self_norm = Attention(cfg), Norm(C, cfg)
        self.cross_attn = Attention(cfg) if cross else None
        self.cross_norm = Norm(C, cfg) if cross else None
        self.ffn, self.ffn_norm = FFN(cfg), Norm(C, cfg)

    def sub(self, x, norm, f):
        return x + f(norm(x)) if self.pre else norm(x + f(x))

    def forward(self, x, self_add, mem, cross_add):
        x = self.sub(x, self.self_norm, lambda h: self.self_attn(h, h, self_add))
        if self.cross_attn is not None:
            x = self.sub(x, self.cross_norm, lambda h: self.cross_attn(h, mem, cross_add))
        return self.sub(x, self.ffn_norm, self.ffn)


class Stack(nn.Module):
    def __init__(self, cfg, n, cross, causal):
        super().__init__()
        self.cfg, self.causal = cfg, causal
        self.layers = nn.ModuleList(Layer(cfg, cross) for _ in range(n))
        self.final_norm = Norm(cfg["C"], cfg) if cfg["final_norm"] else None
        self.rel = nn.Embedding(cfg["buckets"], cfg["H"]) if cfg["position"] == "t5_relative" else None

    def forward(self, x, mem=None):
        T = x.shape[1]
        add = torch.triu(torch.full((T, T), float("-inf")), 1) if self.causal else None
        if self.rel is not None:  # (1, H, T, T) learned bias shared by the stack's layers
            rel = torch.arange(T)[None, :] - torch.arange(T)[:, None]
            b = self.rel(t5_bucket(rel, not self.causal, self.cfg["buckets"], self.cfg["max_distance"]))
            b = b.permute(2, 0, 1).unsqueeze(0)
            add = b if add is None else b + add
        for layer in self.layers:
            x = layer(x, add, mem, None)
        return self.final_norm(x) if self.final_norm is not None else x


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        V, C, arch = cfg["V"], cfg["C"], cfg["arch"]
        self.tok = nn.Embedding(V, C)
        self.pos = nn.Embedding(cfg["max_positions"], C) if cfg["position"] == "learned" else None
        self.types = nn.Embedding(cfg["type_vocab"], C) if cfg["type_vocab"] > 0 else None
        self.embed_norm = Norm(C, cfg) if cfg["embedding_norm"] else None
        self.encoder = Stack(cfg, cfg["L"], False, False) if arch != "decoder_only" else None
        self.decoder = None
        if arch != "encoder_only":
            self.decoder = Stack(cfg, cfg["Ld"] if arch == "encoder_decoder" else cfg["L"], arch == "encoder_decoder", True)
        head = cfg["head"]
        self.lm_head = nn.Linear(C, V, bias=False) if head == "lm" and not cfg["tie"] else None
        self.pooler = nn.Linear(C, C) if head == "classifier" and cfg["model_type"] == "bert" else None
        self.classifier = nn.Linear(C, cfg["num_labels"]) if head == "classifier" else None
        # the lm head tied to the embedding is scaled by d^-0.5 in T5 (Mesh TensorFlow's convention)
        self.lm_scale = C ** -0.5 if cfg["model_type"] == "t5" and cfg["tie"] else 1.0

    def embed(self, ids):
        T = ids.shape[1]
        x = self.tok(ids)
        if self.cfg["scale_embeddings"]:
            x = x * math.sqrt(self.cfg["C"])
        if self.pos is not None:
            x = x + self.pos(torch.arange(T))
        elif self.cfg["position"] == "sinusoidal":
            x = x + sinusoidal(T, self.cfg["C"])
        if self.types is not None:
            x = x + self.types(torch.zeros_like(ids))
        return self.embed_norm(x) if self.embed_norm is not None else x

    def forward(self, ids, dec_ids=None):
        if self.cfg["arch"] == "encoder_decoder":
            h = self.decoder(self.embed(dec_ids), self.encoder(self.embed(ids)))
        elif self.encoder is not None:
            h = self.encoder(self.embed(ids))
        else:
            h = self.decoder(self.embed(ids))
        if self.classifier is not None:
            pooled = h[:, 0]
            if self.pooler is not None:
                pooled = torch.tanh(self.pooler(pooled))
            return self.classifier(pooled)
        h = h * self.lm_scale if self.lm_scale != 1.0 else h
        return self.lm_head(h) if self.lm_head is not None else h @ self.tok.weight.T




def main():
    p = argparse.ArgumentParser()
    p.add_argument("--configs", required=True)
    p.add_argument("--B", type=int, default=8)
    p.add_argument("--T", type=int, default=128)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--min-reps", type=int, default=3)
    args = p.parse_args()
    set_threads(torch, args.threads)
    torch.manual_seed(0)
    results, match = [], True
    for cfg in json.loads(args.configs):
        model = Model(cfg)
        B, T, V = args.B, args.T, cfg["V"]
        ids, dec = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
        classifier = cfg["head"] == "classifier"
        targets = torch.randint(0, cfg["num_labels"], (B,)) if classifier else torch.randint(0, V, (B * T,))

        def step():
            model.zero_grad(set_to_none=True)
            logits = model(ids, dec)
            loss = F.cross_entropy(logits if classifier else logits.reshape(-1, V), targets)
            loss.backward()

        n = sum(t.numel() for t in model.parameters())
        if "params" in cfg:
            match = match and n == cfg["params"]
        results.append({"name": cfg["name"], "params": n, "seconds": best_seconds(step, args.min_time, args.min_reps)})
    print(json.dumps({"torch": torch.__version__, "params_match": match, "results": results}))


if __name__ == "__main__":
    main()
