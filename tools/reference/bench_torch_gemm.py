"""PyTorch's fp32 GEMM speed at given shapes, for the side-by-side table of `tfm bench`.

Usage: /usr/bin/python3 tools/reference/bench_torch_gemm.py --shapes M,N,K[;M,N,K...]
           --threads 1,2 [--min-time 0.2] [--min-reps 3]
Prints one JSON object: {"torch": version, "results": [{"M","N","K","threads","gflops"}]},
each figure the best of the repetitions (torch.mm into a preallocated output).
"""
import argparse
import json
import time

import torch


def best_gflops(a, b, out, min_time, min_reps):
    torch.mm(a, b, out=out)  # warm-up
    flops = 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
    best, reps, spent = float("inf"), 0, 0.0
    while reps < min_reps or spent < min_time:
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        dt = time.perf_counter() - t0
        best, reps, spent = min(best, dt), reps + 1, spent + dt
    return flops / best * 1e-9


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True)
    p.add_argument("--threads", default="1")
    p.add_argument("--min-time", type=float, default=0.2)
    p.add_argument("--min-reps", type=int, default=3)
    args = p.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";") if s]
    results = []
    for t in (int(v) for v in args.threads.split(",")):
        torch.set_num_threads(t)
        for m, n, k in shapes:
            g = torch.Generator().manual_seed(0)
            a = torch.rand(m, k, generator=g) - 0.5
            b = torch.rand(k, n, generator=g) - 0.5
            out = torch.empty(m, n)
            results.append({"M": m, "N": n, "K": k, "threads": t,
                            "gflops": best_gflops(a, b, out, args.min_time, args.min_reps)})
    print(json.dumps({"torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
