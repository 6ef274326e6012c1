"""Full-model references: the vaswani preset against torch.nn.Transformer (post- and pre-norm),
with embeddings, sinusoidal positions, padding masks and a tied output projection.

Parameters are saved under the engine's names (docs/design.md): nn.MultiheadAttention's packed
in_proj is split into q/k/v, and the gradients likewise."""
import math
import os

import torch
import torch.nn as nn

from fixtures import save
from ref_position import sinusoidal

V, C, H, FF, L = 23, 32, 4, 48, 2


def engine_names(model, emb, prefix_grad=False):
    """Map nn.Transformer + embedding parameters (or their grads) to the engine's names."""
    out = {}

    def get(t):
        return t.grad if prefix_grad else t.detach()

    def attn(dst, m):
        w = get(m.in_proj_weight)
        b = get(m.in_proj_bias)
        for i, n in enumerate("qkv"):
            out[f"{dst}.{n}_proj.weight"] = w[i * C:(i + 1) * C]
            out[f"{dst}.{n}_proj.bias"] = b[i * C:(i + 1) * C]
        out[f"{dst}.o_proj.weight"] = get(m.out_proj.weight)
        out[f"{dst}.o_proj.bias"] = get(m.out_proj.bias)

    def norm(dst, m):
        out[f"{dst}.weight"] = get(m.weight)
        out[f"{dst}.bias"] = get(m.bias)

    def ffn(dst, layer):
        out[f"{dst}.up_proj.weight"] = get(layer.linear1.weight)
        out[f"{dst}.up_proj.bias"] = get(layer.linear1.bias)
        out[f"{dst}.down_proj.weight"] = get(layer.linear2.weight)
        out[f"{dst}.down_proj.bias"] = get(layer.linear2.bias)

    for i, layer in enumerate(model.encoder.layers):
        p = f"encoder.layers.{i}"
        attn(p + ".self_attn", layer.self_attn)
        norm(p + ".self_attn_norm", layer.norm1)
        norm(p + ".ffn_norm", layer.norm2)
        ffn(p + ".ffn", layer)
    for i, layer in enumerate(model.decoder.layers):
        p = f"decoder.layers.{i}"
        attn(p + ".self_attn", layer.self_attn)
        attn(p + ".cross_attn", layer.multihead_attn)
        norm(p + ".self_attn_norm", layer.norm1)
        norm(p + ".cross_attn_norm", layer.norm2)
        norm(p + ".ffn_norm", layer.norm3)
        ffn(p + ".ffn", layer)
    norm("encoder.norm", model.encoder.norm)
    norm("decoder.norm", model.decoder.norm)
    out["embed_tokens.weight"] = get(emb.weight)
    return out


def vaswani(out, norm_first):
    torch.manual_seed(1 if norm_first else 0)
    model = nn.Transformer(d_model=C, nhead=H, num_encoder_layers=L, num_decoder_layers=L, dim_feedforward=FF,
                           dropout=0.0, batch_first=True, norm_first=norm_first)
    model.encoder.enable_nested_tensor = False
    emb = nn.Embedding(V, C)
    nn.init.normal_(emb.weight, 0, C ** -0.5)
    B, S, T = 3, 7, 5
    src = torch.randint(3, V, (B, S))
    tgt = torch.randint(3, V, (B, T))
    src_lens = torch.tensor([7, 4, 6])
    tgt_lens = torch.tensor([5, 5, 3])
    src_pad = torch.arange(S)[None, :] >= src_lens[:, None]
    tgt_pad = torch.arange(T)[None, :] >= tgt_lens[:, None]
    pe = sinusoidal(max(S, T), C)

    def embed(ids):
        return emb(ids) * math.sqrt(C) + pe[: ids.shape[1]]

    memory = model.encoder(embed(src), src_key_padding_mask=src_pad)
    dec = model.decoder(embed(tgt), memory, tgt_mask=model.generate_square_subsequent_mask(T),
                        tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
    logits = dec @ emb.weight.T
    w = torch.randn_like(logits)
    memory.retain_grad()
    (logits * w).sum().backward()
    tensors = {f"param.{k}": v for k, v in engine_names(model, emb).items()}
    tensors.update({f"grad.{k}": v for k, v in engine_names(model, emb, prefix_grad=True).items()})
    tensors.update({"src": src, "tgt": tgt, "src_lens": src_lens, "tgt_lens": tgt_lens, "memory": memory,
                    "decoder_out": dec, "logits": logits, "w": w})
    name = "pre" if norm_first else "post"
    save(os.path.join(out, f"model_vaswani_{name}.safetensors"), tensors)


def make(out):
    vaswani(out, False)
    vaswani(out, True)
