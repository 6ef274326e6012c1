"""PIL's side of bench/micro/bench_image_decode.cpp: decode to RGB and resize to 224 x 224, on
the same files. Prints one line per case: best milliseconds of repeated runs and MP/s.

Usage: /usr/bin/python3 bench/peers/pil/bench_pil_image.py build/fixtures/image
"""
import io
import os
import sys
import time

from PIL import Image


def best_ms(fn, min_time=1.0, min_reps=5):
    fn()
    best, reps, spent = float("inf"), 0, 0.0
    while reps < min_reps or spent < min_time:
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        best, reps, spent = min(best, dt), reps + 1, spent + dt
    return best * 1e3


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "build/fixtures/image"
    for name in ("playground.png", "playground.jpg"):
        data = open(os.path.join(d, name), "rb").read()

        def decode():
            with Image.open(io.BytesIO(data)) as im:
                return im.convert("RGB")

        img = decode()
        ms = best_ms(decode)
        print(f"pil_decode/{name}: {ms:.2f} ms, {img.width * img.height / ms / 1e3:.1f} MP/s")
    img = decode()
    for fname, f in (("bilinear", Image.Resampling.BILINEAR), ("bicubic", Image.Resampling.BICUBIC)):
        print(f"pil_resize/{fname}_224: {best_ms(lambda: img.resize((224, 224), f)):.2f} ms")


if __name__ == "__main__":
    main()
