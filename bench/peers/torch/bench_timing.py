"""Timing shared by the bench_torch_*.py scripts: the best wall time of repeated calls, and the
thread count of both of PyTorch's pools."""
import ctypes
import time


def set_threads(torch, threads):
    """torch.set_num_threads(threads), and the same for the BLAS under it. Debian's torch runs
    torch.mm / addmm on OpenBLAS (libopenblas0-pthread), whose own pool ignores
    torch.set_num_threads and starts with one thread per core: without this, a "1-thread"
    PyTorch figure used every core for its matrix products (measured on the 2-core Zen 3: 45 s
    of CPU in 33 s of wall time for ViT-B/16), and a 2-thread one ran 2 x 2 threads on 2 cores."""
    torch.set_num_threads(threads)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "libopenblas" in line}
    for path in sorted(libs):
        if not path.startswith("/"):
            continue
        try:
            ctypes.CDLL(path).openblas_set_num_threads(ctypes.c_int(threads))
        except (OSError, AttributeError):
            continue


def best_seconds(fn, min_time, min_reps):
    """Best time of fn() over at least min_reps calls and min_time seconds, after a warm-up."""
    fn()
    best, reps, spent = float("inf"), 0, 0.0
    while reps < min_reps or spent < min_time:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, reps, spent = min(best, dt), reps + 1, spent + dt
    return best


def timed_steps(fn, warmup, steps):
    """Wall seconds of fn() called `steps` times after `warmup` untimed calls (a training run's
    throughput: every step counts, not only the best)."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return time.perf_counter() - t0


def peak_rss_bytes():
    """This process's peak resident set size (VmHWM in /proc/self/status), as tfm reads its own."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0
