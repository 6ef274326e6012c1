"""Tiny models of each Hugging Face family, written in plain PyTorch the way the transformers
library computes them, with parameters under Hugging Face's names. Each fixture holds the
parameters, inputs, logits, a random cotangent w and every parameter's gradient of sum(logits*w).

  gpt2  pre-LN, learned positions, fused Conv1D c_attn (in, out), gelu_new, tied head
  llama pre-RMSNorm, RoPE (halves), SwiGLU, grouped-query attention (8 heads, 2 kv), no biases
  bert  post-LN, learned positions + token types, embedding LayerNorm, padding, pooler + classifier
  t5    pre-RMSNorm, relative position buckets, no score scaling, gated-gelu, tied head * d^-0.5
"""
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save
from ref_position import rope_halves, t5_bucket

torch.set_default_dtype(torch.float32)


def P(shape, std=0.2):
    return (torch.randn(*shape) * std).requires_grad_()


def ones(n):
    return (1.0 + 0.1 * torch.randn(n)).requires_grad_()


def zeros(n):
    return (0.1 * torch.randn(n)).requires_grad_()


def finish(out, name, params, inputs, logits):
    w = torch.randn_like(logits)
    (logits * w).sum().backward()
    t = {f"param.{k}": v for k, v in params.items()}
    t.update({f"grad.{k}": v.grad for k, v in params.items()})
    t.update(inputs)
    t.update({"logits": logits, "w": w})
    save(os.path.join(out, f"preset_{name}.safetensors"), t)


def attention(q, k, v, scale, mask_add=None):
    s = q @ k.transpose(-1, -2) * scale
    if mask_add is not None:
        s = s + mask_add
    return torch.softmax(s, -1) @ v


def causal_add(T):
    return torch.triu(torch.full((T, T), float("-inf")), 1)


def gpt2(out):
    torch.manual_seed(10)
    V, C, H, L, Pn = 31, 16, 4, 2, 20
    p = {"transformer.wte.weight": P((V, C)), "transformer.wpe.weight": P((Pn, C))}
    for i in range(L):
        h = f"transformer.h.{i}."
        p.update({h + "ln_1.weight": ones(C), h + "ln_1.bias": zeros(C), h + "attn.c_attn.weight": P((C, 3 * C)),
                  h + "attn.c_attn.bias": zeros(3 * C), h + "attn.c_proj.weight": P((C, C)),
                  h + "attn.c_proj.bias": zeros(C), h + "ln_2.weight": ones(C), h + "ln_2.bias": zeros(C),
                  h + "mlp.c_fc.weight": P((C, 4 * C)), h + "mlp.c_fc.bias": zeros(4 * C),
                  h + "mlp.c_proj.weight": P((4 * C, C)), h + "mlp.c_proj.bias": zeros(C)})
    p.update({"transformer.ln_f.weight": ones(C), "transformer.ln_f.bias": zeros(C)})
    B, T = 2, 9
    ids = torch.randint(0, V, (B, T))
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][:T]
    for i in range(L):
        h = f"transformer.h.{i}."
        a = F.layer_norm(x, (C,), p[h + "ln_1.weight"], p[h + "ln_1.bias"], 1e-5)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]
        q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in qkv.split(C, -1))
        o = attention(q, k, v, (C // H) ** -0.5, causal_add(T)).transpose(1, 2).reshape(B, T, C)
        x = x + o @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = F.layer_norm(x, (C,), p[h + "ln_2.weight"], p[h + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"], approximate="tanh")
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], 1e-5)
    finish(out, "gpt2", p, {"input_ids": ids}, x @ p["transformer.wte.weight"].T)


def llama(out):
    torch.manual_seed(11)
    V, C, H, KV, FF, L = 29, 32, 8, 2, 40, 2
    D = C // H
    p = {"model.embed_tokens.weight": P((V, C))}
    for i in range(L):
        h = f"model.layers.{i}."
        p.update({h + "input_layernorm.weight": ones(C), h + "self_attn.q_proj.weight": P((H * D, C)),
                  h + "self_attn.k_proj.weight": P((KV * D, C)), h + "self_attn.v_proj.weight": P((KV * D, C)),
                  h + "self_attn.o_proj.weight": P((C, H * D)), h + "post_attention_layernorm.weight": ones(C),
                  h + "mlp.gate_proj.weight": P((FF, C)), h + "mlp.up_proj.weight": P((FF, C)),
                  h + "mlp.down_proj.weight": P((C, FF))})
    p.update({"model.norm.weight": ones(C), "lm_head.weight": P((V, C))})
    B, T = 2, 11
    ids = torch.randint(0, V, (B, T))
    pos = torch.arange(T)

    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    x = p["model.embed_tokens.weight"][ids]
    for i in range(L):
        h = f"model.layers.{i}."
        a = rms(x, p[h + "input_layernorm.weight"])
        q = (a @ p[h + "self_attn.q_proj.weight"].T).reshape(B, T, H, D).transpose(1, 2)
        k = (a @ p[h + "self_attn.k_proj.weight"].T).reshape(B, T, KV, D).transpose(1, 2)
        v = (a @ p[h + "self_attn.v_proj.weight"].T).reshape(B, T, KV, D).transpose(1, 2)
        q, k = rope_halves(q, pos, 10000.0), rope_halves(k, pos, 10000.0)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        o = attention(q, k, v, D ** -0.5, causal_add(T)).transpose(1, 2).reshape(B, T, C)
        x = x + o @ p[h + "self_attn.o_proj.weight"].T
        m = rms(x, p[h + "post_attention_layernorm.weight"])
        m = F.silu(m @ p[h + "mlp.gate_proj.weight"].T) * (m @ p[h + "mlp.up_proj.weight"].T)
        x = x + m @ p[h + "mlp.down_proj.weight"].T
    x = rms(x, p["model.norm.weight"])
    finish(out, "llama", p, {"input_ids": ids}, x @ p["lm_head.weight"].T)


def bert(out):
    torch.manual_seed(12)
    V, C, H, FF, L, Pn, NL = 27, 16, 2, 24, 2, 16, 3
    e = "bert.embeddings."
    p = {e + "word_embeddings.weight": P((V, C)), e + "position_embeddings.weight": P((Pn, C)),
         e + "token_type_embeddings.weight": P((2, C)), e + "LayerNorm.weight": ones(C), e + "LayerNorm.bias": zeros(C)}
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        for n in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            p.update({h + n + ".weight": P((C, C)), h + n + ".bias": zeros(C)})
        p.update({h + "attention.output.LayerNorm.weight": ones(C), h + "attention.output.LayerNorm.bias": zeros(C),
                  h + "intermediate.dense.weight": P((FF, C)), h + "intermediate.dense.bias": zeros(FF),
                  h + "output.dense.weight": P((C, FF)), h + "output.dense.bias": zeros(C),
                  h + "output.LayerNorm.weight": ones(C), h + "output.LayerNorm.bias": zeros(C)})
    p.update({"bert.pooler.dense.weight": P((C, C)), "bert.pooler.dense.bias": zeros(C),
              "classifier.weight": P((NL, C)), "classifier.bias": zeros(NL)})
    B, T = 3, 8
    ids = torch.randint(0, V, (B, T))
    types = torch.randint(0, 2, (B, T))
    lens = torch.tensor([8, 5, 2])
    pad_add = torch.where(torch.arange(T)[None, :] >= lens[:, None], float("-inf"), 0.0)[:, None, None, :]

    def lin(x, n):
        return x @ p[n + ".weight"].T + p[n + ".bias"]

    def ln(x, n):
        return F.layer_norm(x, (C,), p[n + ".weight"], p[n + ".bias"], 1e-12)

    x = p[e + "word_embeddings.weight"][ids] + p[e + "position_embeddings.weight"][:T] + \
        p[e + "token_type_embeddings.weight"][types]
    x = ln(x, e + "LayerNorm")
    D = C // H
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        q, k, v = (lin(x, h + "attention.self." + n).reshape(B, T, H, D).transpose(1, 2) for n in ("query", "key", "value"))
        o = attention(q, k, v, D ** -0.5, pad_add).transpose(1, 2).reshape(B, T, C)
        x = ln(x + lin(o, h + "attention.output.dense"), h + "attention.output.LayerNorm")
        m = lin(F.gelu(lin(x, h + "intermediate.dense")), h + "output.dense")
        x = ln(x + m, h + "output.LayerNorm")
    pooled = torch.tanh(lin(x[:, 0], "bert.pooler.dense"))
    finish(out, "bert", p, {"input_ids": ids, "token_type_ids": types, "valid_lens": lens}, lin(pooled, "classifier"))


def t5(out):
    torch.manual_seed(13)
    V, C, H, DK, FF, L, NB, MD = 33, 16, 2, 8, 24, 2, 8, 20
    p = {"shared.weight": P((V, C), 1.0)}
    for side in ("encoder", "decoder"):
        for i in range(L):
            b = f"{side}.block.{i}."
            for a in (["layer.0.SelfAttention."] + (["layer.1.EncDecAttention."] if side == "decoder" else [])):
                for n in "qkv":
                    p[b + a + n + ".weight"] = P((H * DK, C))
                p[b + a + "o.weight"] = P((C, H * DK))
            if i == 0:
                p[b + "layer.0.SelfAttention.relative_attention_bias.weight"] = P((NB, H), 0.5)
            p[b + "layer.0.layer_norm.weight"] = ones(C)
            f = b + ("layer.2." if side == "decoder" else "layer.1.")
            if side == "decoder":
                p[b + "layer.1.layer_norm.weight"] = ones(C)
            p.update({f + "DenseReluDense.wi_0.weight": P((FF, C)), f + "DenseReluDense.wi_1.weight": P((FF, C)),
                      f + "DenseReluDense.wo.weight": P((C, FF)), f + "layer_norm.weight": ones(C)})
        p[f"{side}.final_layer_norm.weight"] = ones(C)
    B, S, T = 2, 7, 5
    src = torch.randint(0, V, (B, S))
    tgt = torch.randint(0, V, (B, T))
    src_lens = torch.tensor([7, 4])
    src_add = torch.where(torch.arange(S)[None, :] >= src_lens[:, None], float("-inf"), 0.0)[:, None, None, :]

    def rms(x, n):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * p[n]

    def attn(x, kv, pre, bias):
        Tq, Tk = x.shape[1], kv.shape[1]
        q = (x @ p[pre + "q.weight"].T).reshape(B, Tq, H, DK).transpose(1, 2)
        k = (kv @ p[pre + "k.weight"].T).reshape(B, Tk, H, DK).transpose(1, 2)
        v = (kv @ p[pre + "v.weight"].T).reshape(B, Tk, H, DK).transpose(1, 2)
        o = attention(q, k, v, 1.0, bias).transpose(1, 2).reshape(B, Tq, H * DK)
        return o @ p[pre + "o.weight"].T

    def ffn(x, f):
        h = F.gelu(x @ p[f + "DenseReluDense.wi_0.weight"].T, approximate="tanh") * (x @ p[f + "DenseReluDense.wi_1.weight"].T)
        return h @ p[f + "DenseReluDense.wo.weight"].T

    def rel_bias(side, Tq, Tk, bidirectional):
        rel = torch.arange(Tk)[None, :] - torch.arange(Tq)[:, None]
        buckets = t5_bucket(rel, bidirectional, NB, MD)
        table = p[f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"]
        return table[buckets].permute(2, 0, 1)[None]

    x = p["shared.weight"][src]
    enc_bias = rel_bias("encoder", S, S, True) + src_add
    for i in range(L):
        b = f"encoder.block.{i}."
        h = rms(x, b + "layer.0.layer_norm.weight")
        x = x + attn(h, h, b + "layer.0.SelfAttention.", enc_bias)
        x = x + ffn(rms(x, b + "layer.1.layer_norm.weight"), b + "layer.1.")
    mem = rms(x, "encoder.final_layer_norm.weight")
    y = p["shared.weight"][tgt]
    dec_bias = rel_bias("decoder", T, T, False) + causal_add(T)
    for i in range(L):
        b = f"decoder.block.{i}."
        h = rms(y, b + "layer.0.layer_norm.weight")
        y = y + attn(h, h, b + "layer.0.SelfAttention.", dec_bias)
        y = y + attn(rms(y, b + "layer.1.layer_norm.weight"), mem, b + "layer.1.EncDecAttention.", src_add)
        y = y + ffn(rms(y, b + "layer.2.layer_norm.weight"), b + "layer.2.")
    y = rms(y, "decoder.final_layer_norm.weight") * C ** -0.5
    finish(out, "t5", p, {"input_ids": src, "decoder_input_ids": tgt, "valid_lens": src_lens},
           y @ p["shared.weight"].T)


def make(out):
    gpt2(out)
    llama(out)
    bert(out)
    t5(out)
