"""PyTorch's forward throughput of softmax, LayerNorm, RMSNorm and GELU (erf, tanh), for the
side-by-side table of `tfm bench kernels`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_kernels.py --shapes R,C[;R,C...]
           --threads 1,2 [--min-time 0.15] [--min-reps 3]
Prints one JSON object: {"torch": version, "results": [{"op","rows","cols","threads","gbs"}]},
gbs = (bytes of x read + bytes of y written) / best time, as tfm counts it. Weights (C floats)
are not counted. Torch 1.13 has no fused RMSNorm: it is the composition every 1.13-era model
used (x * rsqrt(mean(x^2) + eps) * w), several passes over memory.
"""
import argparse
import json

import torch
import torch.nn.functional as F

from bench_timing import best_seconds, set_threads


def ops(cols):
    w, b = torch.randn(cols), torch.randn(cols)
    return {
        "softmax": lambda x: torch.softmax(x, -1),
        "layer_norm": lambda x: F.layer_norm(x, (cols,), w, b, 1e-5),
        "rms_norm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w,
        "gelu_erf": lambda x: F.gelu(x),
        "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    }




def main():
    p = argparse.ArgumentParser()
    p.add_argument("--shapes", required=True)
    p.add_argument("--threads", default="1")
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--min-reps", type=int, default=3)
    args = p.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes.split(";") if s]
    results = []
    with torch.no_grad():
        for t in (int(v) for v in args.threads.split(",")):
            set_threads(torch, t)
            for rows, cols in shapes:
                x = torch.randn(rows, cols, generator=torch.Generator().manual_seed(0))
                nbytes = 2.0 * 4 * rows * cols
                for name, fn in ops(cols).items():
                    s = best_seconds(lambda: fn(x), args.min_time, args.min_reps)
                    results.append({"op": name, "rows": rows, "cols": cols, "threads": t, "gbs": nbytes / s * 1e-9})
    print(json.dumps({"torch": torch.__version__, "results": results}))


if __name__ == "__main__":
    main()
