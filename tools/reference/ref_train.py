"""Ten optimiser steps on a tiny GPT-2 in PyTorch (as llm.c's test_gpt2 checks its trainer):
torch.optim.AdamW with two parameter groups (no weight decay on norms, biases and embeddings),
linear warm-up + cosine LambdaLR, clip_grad_norm_, two accumulated micro-batches and label
smoothing; and the same with torch.optim.SGD (momentum, weight decay). Each fixture holds the
initial parameters, the batches, the loss of every step, the learning rates and the final
parameters.
"""
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save

V, C, H, L, PN = 31, 16, 4, 2, 20
STEPS, WARMUP, PEAK, MIN_RATIO = 10, 3, 1e-2, 0.1


def init_params():
    torch.manual_seed(20)

    def P(*shape):
        return torch.randn(*shape) * 0.2

    p = {"transformer.wte.weight": P(V, C), "transformer.wpe.weight": P(PN, C)}
    for i in range(L):
        h = f"transformer.h.{i}."
        p.update({h + "ln_1.weight": 1 + 0.1 * torch.randn(C), h + "ln_1.bias": 0.1 * torch.randn(C),
                  h + "attn.c_attn.weight": P(C, 3 * C), h + "attn.c_attn.bias": 0.1 * torch.randn(3 * C),
                  h + "attn.c_proj.weight": P(C, C), h + "attn.c_proj.bias": 0.1 * torch.randn(C),
                  h + "ln_2.weight": 1 + 0.1 * torch.randn(C), h + "ln_2.bias": 0.1 * torch.randn(C),
                  h + "mlp.c_fc.weight": P(C, 4 * C), h + "mlp.c_fc.bias": 0.1 * torch.randn(4 * C),
                  h + "mlp.c_proj.weight": P(4 * C, C), h + "mlp.c_proj.bias": 0.1 * torch.randn(C)})
    p.update({"transformer.ln_f.weight": 1 + 0.1 * torch.randn(C), "transformer.ln_f.bias": 0.1 * torch.randn(C)})
    return {k: v.clone().requires_grad_() for k, v in p.items()}


def forward(p, ids):
    B, T = ids.shape
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][:T]
    mask = torch.triu(torch.full((T, T), float("-inf")), 1)
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, -1))
        s = q @ k.transpose(-1, -2) * (C // H) ** -0.5 + mask
        o = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + o @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    return x @ p["transformer.wte.weight"].T


def lr_lambda(k):  # mirrors tfm::learning_rate(cosine): step k is 0-based
    t = k + 1
    if t <= WARMUP:
        return t / WARMUP
    progress = min(1.0, max(0.0, (t - WARMUP) / max(1.0, STEPS - WARMUP)))
    return MIN_RATIO + (1 - MIN_RATIO) * 0.5 * (1 + math.cos(math.pi * progress))


def decays(name, t):
    return t.dim() >= 2 and not any(s in name for s in ("embed", "wte", "wpe", "shared.weight"))


def run(out, name, make_opt):
    p = init_params()
    initial = {f"param.{k}": v.detach().clone() for k, v in p.items()}
    torch.manual_seed(21)
    batches = [(torch.randint(0, V, (3, 12)), torch.randint(0, V, (3, 12))) for _ in range(2)]
    opt = make_opt(p)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    losses, lrs, norms = [], [], []
    for _ in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for x, y in batches:
            loss = F.cross_entropy(forward(p, x).reshape(-1, V), y.reshape(-1), label_smoothing=0.1)
            (loss / len(batches)).backward()
            total += loss.item()
        norms.append(float(torch.nn.utils.clip_grad_norm_(list(p.values()), 0.5)))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(total / len(batches))
    t = dict(initial)
    t.update({f"final.{k}": v for k, v in p.items()})
    t.update({"x0": batches[0][0], "y0": batches[0][1], "x1": batches[1][0], "y1": batches[1][1],
              "losses": torch.tensor(losses, dtype=torch.float64).float(), "lrs": torch.tensor(lrs).float(),
              "grad_norms": torch.tensor(norms).float()})
    save(os.path.join(out, f"train_{name}.safetensors"), t)


def make(out):
    def groups(p, wd):
        return [{"params": [v for k, v in p.items() if decays(k, v)], "weight_decay": wd},
                {"params": [v for k, v in p.items() if not decays(k, v)], "weight_decay": 0.0}]

    run(out, "adamw", lambda p: torch.optim.AdamW(groups(p, 0.1), lr=PEAK, betas=(0.9, 0.95), eps=1e-8))
    run(out, "sgd", lambda p: torch.optim.SGD(groups(p, 0.01), lr=PEAK * 10, momentum=0.9))
