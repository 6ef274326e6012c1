#!/usr/bin/env python3
"""Scaling model of data-parallel training (docs/distributed.md).

Ring all-reduce of S bytes over N machines joined by links of bandwidth W bytes/s, with a
latency alpha per message: each of the 2(N-1) ring steps sends S/N bytes, so

    T_ring(S, N) = 2(N-1) * alpha + 2(N-1)/N * S / W

Gradients go in k = ceil(S / b) buckets (b: bucket size); the buckets' all-reduces run while
the backward pass goes on, so communication hides behind the backward pass when

    k * 2(N-1) * alpha + 2(N-1)/N * S / W  <=  T_backward,

except for the last bucket, which only starts when the backward pass ends (the exposed tail,
T_ring(b, N)). T_backward is measured: 2/3 of the training step time per token (forward 1/3,
backward 2/3 of the FLOPs) times the tokens a machine takes per step. The bucket size is
bounded below by the latency: per bucket, latency/bandwidth = N * alpha * W / b, so latency
stays under 10% of the bucket's transfer time when b >= 10 * N * alpha * W.

usage: dist_scaling.py --params P --tokens-per-s R [--alpha-us 25] [--name NAME]
"""
import argparse
import math


def ring(bytes_, n, alpha, w):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * bytes_ / w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=float, required=True, help="trainable parameters")
    ap.add_argument("--tokens-per-s", type=float, required=True, help="measured training tokens/s of one machine")
    ap.add_argument("--alpha-us", type=float, default=25.0, help="latency per message (TCP over Ethernet)")
    ap.add_argument("--bucket-mb", type=float, default=4.0)
    ap.add_argument("--name", default="model")
    a = ap.parse_args()
    s = a.params * 4  # fp32 gradients
    alpha = a.alpha_us * 1e-6
    t_bwd_token = (2.0 / 3.0) / a.tokens_per_s
    print(f"### {a.name}: {a.params / 1e6:.2f} M parameters ({s / 2**20:.1f} MiB of gradients), "
          f"{a.tokens_per_s:.0f} tokens/s per machine, backward {t_bwd_token * 1e6:.1f} us/token, "
          f"alpha {a.alpha_us:g} us, buckets {a.bucket_mb:g} MiB\n")
    print("| link | N | all-reduce of all gradients | tokens per machine per step to hide it | exposed tail (last bucket) | smallest useful bucket (latency <= 10%) |")
    print("|---|---|---|---|---|---|")
    for gbit in (10, 25, 100):
        w = gbit * 1e9 / 8
        for n in (8, 16, 32, 64):
            b = min(a.bucket_mb * 2**20, s)
            k = math.ceil(s / b)
            total = k * 2 * (n - 1) * alpha + 2 * (n - 1) / n * s / w
            hide_tokens = total / t_bwd_token
            tail = ring(b, n, alpha, w)
            b_min = 10 * n * alpha * w
            print(f"| {gbit} Gb/s | {n} | {total * 1e3:.1f} ms | {hide_tokens:,.0f} | {tail * 1e3:.2f} ms | {b_min / 2**20:.1f} MiB |")
    print()


if __name__ == "__main__":
    main()
