#!/usr/bin/env python3
"""Alpha-beta model of data x tensor x pipeline parallel training (docs/distributed.md).

N machines, each running T tensor-parallel ranks (one replica's shards share a machine: they
exchange every sub-layer), P pipeline stages across machines, D = N / P data-parallel replicas.
A step trains G tokens in micro-batches of b sequences of s tokens; a decoder of L layers of
width h has Phi ~ 12 L h^2 parameters and costs 6 Phi FLOPs per token (forward 2, backward 4).

  compute   T_c  = 6 Phi G / (N F)                      F: a machine's FLOP/s
  bubble    T_b  = T_c (P - 1) / M                      M = G / (D b s) micro-batches per replica
            (1F1B and GPipe alike: (P - 1) / (M + P - 1) of the step is idle)
  tensor    T_tp = 4 L M P' [2 (T - 1) (alpha_in + m / (T W_in))]    m = b s h 4 bytes,
            P' = L / P layers per stage: 2 sums forward and 2 backward per layer, as a ring
            all-reduce inside the machine, not overlapped
  pipeline  T_pp = 2 M (alpha + m / W)                  an activation forward and a gradient
            back per micro-batch over the inter-machine link, on the critical path
  data      T_dp = ring all-reduce of a stage's fp32 gradients (4 Phi / P bytes per machine:
            its T shards share the machine's link) over D machines, in 4 MiB buckets, overlapped with the backward pass (2/3 of T_c);
            the excess and the last bucket are exposed
  memory    16 Phi / P bytes per machine for weights, gradients and AdamW state (ZeRO-1 over
            D: 4 + 4 + 8 / D bytes per parameter), plus b s h 2 bytes x 12 of activations per
            layer and micro-batch in flight (1F1B: P of them on stage 0)

The step is T_c + T_b + T_tp + T_pp + exposed T_dp; efficiency = T_c / step. The inputs are
measured (docs/benchmarks.md): F from this engine's training throughput, W_in and alpha_in from
bench_allreduce on one machine, alpha and W the usual Ethernet figures.

Besides the measured machine, machines 30x and 300x faster (accelerators) with the same links
show where communication starts to cost and which layout then pays.

usage: dist_layouts.py [--flops-per-core 65e9] [--cores 32] [--mem-gib 64] [--w-in-gbs 1.66]
"""
import argparse
import math


def ring(bytes_, n, alpha, w):
    return 0.0 if n <= 1 else 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes_ / w


def step(m, n, t, p, link, a):
    L, h, s = m["layers"], m["hidden"], a.seq
    phi = 12 * L * h * h
    d = n // p
    micro = a.global_tokens / (d * a.micro_rows * s)
    if micro < 1 or L % p:
        return None
    F = a.flops_per_core * a.cores * a.speedup
    t_c = 6 * phi * a.global_tokens / (n * F)
    t_b = t_c * (p - 1) / micro
    msg = a.micro_rows * s * h * 4
    t_tp = 0.0 if t == 1 else 4 * (L / p) * micro * ring(msg, t, a.alpha_in_us * 1e-6, a.w_in_gbs * 1e9)
    w = link * 1e9 / 8
    alpha = a.alpha_us * 1e-6
    t_pp = 0.0 if p == 1 else 2 * micro * (alpha + msg / w)
    grads = 4 * phi / p  # per machine: its T ranks' shards leave through the same link
    bucket = min(4 * 2**20, grads)
    k = math.ceil(grads / bucket)
    t_dp_total = 0.0 if d == 1 else k * 2 * (d - 1) * alpha + 2 * (d - 1) / d * grads / w
    t_dp = 0.0 if d == 1 else max(0.0, t_dp_total - 2 / 3 * t_c) + ring(bucket, d, alpha, w)
    states = phi / p * (4 + 4 + 8 / d)
    acts = 12 * a.micro_rows * s * h * 2 * (L / p) * min(p, micro)
    mem = states + acts
    total = t_c + t_b + t_tp + t_pp + t_dp
    return dict(t=t, p=p, d=d, micro=micro, total=total, eff=t_c / total, tc=t_c, tb=t_b, ttp=t_tp, tpp=t_pp,
                tdp=t_dp, mem=mem)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flops-per-core", type=float, default=65e9, help="training FLOP/s of one core (measured)")
    ap.add_argument("--cores", type=int, default=32, help="cores per machine")
    ap.add_argument("--mem-gib", type=float, default=64, help="memory per machine")
    ap.add_argument("--w-in-gbs", type=float, default=1.66, help="all-reduce bandwidth inside a machine, GB/s (measured)")
    ap.add_argument("--alpha-in-us", type=float, default=1.1, help="latency inside a machine (measured)")
    ap.add_argument("--alpha-us", type=float, default=25.0, help="latency between machines")
    ap.add_argument("--global-tokens", type=float, default=2**20, help="tokens per step")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--micro-rows", type=int, default=1)
    a = ap.parse_args()
    models = [dict(name="1B", layers=24, hidden=2048), dict(name="7B", layers=32, hidden=4096)]
    for m in models:
        phi = 12 * m["layers"] * m["hidden"] ** 2
        print(f"### {m['name']}: {phi / 1e9:.2f} B parameters, {m['layers']} layers of width {m['hidden']}; "
              f"{a.global_tokens:,.0f} tokens per step in micro-batches of {a.micro_rows} x {a.seq}; "
              f"{a.mem_gib:g} GiB per machine\n")
        print("| machine | link | N | best layout (T x P x D) | step | efficiency | compute / bubble / tensor / "
              "pipeline / data (s) | memory per machine | data parallel alone |")
        print("|---|---|---|---|---|---|---|---|---|")
        for speedup in (1, 30, 300):
            a.speedup = speedup
            tf = a.flops_per_core * a.cores * speedup / 1e12
            for link in (10, 100):
                for n in (8, 16, 32, 64):
                    best, plain = None, None
                    for t in (1, 2, 4, 8):
                        for p in (1, 2, 4, 8, 16, 32):
                            if p > n or n % p:
                                continue
                            r = step(m, n, t, p, link, a)
                            if r is None:
                                continue
                            fits = r["mem"] <= a.mem_gib * 2**30
                            if t == 1 and p == 1:
                                plain = (r, fits)
                            if fits and (best is None or r["total"] < best["total"]):
                                best = r
                    head = f"| {tf:.1f} TFLOP/s | {link} Gb/s | {n} |"
                    if best is None:
                        print(head + " nothing fits | | | | | |")
                        continue
                    pl = "does not fit" if plain is None or not plain[1] else \
                        f"{plain[0]['total']:.2f} s ({plain[0]['eff'] * 100:.0f}%)"
                    print(f"{head} {best['t']} x {best['p']} x {best['d']} | {best['total']:.2f} s | "
                          f"{best['eff'] * 100:.0f}% | {best['tc']:.2f} / {best['tb']:.2f} / {best['ttp']:.2f} / "
                          f"{best['tpp']:.2f} / {best['tdp']:.2f} | {best['mem'] / 2**30:.0f} GiB | {pl} |")
        print()


if __name__ == "__main__":
    main()
