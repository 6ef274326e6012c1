"""A folder of three picture classes for the image-model tests: 12x12 grey pictures (saved as RGB
PNGs) with a bright top half, a bright left half or a bright diagonal, each on seeded noise.
   usage: make_pictures.py DIR PER_CLASS   (writes DIR/top, DIR/left, DIR/diagonal)"""
import os
import random
import sys

from PIL import Image

root, per_class, rnd = sys.argv[1], int(sys.argv[2]), random.Random(5)
for name, on in (("top", lambda x, y: y < 6), ("left", lambda x, y: x < 6), ("diagonal", lambda x, y: abs(x - y) <= 1)):
    os.makedirs(os.path.join(root, name))
    for i in range(per_class):
        img = Image.new("L", (12, 12))
        img.putdata([(170 if on(x, y) else 40) + rnd.randrange(60) for y in range(12) for x in range(12)])
        img.convert("RGB").save(os.path.join(root, name, "%02d.png" % i))
