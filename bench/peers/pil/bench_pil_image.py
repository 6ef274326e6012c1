"""PIL's side of bench/micro/bench_image_decode.cpp: decode to RGB and resize to 224 x 224, on
the same files. Prints one line per case: best milliseconds of repeated runs and MP/s.

Usage: /usr/bin/python3 bench/peers/pil/bench_pil_image.py build/fixtures/image
"""
import io
import os
import sys
import time

import numpy as np
from PIL import Image

# transformers' ViTImageProcessor and CLIPImageProcessor as they run on a PIL image: PIL's resize
# (and, for CLIP, a center crop), then NumPy: to float32, rescale, normalise, channels first.
VIT = {"size": (224, 224), "resample": Image.Resampling.BILINEAR, "mean": [0.5] * 3, "std": [0.5] * 3}
CLIP = {"shortest_edge": 224, "resample": Image.Resampling.BICUBIC, "crop": 224,
        "mean": [0.48145466, 0.4578275, 0.40821073], "std": [0.26862954, 0.26130258, 0.27577711]}


def pipeline(data, p):
    with Image.open(io.BytesIO(data)) as im:
        img = im.convert("RGB")
    if "size" in p:
        img = img.resize(p["size"], p["resample"])
    else:
        s = p["shortest_edge"] / min(img.width, img.height)
        img = img.resize((round(img.width * s), round(img.height * s)), p["resample"])
        left, top = (img.width - p["crop"]) // 2, (img.height - p["crop"]) // 2
        img = img.crop((left, top, left + p["crop"], top + p["crop"]))
    x = np.asarray(img, dtype=np.float32) * np.float32(1 / 255)
    x = (x - np.array(p["mean"], dtype=np.float32)) / np.array(p["std"], dtype=np.float32)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


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
    for case, name, p in (("png_vit", "playground.png", VIT), ("jpeg_vit", "playground.jpg", VIT),
                          ("jpeg_clip", "playground.jpg", CLIP)):
        data = open(os.path.join(d, name), "rb").read()
        print(f"pil_pipeline/{case}: {best_ms(lambda: pipeline(data, p)):.2f} ms")


if __name__ == "__main__":
    main()
