"""ViT hub directories and their PyTorch references (modeling_vit's forward written out in float64,
as ref_hub.py does for the text families; transformers is not in Debian 12).

Writes OUT/hub/vit_cls (ViTForImageClassification: "vit."-prefixed names, 3 labels) and
OUT/hub/vit_model (ViTModel as published: unprefixed names and its pooler, which the engine's
head "none" does not use), each with DIR.ref.safetensors: pixel_values (2, 3, 12, 12) f32 and
logits (2, 3) or hidden (2, 10, 16): the last hidden state after vit.layernorm; for vit_cls also
w and grad.<name>: every parameter's gradient of sum(logits * w), and rollout (2, 9): the
[CLS] token's attention rollout over the patches (Abnar & Zuidema 2020, as jacobgil's
vit-explain computes it: heads averaged, 0.5 A + 0.5 I, rows renormalised, layers multiplied).
vit_cls.ref also holds big_pixel_values (2, 3, 16, 16), big_logits and big_grad.<name>: the same
model on a 4 x 4 patch grid, its positions resized as modeling_vit's interpolate_pos_encoding
does (bicubic, align_corners=False, to the new grid's size).

OUT/hub/vit_sincos: the engine's extension keys (no [CLS], MAE's fixed 2-D sin-cos positions,
the classifier on the patches' mean): logits and gradients at 12 x 12 and 16 x 16.
OUT/hub/deit_teacher (DeiTForImageClassificationWithTeacher, modeling_deit): cls_logits,
distillation_logits, logits (their mean) and every gradient of sum(logits * w), at 12 x 12 and
16 x 16; OUT/hub/deit_model (DeiTModel, unprefixed, with its pooler): the last hidden state.
"""
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save
from ref_hub import attend, heads, layer_norm, merge, near_one, rnd, stored, strip, write_dir


def vit_config(**over):
    c = {"architectures": ["ViTForImageClassification"], "attention_probs_dropout_prob": 0.0, "encoder_stride": 4,
         "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "hidden_size": 16, "image_size": 12,
         "initializer_range": 0.02, "intermediate_size": 40, "layer_norm_eps": 1e-12, "model_type": "vit",
         "num_attention_heads": 4, "num_channels": 3, "num_hidden_layers": 2, "patch_size": 4, "qkv_bias": True,
         "torch_dtype": "float32", "transformers_version": "4.40.0",
         "id2label": {"0": "cat", "1": "dog", "2": "bird"}, "label2id": {"cat": 0, "dog": 1, "bird": 2}}
    c.update(over)
    return c


def vit_params(cfg, classifier, pooler, root="vit.", prefix_tokens=("cls_token",), positions=True):
    C, F_, P, ch = cfg["hidden_size"], cfg["intermediate_size"], cfg["patch_size"], cfg["num_channels"]
    n = (cfg["image_size"] // P) ** 2
    p = {root + "embeddings." + t: rnd(1, 1, C) for t in prefix_tokens}
    if positions:
        p[root + "embeddings.position_embeddings"] = rnd(1, n + len(prefix_tokens), C)
    p[root + "embeddings.patch_embeddings.projection.weight"] = rnd(C, ch, P, P)
    p[root + "embeddings.patch_embeddings.projection.bias"] = rnd(C)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"{root}encoder.layer.{i}."
        for ln in ("layernorm_before", "layernorm_after"):
            p[pre + ln + ".weight"], p[pre + ln + ".bias"] = near_one(C), rnd(C)
        for m in ("attention.attention.query", "attention.attention.key", "attention.attention.value",
                  "attention.output.dense"):
            p[pre + m + ".weight"], p[pre + m + ".bias"] = rnd(C, C), rnd(C)
        p[pre + "intermediate.dense.weight"], p[pre + "intermediate.dense.bias"] = rnd(F_, C), rnd(F_)
        p[pre + "output.dense.weight"], p[pre + "output.dense.bias"] = rnd(C, F_), rnd(C)
    p[root + "layernorm.weight"], p[root + "layernorm.bias"] = near_one(C), rnd(C)
    L = len(cfg.get("id2label", {}))
    for head in ([classifier] if isinstance(classifier, str) else ["classifier"] if classifier else []):
        p[head + ".weight"], p[head + ".bias"] = rnd(L, C), rnd(L)
    if pooler:
        p[root + "pooler.dense.weight"], p[root + "pooler.dense.bias"] = rnd(C, C), rnd(C)
    return p


def interpolate_positions(table, prefix, grid_h, grid_w):
    """modeling_vit / modeling_deit interpolate_pos_encoding (its current form: resized to a size, not by a scale factor): the prefix rows
    as they are, the patch rows resized bicubically to the new grid (size given, align_corners=False)."""
    n = table.shape[1] - prefix
    g = int(math.isqrt(n))
    if n == grid_h * grid_w and grid_h == grid_w:
        return table
    patch = table[:, prefix:].reshape(1, g, g, -1).permute(0, 3, 1, 2)
    patch = F.interpolate(patch, size=(grid_h, grid_w), mode="bicubic", align_corners=False)
    return torch.cat([table[:, :prefix], patch.permute(0, 2, 3, 1).reshape(1, grid_h * grid_w, -1)], 1)


def sincos_2d(dim, grid_h, grid_w):
    """MAE's get_2d_sincos_pos_embed (models_mae / util/pos_embed.py) for a grid_h x grid_w grid:
    the first half of the channels from the column index, the second from the row index."""
    def one_d(d, pos):
        omega = 1.0 / 10000 ** (torch.arange(d // 2, dtype=torch.float64) / (d / 2.0))
        out = pos.reshape(-1, 1).double() * omega
        return torch.cat([torch.sin(out), torch.cos(out)], 1)
    rows, cols = torch.meshgrid(torch.arange(grid_h), torch.arange(grid_w), indexing="ij")
    return torch.cat([one_d(dim // 2, cols), one_d(dim // 2, rows)], 1).unsqueeze(0)


def vit_forward(cfg, p, pixels, attentions=None, root="vit.", prefix_tokens=("cls_token",)):
    """modeling_vit: ViTEmbeddings, ViTLayer x L (pre-LayerNorm), vit.layernorm. Returns the hidden states;
    each layer's attention probabilities (B, H, T, T) are appended to `attentions` when given. DeiT
    (root "deit.", prefix tokens cls_token and distillation_token) is the same computation."""
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    lin = lambda x, name: F.linear(x, p[name + ".weight"], p[name + ".bias"])
    x = F.conv2d(pixels, p[root + "embeddings.patch_embeddings.projection.weight"],
                 p[root + "embeddings.patch_embeddings.projection.bias"], stride=cfg["patch_size"])
    gh, gw = x.shape[2], x.shape[3]
    x = x.flatten(2).transpose(1, 2)  # (B, N, C)
    x = torch.cat([p[root + "embeddings." + t].expand(x.shape[0], -1, -1) for t in prefix_tokens] + [x], 1)
    if cfg.get("position_embedding_type") == "sincos_2d":
        table = sincos_2d(x.shape[-1], gh, gw)
        x = x + torch.cat([torch.zeros(1, len(prefix_tokens), x.shape[-1], dtype=table.dtype), table], 1)
    else:
        x = x + interpolate_positions(p[root + "embeddings.position_embeddings"], len(prefix_tokens), gh, gw)
    for i in range(cfg["num_hidden_layers"]):
        pre = f"{root}encoder.layer.{i}."
        h = layer_norm(x, p[pre + "layernorm_before.weight"], p[pre + "layernorm_before.bias"], eps)
        q, k, v = (heads(lin(h, pre + "attention.attention." + m), H) for m in ("query", "key", "value"))
        if attentions is not None:
            attentions.append(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1))
        x = x + lin(merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]))), pre + "attention.output.dense")
        h = layer_norm(x, p[pre + "layernorm_after.weight"], p[pre + "layernorm_after.bias"], eps)
        x = x + lin(F.gelu(lin(h, pre + "intermediate.dense")), pre + "output.dense")
    return layer_norm(x, p[root + "layernorm.weight"], p[root + "layernorm.bias"], eps)


def rollout(attentions):
    T = attentions[0].shape[-1]
    r = torch.eye(T, dtype=torch.float64).expand(attentions[0].shape[0], T, T)
    for a in attentions:
        a = 0.5 * a.mean(1) + 0.5 * torch.eye(T, dtype=torch.float64)
        a = a / a.sum(-1, keepdim=True)
        r = a @ r
    return r[:, 0, 1:]


def with_grads(p, logits):
    """w and every parameter's gradient of sum(logits * w), as the tests read them."""
    for t in p.values():
        t.grad = None
    w = torch.randn(logits.shape, dtype=torch.float64)
    (logits * w).sum().backward()
    return w, {k: v.grad.float() for k, v in p.items()}


def make(out):
    root = os.path.join(out, "hub")
    os.makedirs(root, exist_ok=True)
    torch.manual_seed(201)
    pixels = torch.randn(2, 3, 12, 12)
    big = torch.randn(2, 3, 16, 16)

    cfg = vit_config()
    disk, p = stored(vit_params(cfg, classifier=True, pooler=False), torch.float32)
    write_dir(os.path.join(root, "vit_cls"), cfg, disk)
    for t in p.values():
        t.requires_grad_(True)
    hidden = vit_forward(cfg, p, pixels.double())
    logits = F.linear(hidden[:, 0], p["classifier.weight"], p["classifier.bias"])
    w, grads = with_grads(p, logits)  # every parameter's gradient of sum(logits * w)
    grads = {"grad." + k: v for k, v in grads.items()}
    attentions = []
    with torch.no_grad():
        vit_forward(cfg, p, pixels.double(), attentions)
    big_logits = F.linear(vit_forward(cfg, p, big.double())[:, 0], p["classifier.weight"], p["classifier.bias"])
    big_w, big_grads = with_grads(p, big_logits)
    big_grads = {"grad." + k: v for k, v in big_grads.items()}
    save(os.path.join(root, "vit_cls.ref.safetensors"),
         {"pixel_values": pixels, "logits": logits.detach().float(), "w": w.float(), **grads,
          "rollout": rollout(attentions).float(), "big_pixel_values": big, "big_logits": big_logits.detach().float(),
          "big_w": big_w.float(), **{"big_" + k: v for k, v in big_grads.items()}})

    # The engine's extensions: no [CLS], fixed 2-D sin-cos positions, the classifier on the patches' mean.
    cfg = vit_config(position_embedding_type="sincos_2d", use_cls_token=False, pooling="mean")
    disk, p = stored(vit_params(cfg, classifier=True, pooler=False, prefix_tokens=(), positions=False), torch.float32)
    write_dir(os.path.join(root, "vit_sincos"), cfg, disk)
    for t in p.values():
        t.requires_grad_(True)
    ref = {}
    for tag, px in (("", pixels), ("big_", big)):
        lg = F.linear(vit_forward(cfg, p, px.double(), prefix_tokens=()).mean(1), p["classifier.weight"],
                      p["classifier.bias"])
        w_, g_ = with_grads(p, lg)
        ref.update({tag + "pixel_values": px, tag + "logits": lg.detach().float(), tag + "w": w_.float(),
                    **{tag + "grad." + k: v for k, v in g_.items()}})
    save(os.path.join(root, "vit_sincos.ref.safetensors"), ref)

    # DeiT: ViT's encoder under "deit.", a distillation token after [CLS], two heads averaged.
    cfg = vit_config(architectures=["DeiTForImageClassificationWithTeacher"], model_type="deit")
    tokens = ("cls_token", "distillation_token")
    params = vit_params(cfg, classifier="cls_classifier", pooler=False, root="deit.", prefix_tokens=tokens)
    params.update({k: v for k, v in vit_params(cfg, classifier="distillation_classifier", pooler=False).items()
                   if k.startswith("distillation_classifier.")})
    disk, p = stored(params, torch.float32)
    write_dir(os.path.join(root, "deit_teacher"), cfg, disk)
    for t in p.values():
        t.requires_grad_(True)
    ref = {}
    for tag, px in (("", pixels), ("big_", big)):
        h = vit_forward(cfg, p, px.double(), root="deit.", prefix_tokens=tokens)
        cls = F.linear(h[:, 0], p["cls_classifier.weight"], p["cls_classifier.bias"])
        dist = F.linear(h[:, 1], p["distillation_classifier.weight"], p["distillation_classifier.bias"])
        lg = (cls + dist) / 2
        w_, g_ = with_grads(p, lg)
        ref.update({tag + "pixel_values": px, tag + "logits": lg.detach().float(), tag + "w": w_.float(),
                    tag + "cls_logits": cls.detach().float(), tag + "distillation_logits": dist.detach().float(),
                    **{tag + "grad." + k: v for k, v in g_.items()}})
    save(os.path.join(root, "deit_teacher.ref.safetensors"), ref)

    cfg = vit_config(architectures=["DeiTModel"], model_type="deit")
    del cfg["id2label"], cfg["label2id"]
    disk, p = stored(vit_params(cfg, classifier=False, pooler=True, root="deit.", prefix_tokens=tokens), torch.float32)
    write_dir(os.path.join(root, "deit_model"), cfg, strip(disk, "deit."))
    save(os.path.join(root, "deit_model.ref.safetensors"),
         {"pixel_values": pixels, "hidden": vit_forward(cfg, p, pixels.double(), root="deit.", prefix_tokens=tokens).float()})

    cfg = vit_config(architectures=["ViTModel"])
    del cfg["id2label"], cfg["label2id"]
    disk, p = stored(vit_params(cfg, classifier=False, pooler=True), torch.float32)
    write_dir(os.path.join(root, "vit_model"), cfg, strip(disk, "vit."))
    save(os.path.join(root, "vit_model.ref.safetensors"),
         {"pixel_values": pixels, "hidden": vit_forward(cfg, p, pixels.double()).float()})
