#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/image/ with Debian's python3-pil: tiny images of each PNG
colour type (RGB, grey, palette, RGBA, 1-bit, 16-bit grey) and JPEG kind (baseline,
progressive, grey, EXIF-rotated), and a truncated one of each format. The seeds are committed;
run this again only to regenerate them:   python3 fuzz/make_image_corpus.py"""
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "image")


def main():
    os.makedirs(OUT, exist_ok=True)
    a = np.random.default_rng(7).integers(0, 255, (6, 5, 3), dtype=np.uint8)
    im = Image.fromarray(a, "RGB")
    im.save(f"{OUT}/rgb.png")
    im.convert("L").save(f"{OUT}/grey.png")
    im.convert("P", palette=Image.Palette.ADAPTIVE, colors=4).save(f"{OUT}/palette.png")
    rgba = im.copy()
    rgba.putalpha(128)
    rgba.save(f"{OUT}/rgba.png")
    im.convert("1").save(f"{OUT}/bilevel.png")
    Image.fromarray((a[:, :, 0].astype(np.uint16) * 257), "I;16").save(f"{OUT}/grey16.png")
    im.save(f"{OUT}/baseline.jpg", quality=80)
    im.save(f"{OUT}/progressive.jpg", quality=80, progressive=True)
    im.convert("L").save(f"{OUT}/grey.jpg", quality=80)
    exif = Image.Exif()
    exif[0x0112] = 6
    im.save(f"{OUT}/orient6.jpg", quality=80, exif=exif.tobytes())
    for src, dst in (("baseline.jpg", "truncated.jpg"), ("rgb.png", "truncated.png")):
        b = open(f"{OUT}/{src}", "rb").read()
        open(f"{OUT}/{dst}", "wb").write(b[: len(b) // 2])


if __name__ == "__main__":
    main()
