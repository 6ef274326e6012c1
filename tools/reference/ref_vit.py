"""ViT hub directories and their PyTorch references (modeling_vit's forward written out in float64,
as ref_hub.py does for the text families; transformers is not in Debian 12).

Writes OUT/hub/vit_cls (ViTForImageClassification: "vit."-prefixed names, 3 labels) and
OUT/hub/vit_model (ViTModel as published: unprefixed names and its pooler, which the engine's
head "none" does not use), each with DIR.ref.safetensors: pixel_values (2, 3, 12, 12) f32 and
logits (2, 3) or hidden (2, 10, 16): the last hidden state after vit.layernorm; for vit_cls also
w and grad.<name>: every parameter's gradient of sum(logits * w), and rollout (2, 9): the
[CLS] token's attention rollout over the patches (Abnar & Zuidema 2020, as jacobgil's
vit-explain computes it: heads averaged, 0.5 A + 0.5 I, rows renormalised, layers multiplied).
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


def vit_params(cfg, classifier, pooler):
    C, F_, P, ch = cfg["hidden_size"], cfg["intermediate_size"], cfg["patch_size"], cfg["num_channels"]
    n = (cfg["image_size"] // P) ** 2
    p = {"vit.embeddings.cls_token": rnd(1, 1, C), "vit.embeddings.position_embeddings": rnd(1, n + 1, C),
         "vit.embeddings.patch_embeddings.projection.weight": rnd(C, ch, P, P),
         "vit.embeddings.patch_embeddings.projection.bias": rnd(C)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"vit.encoder.layer.{i}."
        for ln in ("layernorm_before", "layernorm_after"):
            p[pre + ln + ".weight"], p[pre + ln + ".bias"] = near_one(C), rnd(C)
        for m in ("attention.attention.query", "attention.attention.key", "attention.attention.value",
                  "attention.output.dense"):
            p[pre + m + ".weight"], p[pre + m + ".bias"] = rnd(C, C), rnd(C)
        p[pre + "intermediate.dense.weight"], p[pre + "intermediate.dense.bias"] = rnd(F_, C), rnd(F_)
        p[pre + "output.dense.weight"], p[pre + "output.dense.bias"] = rnd(C, F_), rnd(C)
    p["vit.layernorm.weight"], p["vit.layernorm.bias"] = near_one(C), rnd(C)
    if classifier:
        p["classifier.weight"], p["classifier.bias"] = rnd(len(cfg["id2label"]), C), rnd(len(cfg["id2label"]))
    if pooler:
        p["vit.pooler.dense.weight"], p["vit.pooler.dense.bias"] = rnd(C, C), rnd(C)
    return p


def vit_forward(cfg, p, pixels, attentions=None):
    """modeling_vit: ViTEmbeddings, ViTLayer x L (pre-LayerNorm), vit.layernorm. Returns the hidden states;
    each layer's attention probabilities (B, H, T, T) are appended to `attentions` when given."""
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    lin = lambda x, name: F.linear(x, p[name + ".weight"], p[name + ".bias"])
    x = F.conv2d(pixels, p["vit.embeddings.patch_embeddings.projection.weight"],
                 p["vit.embeddings.patch_embeddings.projection.bias"], stride=cfg["patch_size"])
    x = x.flatten(2).transpose(1, 2)  # (B, N, C)
    x = torch.cat([p["vit.embeddings.cls_token"].expand(x.shape[0], -1, -1), x], 1)
    x = x + p["vit.embeddings.position_embeddings"]
    for i in range(cfg["num_hidden_layers"]):
        pre = f"vit.encoder.layer.{i}."
        h = layer_norm(x, p[pre + "layernorm_before.weight"], p[pre + "layernorm_before.bias"], eps)
        q, k, v = (heads(lin(h, pre + "attention.attention." + m), H) for m in ("query", "key", "value"))
        if attentions is not None:
            attentions.append(torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1))
        x = x + lin(merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]))), pre + "attention.output.dense")
        h = layer_norm(x, p[pre + "layernorm_after.weight"], p[pre + "layernorm_after.bias"], eps)
        x = x + lin(F.gelu(lin(h, pre + "intermediate.dense")), pre + "output.dense")
    return layer_norm(x, p["vit.layernorm.weight"], p["vit.layernorm.bias"], eps)


def rollout(attentions):
    T = attentions[0].shape[-1]
    r = torch.eye(T, dtype=torch.float64).expand(attentions[0].shape[0], T, T)
    for a in attentions:
        a = 0.5 * a.mean(1) + 0.5 * torch.eye(T, dtype=torch.float64)
        a = a / a.sum(-1, keepdim=True)
        r = a @ r
    return r[:, 0, 1:]


def make(out):
    root = os.path.join(out, "hub")
    os.makedirs(root, exist_ok=True)
    torch.manual_seed(201)
    pixels = torch.randn(2, 3, 12, 12)

    cfg = vit_config()
    disk, p = stored(vit_params(cfg, classifier=True, pooler=False), torch.float32)
    write_dir(os.path.join(root, "vit_cls"), cfg, disk)
    for t in p.values():
        t.requires_grad_(True)
    hidden = vit_forward(cfg, p, pixels.double())
    logits = F.linear(hidden[:, 0], p["classifier.weight"], p["classifier.bias"])
    w = torch.randn(logits.shape, dtype=torch.float64)
    (logits * w).sum().backward()  # every parameter's gradient of sum(logits * w)
    grads = {"grad." + k: v.grad.float() for k, v in p.items()}
    attentions = []
    with torch.no_grad():
        vit_forward(cfg, p, pixels.double(), attentions)
    save(os.path.join(root, "vit_cls.ref.safetensors"),
         {"pixel_values": pixels, "logits": logits.detach().float(), "w": w.float(), **grads,
          "rollout": rollout(attentions).float()})

    cfg = vit_config(architectures=["ViTModel"])
    del cfg["id2label"], cfg["label2id"]
    disk, p = stored(vit_params(cfg, classifier=False, pooler=True), torch.float32)
    write_dir(os.path.join(root, "vit_model"), cfg, strip(disk, "vit."))
    save(os.path.join(root, "vit_model.ref.safetensors"),
         {"pixel_values": pixels, "hidden": vit_forward(cfg, p, pixels.double()).float()})
