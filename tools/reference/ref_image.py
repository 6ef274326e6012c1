"""Image decoding, resampling and image-processor references with Debian's python3-pil.

Writes OUT/image/<name>.png|.jpg (the inputs, made here with PIL) and OUT/image.safetensors:
  decode.<name>         (H, W, 3) u8: PIL's Image.open(f) [exif_transpose for JPEG] .convert("RGB")
  resize.<name>.<filter>.<W>x<H>  (H, W, 3) u8: PIL's img.resize((W, H), filter)
  crop.<name>.<W>x<H>   (H, W, 3) u8: transformers' center_crop, in numpy
  proc.<config>.<name>  (3, H, W) f32: transformers' image processor steps written out (PIL
                        resize on the 8-bit image, float64 rescale, float32 normalise), with the
                        config's JSON in the metadata key "config.<config>".
transformers is not in Debian 12, so its processors' arithmetic is written here in numpy after
transformers' image_transforms.py (resize, center_crop, rescale, normalize).
"""
import json
import math
import os
import shutil

import numpy as np
import torch
from PIL import Image, ImageOps

import fixtures

FILTERS = {"nearest": Image.Resampling.NEAREST, "bilinear": Image.Resampling.BILINEAR,
           "bicubic": Image.Resampling.BICUBIC, "box": Image.Resampling.BOX,
           "hamming": Image.Resampling.HAMMING, "lanczos": Image.Resampling.LANCZOS}


def smooth_noise(w, h, seed):
    """An RGB picture with gradients, edges and noise: what resampling filters disagree on."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 127 + 100 * np.sin(x / 5.0) * np.cos(y / 7.0)
    g = 255 * x / max(w - 1, 1)
    b = np.where((x // 6 + y // 6) % 2 == 0, 230, 20).astype(np.float64)
    img = np.stack([r, g, b], -1) + rng.normal(0, 12, (h, w, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8)


def u8(a):
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.uint8))


def center_crop(a, h, w):
    """transformers.image_transforms.center_crop on (H, W, C)."""
    oh, ow = a.shape[:2]
    top, left = (oh - h) // 2, (ow - w) // 2
    bottom, right = top + h, left + w
    if top >= 0 and bottom <= oh and left >= 0 and right <= ow:
        return a[top:bottom, left:right]
    nh, nw = max(h, oh), max(w, ow)
    out = np.zeros((nh, nw) + a.shape[2:], dtype=a.dtype)
    tp, lp = math.ceil((nh - oh) / 2), math.ceil((nw - ow) / 2)
    out[tp:tp + oh, lp:lp + ow] = a
    top, bottom, left, right = top + tp, bottom + tp, left + lp, right + lp
    return out[max(0, top):min(nh, bottom), max(0, left):min(nw, right)]


def process(img, cfg):
    """ViTImageProcessor / CLIPImageProcessor.preprocess on one RGB PIL image -> (3, H, W) f32."""
    clip = cfg.get("image_processor_type", "").startswith("CLIP")
    resample = cfg.get("resample", 3 if clip else 2)
    if cfg.get("do_resize", True):
        size = cfg["size"]
        if isinstance(size, int):
            size = {"shortest_edge": size} if clip else {"height": size, "width": size}
        if "shortest_edge" in size:
            w, h = img.size
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = size["shortest_edge"], int(size["shortest_edge"] * long / short)
            nw, nh = (new_short, new_long) if w <= h else (new_long, new_short)
        else:
            nw, nh = size["width"], size["height"]
        img = img.resize((nw, nh), resample=resample)
    a = np.array(img)
    if cfg.get("do_center_crop", False):
        c = cfg["crop_size"]
        if isinstance(c, int):
            c = {"height": c, "width": c}
        a = center_crop(a, c["height"], c["width"])
    a = a.astype(np.float32)
    if cfg.get("do_rescale", True):
        a = (a.astype(np.float64) * cfg.get("rescale_factor", 1 / 255)).astype(np.float32)
    if cfg.get("do_normalize", True):
        mean = np.array(cfg.get("image_mean", [0.5] * 3), dtype=a.dtype)
        std = np.array(cfg.get("image_std", [0.5] * 3), dtype=a.dtype)
        a = (a - mean) / std
    return torch.from_numpy(np.ascontiguousarray(a.transpose(2, 0, 1)))


CONFIGS = {
    "vit": {"image_processor_type": "ViTImageProcessor", "do_resize": True, "size": {"height": 32, "width": 32},
            "resample": 2, "do_rescale": True, "rescale_factor": 0.00392156862745098, "do_normalize": True,
            "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
    "deit": {"image_processor_type": "DeiTImageProcessor", "do_resize": True, "size": {"height": 40, "width": 40},
             "resample": 3, "do_center_crop": True, "crop_size": {"height": 32, "width": 32},
             "do_rescale": True, "rescale_factor": 0.00392156862745098, "do_normalize": True,
             "image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]},
    "clip": {"image_processor_type": "CLIPImageProcessor", "do_resize": True, "size": {"shortest_edge": 28},
             "resample": 3, "do_center_crop": True, "crop_size": {"height": 28, "width": 28},
             "do_rescale": True, "rescale_factor": 0.00392156862745098, "do_normalize": True,
             "do_convert_rgb": True, "image_mean": [0.48145466, 0.4578275, 0.40821073],
             "image_std": [0.26862954, 0.26130258, 0.27577711]},
}


def make(out):
    d = os.path.join(out, "image")
    os.makedirs(d, exist_ok=True)
    tensors, meta = {}, {}
    base = Image.fromarray(smooth_noise(61, 45, 1), "RGB")
    # Inputs in the formats and colour types files come in.
    inputs = {}
    base.save(os.path.join(d, "rgb.png")); inputs["rgb.png"] = "rgb"
    rgba = base.copy(); rgba.putalpha(Image.fromarray(smooth_noise(61, 45, 2)[:, :, 0]))
    rgba.save(os.path.join(d, "rgba.png")); inputs["rgba.png"] = "rgba"
    base.convert("L").save(os.path.join(d, "grey.png")); inputs["grey.png"] = "grey"
    base.convert("LA").save(os.path.join(d, "grey_alpha.png")); inputs["grey_alpha.png"] = "grey_alpha"
    base.convert("P", palette=Image.Palette.ADAPTIVE, colors=37).save(os.path.join(d, "palette.png"))
    inputs["palette.png"] = "palette"
    base.convert("1").save(os.path.join(d, "bilevel.png")); inputs["bilevel.png"] = "bilevel"
    base.save(os.path.join(d, "q90.jpg"), quality=90); inputs["q90.jpg"] = "q90"
    base.save(os.path.join(d, "q75_444.jpg"), quality=75, subsampling=0); inputs["q75_444.jpg"] = "q75_444"
    base.save(os.path.join(d, "progressive.jpg"), quality=85, progressive=True); inputs["progressive.jpg"] = "progressive"
    base.convert("L").save(os.path.join(d, "grey.jpg"), quality=90); inputs["grey.jpg"] = "grey_jpg"
    for o in range(1, 9):  # every EXIF orientation
        exif = Image.Exif()
        exif[0x0112] = o
        base.save(os.path.join(d, f"orient{o}.jpg"), quality=90, exif=exif.tobytes())
        inputs[f"orient{o}.jpg"] = f"orient{o}"
    # A real picture: the playground's screenshot (RGBA PNG, 1 MP), shipped in docs/img.
    shot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "img", "playground.png")
    shutil.copyfile(shot, os.path.join(d, "playground.png"))
    with Image.open(shot) as im:
        photo = im.convert("RGB")
    photo.save(os.path.join(d, "playground.jpg"), quality=90)  # for bench/micro/bench_image_decode.cpp
    tensors["decode.playground"] = u8(np.array(photo))
    for fname in ("bilinear", "bicubic"):
        tensors[f"resize.playground.{fname}.224x224"] = u8(np.array(photo.resize((224, 224), FILTERS[fname])))
    for file, name in inputs.items():
        with Image.open(os.path.join(d, file)) as im:
            if file.endswith(".jpg"):
                im = ImageOps.exif_transpose(im)
            tensors[f"decode.{name}"] = u8(np.array(im.convert("RGB")))
    # Resampling: down and up, odd sizes, every filter, on a picture and on a tiny one.
    tiny = Image.fromarray(smooth_noise(5, 3, 3), "RGB")
    tiny.save(os.path.join(d, "tiny.png"))
    for src_name, src in (("rgb", base), ("tiny", tiny)):
        for fname, f in FILTERS.items():
            for w, h in ((32, 32), (17, 29), (61, 20), (128, 90), (1, 1), (7, 45)):
                tensors[f"resize.{src_name}.{fname}.{w}x{h}"] = u8(np.array(src.resize((w, h), f)))
    for w, h in ((32, 32), (61, 45), (70, 50), (20, 60)):
        tensors[f"crop.rgb.{w}x{h}"] = u8(center_crop(np.array(base), h, w))
    # Image processors as hub directories configure them, on a landscape and a portrait picture.
    portrait = Image.fromarray(smooth_noise(23, 50, 4), "RGB")
    portrait.save(os.path.join(d, "portrait.png"))
    for cname, cfg in CONFIGS.items():
        meta[f"config.{cname}"] = json.dumps(cfg)
        for src_name, src in (("rgb", base), ("portrait", portrait)):
            tensors[f"proc.{cname}.{src_name}"] = process(src, cfg)
    fixtures.save(os.path.join(out, "image.safetensors"), tensors, meta)
