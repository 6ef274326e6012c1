"""CLIP hub directories and their PyTorch references (modeling_clip's CLIPModel written out in
float64; transformers is not in Debian 12).

make(OUT) writes OUT/hub/clip (CLIPModel as published: config.json with nested text_config and
vision_config, the towers of different widths, position_ids buffers stored) and
OUT/hub/clip.ref.safetensors: pixel_values (2, 3, 12, 12), input_ids (3, 7) with valid_lens (3)
(padding after the end token, as the hub's tokenizer pads with it), image_embeds and
text_embeds (normalised), logits_per_image (2, 3), w and grad.<name>: every parameter's
gradient of sum(logits_per_image * w); big_pixel_values (2, 3, 16, 16) and big_image_embeds:
the positions resized as CLIPVisionEmbeddings.interpolate_pos_encoding does; legacy_text_embeds:
the same texts when text_config's eos_token_id is 2 (older files: the largest id is pooled).

Run as a script it writes a CLIP directory for the command-line tests and scores pictures
against texts with it:
  ref_clip.py hub DIR VOCAB            a CLIP hub directory whose text vocabulary has VOCAB ids
  ref_clip.py probs DIR PICTURE IDS ...  softmax over the texts (ids "1,2,3", one per text) for a
                                        picture of the model's size (normalised by DIR's preprocessor)
"""
import math
import os
import sys

import torch
import torch.nn.functional as F

from fixtures import load, save
from ref_hub import attend, causal, heads, layer_norm, merge, near_one, rnd, stored, write_dir
from ref_vit import interpolate_positions


def clip_config(vocab=40, eos=39, **text_over):
    text = {"model_type": "clip_text_model", "vocab_size": vocab, "hidden_size": 16, "intermediate_size": 40,
            "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 12, "hidden_act": "quick_gelu",
            "layer_norm_eps": 1e-5, "attention_dropout": 0.0, "dropout": 0.0, "initializer_range": 0.02,
            "initializer_factor": 1.0, "pad_token_id": 1, "bos_token_id": vocab - 2, "eos_token_id": eos,
            "projection_dim": 8, "torch_dtype": None, "architectures": None, "return_dict": True}
    text.update(text_over)
    vision = {"model_type": "clip_vision_model", "hidden_size": 24, "intermediate_size": 48, "num_hidden_layers": 2,
              "num_attention_heads": 4, "image_size": 12, "patch_size": 4, "num_channels": 3, "hidden_act": "quick_gelu",
              "layer_norm_eps": 1e-5, "attention_dropout": 0.0, "dropout": 0.0, "initializer_range": 0.02,
              "initializer_factor": 1.0, "projection_dim": 8}
    return {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": 8,
            "logit_scale_init_value": 2.6592, "initializer_factor": 1.0, "torch_dtype": "float32",
            "transformers_version": "4.40.0", "text_config": text, "vision_config": vision}


def tower_params(p, root, cfg):
    C, F_ = cfg["hidden_size"], cfg["intermediate_size"]
    for i in range(cfg["num_hidden_layers"]):
        pre = f"{root}encoder.layers.{i}."
        for m in ("k_proj", "v_proj", "q_proj", "out_proj"):
            p[pre + "self_attn." + m + ".weight"], p[pre + "self_attn." + m + ".bias"] = rnd(C, C), rnd(C)
        for ln in ("layer_norm1", "layer_norm2"):
            p[pre + ln + ".weight"], p[pre + ln + ".bias"] = near_one(C), rnd(C)
        p[pre + "mlp.fc1.weight"], p[pre + "mlp.fc1.bias"] = rnd(F_, C), rnd(F_)
        p[pre + "mlp.fc2.weight"], p[pre + "mlp.fc2.bias"] = rnd(C, F_), rnd(C)


def clip_params(cfg):
    t, v, P = cfg["text_config"], cfg["vision_config"], cfg["projection_dim"]
    Ct, Cv, ps = t["hidden_size"], v["hidden_size"], v["patch_size"]
    n = (v["image_size"] // ps) ** 2 + 1
    p = {"text_model.embeddings.token_embedding.weight": rnd(t["vocab_size"], Ct),
         "text_model.embeddings.position_embedding.weight": rnd(t["max_position_embeddings"], Ct)}
    tower_params(p, "text_model.", t)
    p["text_model.final_layer_norm.weight"], p["text_model.final_layer_norm.bias"] = near_one(Ct), rnd(Ct)
    p["vision_model.embeddings.class_embedding"] = rnd(Cv)
    p["vision_model.embeddings.patch_embedding.weight"] = rnd(Cv, v["num_channels"], ps, ps)
    p["vision_model.embeddings.position_embedding.weight"] = rnd(n, Cv)
    p["vision_model.pre_layrnorm.weight"], p["vision_model.pre_layrnorm.bias"] = near_one(Cv), rnd(Cv)
    tower_params(p, "vision_model.", v)
    p["vision_model.post_layernorm.weight"], p["vision_model.post_layernorm.bias"] = near_one(Cv), rnd(Cv)
    p["visual_projection.weight"] = rnd(P, Cv)
    p["text_projection.weight"] = rnd(P, Ct)
    p["logit_scale"] = torch.tensor(cfg["logit_scale_init_value"])
    return p


def quick_gelu(x):
    return x * torch.sigmoid(1.702 * x)


def run_tower(p, root, cfg, x, mask):
    """CLIPEncoder: pre-LayerNorm layers with quick_gelu; mask is added to the scores."""
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    lin = lambda h, name: F.linear(h, p[name + ".weight"], p[name + ".bias"])
    for i in range(cfg["num_hidden_layers"]):
        pre = f"{root}encoder.layers.{i}."
        h = layer_norm(x, p[pre + "layer_norm1.weight"], p[pre + "layer_norm1.bias"], eps)
        q, k, v = (heads(lin(h, pre + "self_attn." + m), H) for m in ("q_proj", "k_proj", "v_proj"))
        x = x + lin(merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), mask)), pre + "self_attn.out_proj")
        h = layer_norm(x, p[pre + "layer_norm2.weight"], p[pre + "layer_norm2.bias"], eps)
        x = x + lin(quick_gelu(lin(h, pre + "mlp.fc1")), pre + "mlp.fc2")
    return x


def image_features(cfg, p, pixels):
    """CLIPVisionTransformer + visual_projection: get_image_features."""
    v = cfg["vision_config"]
    x = F.conv2d(pixels, p["vision_model.embeddings.patch_embedding.weight"], stride=v["patch_size"])
    gh, gw = x.shape[2], x.shape[3]
    x = x.flatten(2).transpose(1, 2)
    cls = p["vision_model.embeddings.class_embedding"].expand(x.shape[0], 1, -1)
    x = torch.cat([cls, x], 1)
    table = p["vision_model.embeddings.position_embedding.weight"].unsqueeze(0)
    x = x + interpolate_positions(table, 1, gh, gw)
    x = layer_norm(x, p["vision_model.pre_layrnorm.weight"], p["vision_model.pre_layrnorm.bias"], v["layer_norm_eps"])
    x = run_tower(p, "vision_model.", v, x, None)
    pooled = layer_norm(x[:, 0], p["vision_model.post_layernorm.weight"], p["vision_model.post_layernorm.bias"],
                        v["layer_norm_eps"])
    return pooled @ p["visual_projection.weight"].T


def text_features(cfg, p, ids, lens):
    """CLIPTextTransformer + text_projection: get_text_features (causal and padding masks; the
    state at the first end token, or at the largest id when eos_token_id is 2)."""
    t = cfg["text_config"]
    B, T = ids.shape
    x = p["text_model.embeddings.token_embedding.weight"][ids] + p["text_model.embeddings.position_embedding.weight"][:T]
    pad = torch.where(torch.arange(T)[None, :] < lens[:, None], 0.0, float("-inf")).to(x.dtype)
    mask = causal(T)[None, None] + pad[:, None, None, :]
    x = run_tower(p, "text_model.", t, x, mask)
    x = layer_norm(x, p["text_model.final_layer_norm.weight"], p["text_model.final_layer_norm.bias"], t["layer_norm_eps"])
    if t["eos_token_id"] == 2:
        at = ids.argmax(-1)
    else:
        at = (ids == t["eos_token_id"]).int().argmax(-1)
    return x[torch.arange(B), at] @ p["text_projection.weight"].T


def unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def logits_per_image(cfg, p, pixels, ids, lens):
    img, txt = unit(image_features(cfg, p, pixels)), unit(text_features(cfg, p, ids, lens))
    return p["logit_scale"].exp() * img @ txt.T, img, txt


def buffers(cfg):
    """The position_ids buffers CLIPModel's state dict carries."""
    t, v = cfg["text_config"], cfg["vision_config"]
    n = (v["image_size"] // v["patch_size"]) ** 2 + 1
    return {"text_model.embeddings.position_ids": torch.arange(t["max_position_embeddings"])[None],
            "vision_model.embeddings.position_ids": torch.arange(n)[None]}


def make(out):
    root = os.path.join(out, "hub")
    os.makedirs(root, exist_ok=True)
    torch.manual_seed(311)
    cfg = clip_config()
    disk, p = stored(clip_params(cfg), torch.float32)
    write_dir(os.path.join(root, "clip"), cfg, {**disk, **buffers(cfg)})
    pixels, big = torch.randn(2, 3, 12, 12), torch.randn(2, 3, 16, 16)
    ids = torch.tensor([[38, 5, 9, 17, 39, 39, 39], [38, 21, 39, 39, 39, 39, 39], [38, 3, 30, 11, 26, 7, 39]])
    lens = torch.tensor([5, 3, 7])
    for t in p.values():
        t.requires_grad_(True)
    logits, img, txt = logits_per_image(cfg, p, pixels.double(), ids, lens)
    w = torch.randn(logits.shape, dtype=torch.float64)
    (logits * w).sum().backward()
    grads = {"grad." + k: v.grad.float() for k, v in p.items()}
    with torch.no_grad():
        big_img = unit(image_features(cfg, p, big.double()))
        legacy = unit(text_features({**cfg, "text_config": {**cfg["text_config"], "eos_token_id": 2}}, p, ids, lens))
    save(os.path.join(root, "clip.ref.safetensors"),
         {"pixel_values": pixels, "input_ids": ids, "valid_lens": lens, "image_embeds": img.detach().float(),
          "text_embeds": txt.detach().float(), "logits_per_image": logits.detach().float(), "w": w.float(), **grads,
          "big_pixel_values": big, "big_image_embeds": big_img.float(), "legacy_text_embeds": legacy.float()})


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "hub":
        torch.manual_seed(7)
        vocab = int(sys.argv[3])
        cfg = clip_config(vocab=vocab, eos=vocab - 1, max_position_embeddings=32)
        disk, _ = stored(clip_params(cfg), torch.float32)
        write_dir(sys.argv[2], cfg, {**disk, **buffers(cfg)})
        return
    if len(sys.argv) >= 5 and sys.argv[1] == "probs":
        import json
        from PIL import Image
        d = sys.argv[2]
        cfg = json.load(open(os.path.join(d, "config.json")))
        pre = json.load(open(os.path.join(d, "preprocessor_config.json")))
        p = {k: v.double() if v.is_floating_point() else v for k, v in load(os.path.join(d, "model.safetensors")).items()}
        # The picture at the model's size already (the test's preprocessor does not resize).
        im = torch.tensor(list(Image.open(sys.argv[3]).convert("RGB").getdata()), dtype=torch.float64)
        side = cfg["vision_config"]["image_size"]
        im = im.reshape(side, side, 3).permute(2, 0, 1) / 255.0
        pixels = ((im - torch.tensor(pre["image_mean"])[:, None, None]) / torch.tensor(pre["image_std"])[:, None, None])[None]
        rows = [[int(x) for x in s.split(",")] for s in sys.argv[4:]]
        T = max(map(len, rows))
        ids = torch.tensor([r + [cfg["text_config"]["eos_token_id"]] * (T - len(r)) for r in rows])
        lens = torch.tensor([len(r) for r in rows])
        with torch.no_grad():
            logits, _, _ = logits_per_image(cfg, p, pixels, ids, lens)
        print(json.dumps(torch.softmax(logits, -1)[0].tolist()))
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
