"""Timing shared by the bench_torch_*.py scripts: the best wall time of repeated calls."""
import time


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
