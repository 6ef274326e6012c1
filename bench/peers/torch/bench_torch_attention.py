"""PyTorch 1.13's attention — softmax(q k^T / sqrt(d)) v composed from matmul and softmax
(1.13 has no F.scaled_dot_product_attention) — time and peak memory, forward and
forward+backward, for the side-by-side table of `tfm bench attention`.

Usage: /usr/bin/python3 bench/peers/torch/bench_torch_attention.py --T 256,512 [--B 1 --H 4 --D 64]
           --threads 2 --what time|memory [--min-time 0.15] [--min-reps 3]
Prints one JSON object: {"torch", "method", "results": [{"T","mode","seconds"|"peak_bytes"}]},
mode "fwd" (under no_grad) or "fwdbwd" (out.backward(g) into q, k, v's .grad).

Memory method: PyTorch's CPU allocator has no peak counter (torch.cuda's has), so the peak is
read from the kernel: peak resident set size (VmHWM) after the op minus resident size (VmRSS)
before it, with VmHWM reset just before the op by writing 5 to /proc/self/clear_refs. glibc
would keep freed blocks mapped (and reuse them without raising the peak), so --what memory
re-runs this script with MALLOC_MMAP_THRESHOLD_=65536: every block >= 64 KiB is its own
mapping, returned to the kernel when freed. It is measured in a separate process from the
timing, which runs with glibc's defaults. The figure counts pages touched, so it includes
non-tensor scratch (e.g. oneDNN's) and page rounding; tfm's figure counts tensor bytes only.
"""
import argparse
import json
import math
import os
import sys

import torch

from bench_timing import best_seconds, set_threads


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise RuntimeError(key + " not in /proc/self/status")


def peak_bytes(fn):
    """Peak resident bytes above the current resident size while fn() runs."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current VmRSS
    before = status_kib("VmRSS")
    fn()
    return (status_kib("VmHWM") - before) * 1024




def attention(q, k, v):
    s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.softmax(s, -1) @ v


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--T", required=True)
    p.add_argument("--B", type=int, default=1)
    p.add_argument("--H", type=int, default=4)
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--what", choices=["time", "memory"], default="time")
    p.add_argument("--min-time", type=float, default=0.15)
    p.add_argument("--min-reps", type=int, default=3)
    args = p.parse_args()
    if args.what == "memory" and os.environ.get("MALLOC_MMAP_THRESHOLD_") != "65536":
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    set_threads(torch, args.threads)
    results = []
    for T in (int(t) for t in args.T.split(",")):
        g = torch.Generator().manual_seed(T)
        q, k, v, go = (torch.randn(args.B, args.H, T, args.D, generator=g) for _ in range(4))

        def fwd():
            with torch.no_grad():
                attention(q, k, v)

        def fwdbwd():
            for t in (q, k, v):
                t.grad = None  # the previous run's gradients are freed first
            attention(q, k, v).backward(go)

        for mode, fn in (("fwd", fwd), ("fwdbwd", fwdbwd)):
            for t in (q, k, v):
                t.requires_grad_(mode == "fwdbwd")
            fn()  # warm-up: thread pool, oneDNN primitives
            if args.what == "time":
                results.append({"T": T, "mode": mode, "seconds": best_seconds(fn, args.min_time, args.min_reps)})
            else:
                for t in (q, k, v):
                    t.grad = None
                results.append({"T": T, "mode": mode, "peak_bytes": peak_bytes(fn)})
    method = "peak RSS above RSS before the op (VmHWM reset via /proc/self/clear_refs, mmap threshold 64 KiB)"
    print(json.dumps({"torch": torch.__version__, "method": method, "results": results}))


if __name__ == "__main__":
    main()
