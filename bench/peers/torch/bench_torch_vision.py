"""Inference throughput of torchvision's vit_b_16 (random weights, eval mode, no_grad), for the
side-by-side table of `tfm bench vision`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_vision.py --batches 1,32 --threads 1,2
           [--min-time 0.15] [--min-reps 3]
Prints one JSON object: {"torch": version, "torchvision": version, "params": n,
"results": [{"batch", "threads", "images_per_s"}]}: images / best time of one forward over a
(batch, 3, 224, 224) input, as tfm counts it.
"""
import argparse
import json

import torch
import torchvision

from bench_timing import best_seconds, set_threads


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--batches", default="1")
    p.add_argument("--threads", default="1")
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--min-reps", type=int, default=3)
    args = p.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.vit_b_16(weights=None).eval()
    results = []
    with torch.no_grad():
        for t in (int(v) for v in args.threads.split(",")):
            set_threads(torch, t)
            for b in (int(v) for v in args.batches.split(",")):
                x = torch.randn(b, 3, 224, 224)
                s = best_seconds(lambda: model(x), args.min_time, args.min_reps)
                results.append({"batch": b, "threads": t, "images_per_s": b / s})
    print(json.dumps({"torch": torch.__version__, "torchvision": torchvision.__version__,
                      "params": sum(p.numel() for p in model.parameters()), "results": results}))


if __name__ == "__main__":
    main()
