"""PyTorch's fp32 GEMM speed at given shapes, for the side-by-side table of `tfm bench`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_gemm.py --shapes M,N,K[;M,N,K...]
           --threads 1,2 [--min-time 0.2] [--min-reps 3] [--linear]
Prints one JSON object: {"torch": version, "results": [{"M","N","K","threads","gflops"}]},
each figure the best of the repetitions (torch.mm into a preallocated output). --linear: B is
a layer's weight stored (N, K) and multiplied transposed, as nn.Linear does, each run on the
next of copies filling >= 256 MiB (the weight comes from memory, as in a forward pass).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
from bench_timing import set_threads


def best_gflops(a, bs, out, min_time, min_reps):
    """bs: the B operands, one per run in turn (K, N views)."""
    torch.mm(a, bs[0], out=out)  # warm-up
    flops = 2.0 * a.shape[0] * a.shape[1] * bs[0].shape[1]
    best, reps, spent = float("inf"), 0, 0.0
    while reps < min_reps or spent < min_time:
        b = bs[reps % len(bs)]
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
    p.add_argument("--linear", action="store_true", help="B a weight (N, K) times its transpose, from memory")
    p.add_argument("--one-count", action="store_true", help="internal: measure one thread count only")
    args = p.parse_args()
    counts = [int(v) for v in args.threads.split(",")]
    if len(counts) > 1 and not args.one_count:
        # Debian's torch runs torch.mm on OpenBLAS, whose own thread pool ignores
        # torch.set_num_threads and is sized once at load: one process per thread count, with
        # OPENBLAS_NUM_THREADS set before torch is imported.
        results = []
        for t in counts:
            env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
            out = subprocess.run([sys.executable, __file__, "--shapes", args.shapes, "--threads", str(t),
                                  "--min-time", str(args.min_time), "--min-reps", str(args.min_reps), "--one-count"]
                                 + (["--linear"] if args.linear else []),
                                 env=env, check=True, capture_output=True, text=True).stdout
            results += json.loads(out)["results"]
        print(json.dumps({"torch": torch.__version__, "results": results}))
        return
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";") if s]
    results = []
    for t in counts:
        set_threads(torch, t)
        for m, n, k in shapes:
            g = torch.Generator().manual_seed(0)
            a = torch.rand(m, k, generator=g) - 0.5
            if args.linear:
                copies = max(2, (256 << 20) // (4 * n * k) + 1)
                bs = [(torch.rand(n, k, generator=g) - 0.5).t() for _ in range(copies)]
            else:
                bs = [torch.rand(k, n, generator=g) - 0.5]
            out = torch.empty(m, n)
            results.append({"M": m, "N": n, "K": k, "threads": t,
                            "gflops": best_gflops(a, bs, out, args.min_time, args.min_reps)})
    print(json.dumps({"torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
