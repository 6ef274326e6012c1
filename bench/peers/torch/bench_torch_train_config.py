"""The Shakespeare training config's model, data, batch, AdamW, clipping and warm-up+cosine
schedule in PyTorch 1.13, for the side-by-side table of `tfm bench train-config`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_train_config.py --model JSON --data FILE
           --B 32 --T 64 --steps 60 --warmup 10 --threads 2 --lr 3e-3 --beta1 0.9 --beta2 0.99
           --eps 1e-8 --wd 0.1 --clip 1.0 --warmup-steps 100 --min-lr-ratio 0.1
--model is the model as tfm sends it to bench_torch_train_step.py (same Model class, so the
same layers and parameter count). The text is char-tokenised here and kept as int16 (the vocab
fits), batches are seeded random windows of T+1 tokens as nanoGPT draws them. AdamW decays
the 2-D weights except the embedding tables (tfm's default groups). Prints one JSON object:
{"torch", "params", "seconds" (the timed steps), "steps", "tokens_per_s", "peak_rss_bytes",
"first_loss", "last_loss"}; peak RSS is this process's VmHWM read at the end.
"""
import argparse
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_timing import peak_rss_bytes, timed_steps, set_threads
from bench_torch_train_step import Model


def main():
    p = argparse.ArgumentParser()
    for name, kind in (("--model", str), ("--data", str), ("--B", int), ("--T", int), ("--steps", int),
                       ("--warmup", int), ("--threads", int), ("--lr", float), ("--beta1", float),
                       ("--beta2", float), ("--eps", float), ("--wd", float), ("--clip", float),
                       ("--warmup-steps", int), ("--min-lr-ratio", float)):
        p.add_argument(name, type=kind, required=True)
    p.add_argument("--bf16", action="store_true", help="forward and loss under torch.autocast('cpu', bfloat16)")
    a = p.parse_args()
    set_threads(torch, a.threads)
    torch.manual_seed(1337)
    cfg = json.loads(a.model)
    V = cfg["V"]
    with open(a.data, encoding="utf-8") as f:
        text = f.read()
    stoi = {c: i % V for i, c in enumerate(sorted(set(text)))}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.int16)  # (N) ids, 2 bytes each
    del text
    model = Model(cfg)
    for q in model.parameters():  # GPT-2's N(0, 0.02) so the tied head starts near uniform, as tfm's
        if q.dim() >= 2:
            nn.init.normal_(q, 0.0, 0.02)
    emb = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay = [q for q in model.parameters() if q.dim() >= 2 and id(q) not in emb]
    rest = [q for q in model.parameters() if not (q.dim() >= 2 and id(q) not in emb)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.wd}, {"params": rest, "weight_decay": 0.0}],
                            lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps)
    total = a.warmup + a.steps

    def lr_factor(s):  # linear warm-up, then cosine to min_lr_ratio at the last step (tfm's cosine)
        if s < a.warmup_steps:
            return (s + 1) / a.warmup_steps
        t = (s - a.warmup_steps) / max(1, total - a.warmup_steps)
        return a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, t)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    B, T = a.B, a.T
    losses = []

    def step():
        i = torch.randint(len(data) - T - 1, (B,))
        x = torch.stack([data[j:j + T] for j in i]).long()          # (B, T)
        y = torch.stack([data[j + 1:j + T + 1] for j in i]).long()  # (B, T)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.bf16):
            loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        sched.step()
        losses.append(loss.item())

    seconds = timed_steps(step, a.warmup, a.steps)
    print(json.dumps({"torch": torch.__version__, "params": sum(q.numel() for q in model.parameters()),
                      "seconds": seconds, "steps": a.steps, "tokens_per_s": a.steps * B * T / seconds,
                      "peak_rss_bytes": peak_rss_bytes(), "first_loss": losses[0], "last_loss": losses[-1]}))


if __name__ == "__main__":
    main()
