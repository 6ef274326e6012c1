"""Decoder-only inference with a KV cache in PyTorch 1.13, for the side-by-side table of
`tfm bench decode` (bench/cli/cmd_bench_decode.cpp describes the protocol; this script
follows it step for step).

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_decode.py --config JSON --cases JSON
           [--model-dir DIR] [--params N] --threads 2 [--min-time 0.15] [--min-reps 3]
--config: the model's sizes and switches as tfm resolved them from DIR/config.json (or the
gpt2 preset); --cases: [{"name", "decode", "batch", "prompt", "steps"}]. With --model-dir the
weights are DIR/model.safetensors (read with numpy: 8-byte little-endian header length, JSON
header, raw data), under the engine's own names (model_type "transformer") or Hugging Face
GPT-2's; DIR/config.json is checked against --config. Without it, weights are random (N(0,
0.02), same shapes).

The model is the best straightforward PyTorch decoder: fused q/k/v projection (one GEMM),
F.linear / F.layer_norm, a preallocated KV cache (layers, B, H, max_T, Dh) written in place,
attention as softmax(q k^T * scale [+ causal mask]) v (1.13 has no fused attention), the lm
head on the last position only, greedy argmax; torch.inference_mode().
--dtype bf16: the whole model, its activations and its KV cache in torch.bfloat16 (what
model.to(torch.bfloat16) gives a PyTorch user; 1.13's CPU kernels for it), else float32.
Prints {"torch", "params_match", "results": [{"name", "seconds"}]}.
"""
import argparse
import json
import math
import os
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F
from bench_timing import set_threads

ACTS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu,
        "swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}


def read_safetensors(path):
    """name -> float32 torch tensor."""
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
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").reshape(meta["shape"]).copy())
    return out


class Decoder:
    """Weights as plain tensors; layer l: n1 (w, b), qkv (w (3C', C), b), o, n2, up/gate/down."""

    def __init__(self, cfg, w, dtype=torch.float32):
        self.cfg, self.dtype = cfg, dtype
        C, H, KV, Dh = cfg["C"], cfg["H"], cfg["KV"], cfg["Dh"]
        self.H, self.KV, self.Dh, self.C = H, KV, Dh, C
        self.scale = Dh ** -0.5 if cfg["scale_scores"] else 1.0
        self.pre = cfg["placement"] == "pre"
        self.act = ACTS[cfg["activation"]]
        self.gated = cfg["activation"] in ("swiglu", "geglu", "reglu")
        self.eps, self.rms = cfg["eps"], cfg["norm"] == "rms_norm"
        self.tok, self.pos = w["tok"], w.get("pos")
        self.layers, self.final, self.head = w["layers"], w.get("final"), w["head"]

    def norm(self, x, n):
        if self.rms:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * n[0]
        return F.layer_norm(x, (self.C,), n[0], n[1], self.eps)

    def attention(self, L, h, kc, vc, pos):  # h (B, T, C); kc/vc (B, KV, max_T, Dh)
        B, T, _ = h.shape
        qkv = F.linear(h, L["qkv"][0], L["qkv"][1])
        q, k, v = qkv.split([self.H * self.Dh, self.KV * self.Dh, self.KV * self.Dh], -1)
        q = q.view(B, T, self.H, self.Dh).transpose(1, 2)
        kc[:, :, pos:pos + T] = k.view(B, T, self.KV, self.Dh).transpose(1, 2)
        vc[:, :, pos:pos + T] = v.view(B, T, self.KV, self.Dh).transpose(1, 2)
        K, V = kc[:, :, :pos + T], vc[:, :, :pos + T]
        if self.KV != self.H:
            K, V = K.repeat_interleave(self.H // self.KV, 1), V.repeat_interleave(self.H // self.KV, 1)
        s = torch.matmul(q, K.transpose(-1, -2)) * self.scale  # (B, H, T, pos+T)
        if T > 1:
            s = s + torch.triu(torch.full((T, pos + T), float("-inf")), pos + 1).to(s.dtype)
        o = torch.matmul(torch.softmax(s, -1), V).transpose(1, 2).reshape(B, T, self.H * self.Dh)
        return F.linear(o, L["o"][0], L["o"][1])

    def ffn(self, L, h):
        up = F.linear(h, L["up"][0], L["up"][1])
        u = self.act(F.linear(h, L["gate"][0], L["gate"][1])) * up if self.gated else self.act(up)
        return F.linear(u, L["down"][0], L["down"][1])

    def forward(self, ids, cache, pos):
        """ids (B, T) appended at position pos of every row; returns the last position's logits (B, V)."""
        T = ids.shape[1]
        x = F.embedding(ids, self.tok)
        if self.cfg["scale_embeddings"]:
            x = x * math.sqrt(self.C)
        if self.pos is not None:
            x = x + self.pos[pos:pos + T]
        for l, L in enumerate(self.layers):
            kc, vc = cache[0][l], cache[1][l]
            if self.pre:
                x = x + self.attention(L, self.norm(x, L["n1"]), kc, vc, pos)
                x = x + self.ffn(L, self.norm(x, L["n2"]))
            else:
                x = self.norm(x + self.attention(L, x, kc, vc, pos), L["n1"])
                x = self.norm(x + self.ffn(L, x), L["n2"])
        x = x[:, -1]
        if self.final is not None:
            x = self.norm(x, self.final)
        return F.linear(x, self.head)

    def new_cache(self, B):
        shape = (len(self.layers), B, self.KV, self.cfg["max_positions"], self.Dh)
        return torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype)


def engine_weights(cfg, t):
    """The engine's own names (param_specs.cpp engine_specs), decoder-only."""
    g = lambda n: t.get(n)  # noqa: E731
    layers = []
    for i in range(cfg["L"]):
        p = f"decoder.layers.{i}."
        lin = lambda n: (t[p + n + ".weight"], g(p + n + ".bias"))  # noqa: E731
        qkv_w = torch.cat([t[p + f"self_attn.{n}_proj.weight"] for n in "qkv"])
        qkv_b = torch.cat([t[p + f"self_attn.{n}_proj.bias"] for n in "qkv"]) if cfg["bias"] else None
        layers.append({"n1": lin("self_attn_norm"), "n2": lin("ffn_norm"), "qkv": (qkv_w, qkv_b),
                       "o": lin("self_attn.o_proj"), "up": lin("ffn.up_proj"), "down": lin("ffn.down_proj"),
                       "gate": lin("ffn.gate_proj") if p + "ffn.gate_proj.weight" in t else None})
    final = (t["decoder.norm.weight"], g("decoder.norm.bias")) if cfg["final_norm"] else None
    head = t["embed_tokens.weight"] if cfg["tie"] else t["lm_head.weight"]
    return {"tok": t["embed_tokens.weight"], "pos": g("embed_positions.weight"), "layers": layers, "final": final,
            "head": head}


def gpt2_weights(cfg, t):
    """Hugging Face GPT-2 names; Conv1D weights are (in, out), transposed here for F.linear."""
    layers = []
    for i in range(cfg["L"]):
        p = f"transformer.h.{i}."
        conv = lambda n: (t[p + n + ".weight"].t().contiguous(), t[p + n + ".bias"])  # noqa: E731
        ln = lambda n: (t[p + n + ".weight"], t[p + n + ".bias"])  # noqa: E731
        layers.append({"n1": ln("ln_1"), "n2": ln("ln_2"), "qkv": conv("attn.c_attn"), "o": conv("attn.c_proj"),
                       "up": conv("mlp.c_fc"), "down": conv("mlp.c_proj"), "gate": None})
    head = t["transformer.wte.weight"] if cfg["tie"] else t["lm_head.weight"]
    return {"tok": t["transformer.wte.weight"], "pos": t["transformer.wpe.weight"], "layers": layers,
            "final": (t["transformer.ln_f.weight"], t["transformer.ln_f.bias"]), "head": head}


def random_weights(cfg):
    C, H, KV, Dh, FF, V, b = cfg["C"], cfg["H"], cfg["KV"], cfg["Dh"], cfg["FF"], cfg["V"], cfg["bias"]
    gen = torch.Generator().manual_seed(0)
    rnd = lambda *s: torch.randn(*s, generator=gen) * 0.02  # noqa: E731
    lin = lambda o, i: (rnd(o, i), torch.zeros(o) if b else None)  # noqa: E731
    nrm = lambda: (torch.ones(C), None if cfg["norm"] == "rms_norm" else torch.zeros(C))  # noqa: E731
    gated = cfg["activation"] in ("swiglu", "geglu", "reglu")
    layers = [{"n1": nrm(), "n2": nrm(), "qkv": lin((H + 2 * KV) * Dh, C), "o": lin(C, H * Dh), "up": lin(FF, C),
               "down": lin(C, FF), "gate": lin(FF, C) if gated else None} for _ in range(cfg["L"])]
    tok = rnd(V, C)
    return {"tok": tok, "pos": rnd(cfg["max_positions"], C) if cfg["position"] == "learned" else None,
            "layers": layers, "final": nrm() if cfg["final_norm"] else None, "head": tok if cfg["tie"] else rnd(V, C)}


def count(w):
    seen, n = set(), 0
    for t in [w["tok"], w["pos"], w["head"], *(w["final"] or ())] + [
            x for L in w["layers"] for pair in L.values() if pair is not None for x in pair]:
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            n += t.numel()
    return n


def cast(w, dtype):
    """Every tensor of the weights dict in dtype (tied tensors stay one tensor)."""
    done = {}
    one = lambda t: None if t is None else done.setdefault(id(t), t.to(dtype))  # noqa: E731
    pair = lambda p: None if p is None else tuple(one(t) for t in p)  # noqa: E731
    return {"tok": one(w["tok"]), "pos": one(w["pos"]), "head": one(w["head"]), "final": pair(w["final"]),
            "layers": [{k: pair(v) for k, v in L.items()} for L in w["layers"]]}


def random_tokens(n, V, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (n,), generator=g)


def run_case(model, case, min_time, min_reps):
    V, B, P = model.cfg["V"], case["batch"], case["prompt"]
    cache = model.new_cache(B)

    def once():
        if not case["decode"]:
            ids = random_tokens(P, V, 11)[None]
            t0 = time.perf_counter()
            model.forward(ids, cache, 0).argmax(-1)
            return time.perf_counter() - t0
        # each row prefilled alone (untimed), then greedy steps of all rows together
        first = []
        for r in range(B):
            one = (cache[0][:, r:r + 1], cache[1][:, r:r + 1])  # views into the batch cache
            first.append(model.forward(random_tokens(P, V, 100 + r)[None], one, 0))
        nxt = torch.cat(first).argmax(-1)
        t0 = time.perf_counter()
        for s in range(case["steps"]):
            nxt = model.forward(nxt[:, None], cache, P + s).argmax(-1)
        return time.perf_counter() - t0

    once()
    best, reps, spent = float("inf"), 0, 0.0
    while reps < min_reps or spent < min_time:
        dt = once()
        best, reps, spent = min(best, dt), reps + 1, spent + dt
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--cases", required=True)
    p.add_argument("--model-dir", default="")
    p.add_argument("--params", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--min-reps", type=int, default=3)
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    args = p.parse_args()
    set_threads(torch, args.threads)
    cfg = json.loads(args.config)
    if cfg["position"] not in ("learned", "none"):
        raise SystemExit(f"positions '{cfg['position']}' are not implemented here")
    if args.model_dir:
        with open(os.path.join(args.model_dir, "config.json")) as f:
            disk = json.load(f)
        for key, want in (("d_model", "C"), ("n_embd", "C"), ("n_layers", "L"), ("n_layer", "L"), ("vocab_size", "V")):
            if key in disk and disk[key] != cfg[want]:
                raise SystemExit(f"config.json {key}={disk[key]} but tfm sent {want}={cfg[want]}")
        t = read_safetensors(os.path.join(args.model_dir, "model.safetensors"))
        w = gpt2_weights(cfg, t) if cfg["model_type"] == "gpt2" else engine_weights(cfg, t)
        n = sum(x.numel() for x in t.values())
    else:
        w = random_weights(cfg)
        n = count(w)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    if dtype != torch.float32:
        w = cast(w, dtype)
    model = Decoder(cfg, w, dtype)
    results = []
    with torch.inference_mode():
        for case in json.loads(args.cases):
            results.append({"name": case["name"], "seconds": run_case(model, case, args.min_time, args.min_reps)})
    print(json.dumps({"torch": torch.__version__, "dtype": args.dtype, "params_match": args.params in (0, n), "params": n,
                      "results": results}))


if __name__ == "__main__":
    main()
