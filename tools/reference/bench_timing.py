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
