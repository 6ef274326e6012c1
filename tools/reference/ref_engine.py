"""Generic reference of the engine's own model family (model_type "transformer"), written in
plain PyTorch from a config dict with the engine's config.json keys and parameters under the
engine's names (docs/design.md, src/models/param_specs.cpp). It follows the published
definitions of each component, not the engine's code paths:

  embeddings   token (x sqrt(d) option) + learned / sinusoidal / no positions + token types,
               then an optional embedding norm
  norms        LayerNorm, RMSNorm x*rsqrt(mean(x^2)+eps)*w, ScaleNorm g*x/sqrt(sum(x^2)+eps);
               post (x = norm(x + f(x))) or pre (x = x + f(norm(x))) placement; final norm
  attention    MHA / GQA / MQA (kv head h // (H/Hkv)); RoPE halves or adjacent on self-attention;
               ALiBi (Press et al. slopes, bias -slope*|i-j|); T5 relative buckets (a table per
               stack, bidirectional in the encoder); causal; sliding window (|i-j| < w; causal keeps the w most recent keys);
               key padding from valid lens; cross-attention (no positions, source padding)
  ffn          relu / gelu / gelu_tanh / silu, or gated swiglu / geglu / reglu (act(x Wg) * x Wu)
  heads        lm (tied to the token embedding or not), classifier (first token or mean over
               valid positions), masked_lm (dense -> gelu -> LayerNorm -> decoder + bias)

Computed in float64 from float32 parameters. Each fixture engine_<name>.safetensors holds the
config JSON (metadata "config"), parameters, inputs with padding, logits, a random cotangent w
and every parameter's gradient of sum(logits * w)."""
import json
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save
from ref_attention import get_slopes
from ref_position import rope_adjacent, rope_halves, t5_bucket

# ModelConfig's defaults (include/tfm/model_config.h) for the keys a fixture config leaves out.
DEFAULTS = dict(architecture="decoder_only", vocab_size=256, d_model=128, n_heads=4, n_kv_heads=0, head_dim=0,
                n_layers=2, n_decoder_layers=0, d_ff=512, max_positions=512, type_vocab_size=0,
                norm="layer_norm", norm_placement="pre", norm_eps=1e-5, final_norm=True, embedding_norm=False,
                activation="gelu", bias=True, position="learned", scale_embeddings=False, rope_base=10000.0,
                rope_pairing="halves", relative_buckets=32, relative_max_distance=128, sliding_window=0,
                scale_attention_scores=True, dropout=0.0, attention_dropout=0.0, embedding_dropout=0.0,
                tie_embeddings=True, head="lm", num_labels=2, pooling="first")

GATED = ("swiglu", "geglu", "reglu")


class Cfg:
    def __init__(self, d):
        self.json = dict(d)
        for k, v in {**DEFAULTS, **d}.items():
            setattr(self, k, v)
        self.kv = self.n_kv_heads or self.n_heads
        self.dh = self.head_dim or self.d_model // self.n_heads
        self.dec_layers = self.n_decoder_layers or self.n_layers


# ---- parameter names and shapes (docs/design.md) -------------------------------------------
def specs(c):
    s = []

    def linear(name, out, inp, bias):
        s.append((name + ".weight", (out, inp)))
        if bias:
            s.append((name + ".bias", (out,)))

    def norm(name):
        if c.norm == "scale_norm":
            s.append((name + ".weight", (1,)))
            return
        s.append((name + ".weight", (c.d_model,)))
        if c.norm == "layer_norm":
            s.append((name + ".bias", (c.d_model,)))

    def attention(p):
        q, kv = c.n_heads * c.dh, c.kv * c.dh
        linear(p + "q_proj", q, c.d_model, c.bias)
        linear(p + "k_proj", kv, c.d_model, c.bias)
        linear(p + "v_proj", kv, c.d_model, c.bias)
        linear(p + "o_proj", c.d_model, q, c.bias)

    def stack(name, layers, cross):
        if c.position == "t5_relative":
            s.append((name + ".relative_attention_bias.weight", (c.relative_buckets, c.n_heads)))
        for i in range(layers):
            p = f"{name}.layers.{i}."
            norm(p + "self_attn_norm")
            attention(p + "self_attn.")
            if cross:
                norm(p + "cross_attn_norm")
                attention(p + "cross_attn.")
            norm(p + "ffn_norm")
            if c.activation in GATED:
                linear(p + "ffn.gate_proj", c.d_ff, c.d_model, c.bias)
            linear(p + "ffn.up_proj", c.d_ff, c.d_model, c.bias)
            linear(p + "ffn.down_proj", c.d_model, c.d_ff, c.bias)
        if c.final_norm:
            norm(name + ".norm")

    s.append(("embed_tokens.weight", (c.vocab_size, c.d_model)))
    if c.position == "learned":
        s.append(("embed_positions.weight", (c.max_positions, c.d_model)))
    if c.type_vocab_size > 0:
        s.append(("embed_token_types.weight", (c.type_vocab_size, c.d_model)))
    if c.embedding_norm:
        norm("embed_norm")
    if c.architecture == "decoder_only":
        stack("decoder", c.n_layers, False)
    else:
        stack("encoder", c.n_layers, False)
    if c.architecture == "encoder_decoder":
        stack("decoder", c.dec_layers, True)
    if c.head == "lm" and not c.tie_embeddings:
        s.append(("lm_head.weight", (c.vocab_size, c.d_model)))
    if c.head == "classifier":
        linear("classifier", c.num_labels, c.d_model, True)
    if c.head == "masked_lm":
        linear("mlm_head.dense", c.d_model, c.d_model, True)
        s.append(("mlm_head.norm.weight", (c.d_model,)))
        s.append(("mlm_head.norm.bias", (c.d_model,)))
        if not c.tie_embeddings:
            s.append(("mlm_head.decoder.weight", (c.vocab_size, c.d_model)))
        s.append(("mlm_head.bias", (c.vocab_size,)))
    return s


def random_params(c, spec_list=None):
    """Random values away from the init conventions, so every scale and bias matters."""
    p = {}
    for name, shape in spec_list if spec_list is not None else specs(c):
        is_norm = "norm" in name
        if is_norm and c.norm == "scale_norm" and shape == (1,):
            t = math.sqrt(c.d_model) * (1.0 + 0.1 * torch.randn(shape))
        elif is_norm and name.endswith(".weight"):
            t = 1.0 + 0.1 * torch.randn(shape)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape)
        elif len(shape) == 2 and "embed" not in name and "relative" not in name:
            t = torch.randn(shape) / math.sqrt(shape[1])
            if name.endswith("q_proj.weight") and not c.scale_attention_scores:
                t = t / math.sqrt(c.dh)  # unscaled scores: fold 1/sqrt(Dh) into q, as T5's init does
        else:
            t = torch.randn(shape) * 0.3
        p[name] = t.float().requires_grad_()
    return p


# ---- the forward pass ----------------------------------------------------------------------
def sinusoidal(T, D, base=10000.0, start=0):  # Vaswani et al. section 3.5
    pos = torch.arange(start, start + T, dtype=torch.float64)[:, None]
    div = base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    P = torch.zeros(T, D, dtype=torch.float64)
    P[:, 0::2] = torch.sin(pos / div)
    P[:, 1::2] = torch.cos(pos / div)
    return P


class Ref:
    def __init__(self, c, params, dtype=torch.float64):
        self.c = c
        self.dt = dtype
        self.p = {k: v.to(dtype) for k, v in params.items()}  # float64 copies; grads reach the leaves

    def lin(self, x, name):
        y = x @ self.p[name + ".weight"].T
        b = self.p.get(name + ".bias")
        return y if b is None else y + b

    def norm(self, x, name):
        c, w = self.c, self.p[name + ".weight"]
        if c.norm == "layer_norm":
            return F.layer_norm(x, (c.d_model,), w, self.p[name + ".bias"], c.norm_eps)
        if c.norm == "rms_norm":
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + c.norm_eps) * w
        return w * x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + c.norm_eps)  # ScaleNorm

    def embed(self, ids, types=None, offset=0):
        c = self.c
        B, T = ids.shape
        x = self.p["embed_tokens.weight"][ids]
        if c.scale_embeddings:
            x = x * math.sqrt(c.d_model)
        if c.position == "learned":
            x = x + self.p["embed_positions.weight"][offset:offset + T]
        elif c.position == "sinusoidal":
            x = x + sinusoidal(T, c.d_model, start=offset).to(self.dt)
        if c.type_vocab_size > 0:
            x = x + self.p["embed_token_types.weight"][types if types is not None else torch.zeros_like(ids)]
        if c.embedding_norm:
            x = self.norm(x, "embed_norm")
        return x

    def attention(self, xq, xkv, pre, stack, causal, lens, self_attn, offset=0):
        c = self.c
        B, Tq, _ = xq.shape
        Tk = xkv.shape[1]
        H, KV, D = c.n_heads, c.kv, c.dh
        q = self.lin(xq, pre + "q_proj").reshape(B, Tq, H, D).transpose(1, 2)
        k = self.lin(xkv, pre + "k_proj").reshape(B, Tk, KV, D).transpose(1, 2)
        v = self.lin(xkv, pre + "v_proj").reshape(B, Tk, KV, D).transpose(1, 2)
        if self_attn and c.position == "rope":
            fn = rope_halves if c.rope_pairing == "halves" else rope_adjacent
            q, k = fn(q, torch.arange(Tq) + offset, c.rope_base), fn(k, torch.arange(Tk) + offset, c.rope_base)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        s = q @ k.transpose(-1, -2)
        if c.scale_attention_scores:
            s = s / math.sqrt(D)
        i = torch.arange(Tq)[:, None] + (Tk - Tq)
        j = torch.arange(Tk)[None, :]
        allowed = torch.ones(B, 1, Tq, Tk, dtype=torch.bool)
        if causal:
            allowed = allowed & (j <= i)
        if self_attn and c.sliding_window:
            allowed = allowed & (j > i - c.sliding_window) & (j < i + c.sliding_window)
        if lens is not None:
            allowed = allowed & (j[None] < lens[:, None, None])[:, None]
        if self_attn and c.position == "t5_relative":
            buckets = t5_bucket(j - i, not causal, c.relative_buckets, c.relative_max_distance)
            s = s + self.p[stack + ".relative_attention_bias.weight"][buckets].permute(2, 0, 1)[None]
        if self_attn and c.position == "alibi":
            slopes = torch.tensor(get_slopes(H), dtype=self.dt)
            s = s - slopes[None, :, None, None] * (i - j).abs().to(self.dt)
        row_any = allowed.any(-1, keepdim=True)  # a query that sees no key outputs zeros
        s = torch.where(row_any, s.masked_fill(~allowed, float("-inf")), torch.zeros_like(s))
        a = (torch.softmax(s, -1) * row_any) @ v
        return self.lin(a.transpose(1, 2).reshape(B, Tq, H * D), pre + "o_proj")

    def ffn(self, x, pre):
        act = self.c.activation
        if act in GATED:
            g = self.lin(x, pre + "gate_proj")
            g = {"swiglu": F.silu, "geglu": F.gelu, "reglu": F.relu}[act](g)
            h = g * self.lin(x, pre + "up_proj")
        else:
            u = self.lin(x, pre + "up_proj")
            h = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
                 "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[act](u)
        return self.lin(h, pre + "down_proj")

    def stack(self, x, name, layers, causal, lens, memory=None, mem_lens=None, offset=0):
        c = self.c

        def sub(x, norm, f):
            if c.norm_placement == "pre":
                return x + f(self.norm(x, norm))
            return self.norm(x + f(x), norm)

        for i in range(layers):
            p = f"{name}.layers.{i}."
            x = sub(x, p + "self_attn_norm", lambda h: self.attention(h, h, p + "self_attn.", name, causal, lens, True, offset))
            if memory is not None:
                x = sub(x, p + "cross_attn_norm",
                        lambda h: self.attention(h, memory, p + "cross_attn.", name, False, mem_lens, False))
            x = sub(x, p + "ffn_norm", lambda h: self.ffn(h, p + "ffn."))
        return self.norm(x, name + ".norm") if c.final_norm else x

    def head(self, h, lens):
        c = self.c
        E = self.p["embed_tokens.weight"]
        if c.head == "lm":
            return h @ (E if c.tie_embeddings else self.p["lm_head.weight"]).T
        if c.head == "masked_lm":
            t = F.layer_norm(F.gelu(self.lin(h, "mlm_head.dense")), (c.d_model,), self.p["mlm_head.norm.weight"],
                             self.p["mlm_head.norm.bias"], c.norm_eps)
            dec = E if c.tie_embeddings else self.p["mlm_head.decoder.weight"]
            return t @ dec.T + self.p["mlm_head.bias"]
        if c.pooling == "first":
            pooled = h[:, 0]
        else:
            T = h.shape[1]
            n = lens.clamp(1, T) if lens is not None else torch.full((h.shape[0],), T)
            mask = (torch.arange(T)[None, :] < n[:, None]).to(self.dt)[..., None]
            pooled = (h * mask).sum(1) / n[:, None].to(self.dt)
        return self.lin(pooled, "classifier")

    def forward(self, inp):
        c = self.c
        if c.architecture == "decoder_only":
            off = int(inp.get("position_offset", torch.tensor(0)))  # positions off .. off+T-1, no cache
            h = self.stack(self.embed(inp["input_ids"], offset=off), "decoder", c.n_layers, True, inp.get("valid_lens"),
                           offset=off)
            return self.head(h, inp.get("valid_lens"))
        enc = self.stack(self.embed(inp["input_ids"], inp.get("token_type_ids")), "encoder", c.n_layers, False,
                         inp.get("valid_lens"))
        if c.architecture == "encoder_only":
            return self.head(enc, inp.get("valid_lens"))
        h = self.stack(self.embed(inp["decoder_input_ids"]), "decoder", c.dec_layers, True,
                       inp.get("decoder_valid_lens"), enc, inp.get("valid_lens"))
        return self.head(h, inp.get("decoder_valid_lens"))


# ---- fixtures ------------------------------------------------------------------------------
NO_DROPOUT = {"dropout": 0.0, "attention_dropout": 0.0, "embedding_dropout": 0.0}

CONFIGS = {
    # ScaleNorm pre-norm, ALiBi with 6 heads (interleaved slopes), sliding window, ReGLU, tied lm.
    "dec_scale_alibi_window_reglu": dict(
        architecture="decoder_only", vocab_size=29, d_model=24, n_heads=6, n_layers=2, d_ff=40, norm="scale_norm",
        norm_placement="pre", activation="reglu", position="alibi", sliding_window=3, head="lm"),
    # Sinusoidal positions starting at position_offset 4 (a continuation without a cache), RMSNorm
    # post-norm, gelu, biases, tied lm.
    "dec_sinusoidal_offset_rms_post": dict(
        architecture="decoder_only", vocab_size=27, d_model=16, n_heads=2, n_layers=2, d_ff=32, norm="rms_norm",
        norm_placement="post", activation="gelu", position="sinusoidal", head="lm"),
    # RoPE adjacent pairs, multi-query, GEGLU (erf GELU), scaled embeddings, untied lm, LN pre.
    "dec_rope_adjacent_mqa_geglu_untied": dict(
        architecture="decoder_only", vocab_size=31, d_model=32, n_heads=4, n_kv_heads=1, n_layers=2, d_ff=48,
        norm="layer_norm", norm_placement="pre", activation="geglu", position="rope", rope_pairing="adjacent",
        rope_base=500.0, scale_embeddings=True, tie_embeddings=False, head="lm"),
    # RMSNorm post-norm, learned positions, token types, RMS embedding norm, gelu_tanh,
    # mean-pooled classifier, no final norm.
    "enc_rms_post_learned_types_meanpool": dict(
        architecture="encoder_only", vocab_size=27, d_model=16, n_heads=2, n_layers=2, d_ff=24, max_positions=12,
        type_vocab_size=3, norm="rms_norm", norm_placement="post", norm_eps=1e-6, final_norm=False,
        embedding_norm=True, activation="gelu_tanh", position="learned", head="classifier", num_labels=3,
        pooling="mean"),
    # Sinusoidal positions x sqrt(d) embeddings, LN pre-norm + LN embedding norm, GELU, tied masked_lm.
    "enc_mlm_sinusoidal_tied": dict(
        architecture="encoder_only", vocab_size=25, d_model=16, n_heads=4, n_layers=2, d_ff=32, norm="layer_norm",
        norm_placement="pre", embedding_norm=True, activation="gelu", position="sinusoidal", scale_embeddings=True,
        head="masked_lm", tie_embeddings=True),
    # ScaleNorm post-norm, no positions, ReLU, first-token classifier, no biases.
    "enc_scale_post_nopos_relu_first": dict(
        architecture="encoder_only", vocab_size=23, d_model=16, n_heads=4, n_layers=2, d_ff=24, norm="scale_norm",
        norm_placement="post", activation="relu", position="none", bias=False, head="classifier", num_labels=4,
        pooling="first"),
    # Bidirectional ALiBi + window in an encoder, ScaleNorm embedding norm, untied masked_lm, silu.
    "enc_alibi_window_mlm_untied": dict(
        architecture="encoder_only", vocab_size=21, d_model=16, n_heads=4, n_layers=1, d_ff=24, norm="scale_norm",
        norm_placement="pre", embedding_norm=True, activation="silu", position="alibi", sliding_window=4,
        head="masked_lm", tie_embeddings=False),
    # Encoder-decoder, pre-RMSNorm, T5 relative buckets, SwiGLU, GQA 4/2, no score scaling,
    # no biases, 2 encoder / 1 decoder layers, tied lm.
    "encdec_pre_t5rel_swiglu_gqa": dict(
        architecture="encoder_decoder", vocab_size=33, d_model=16, n_heads=4, n_kv_heads=2, n_layers=2,
        n_decoder_layers=1, d_ff=24, norm="rms_norm", norm_placement="pre", activation="swiglu",
        position="t5_relative", relative_buckets=8, relative_max_distance=20, scale_attention_scores=False,
        bias=False, head="lm"),
    # Encoder-decoder, post-LN, RoPE halves on self-attention, SiLU, head_dim 6 != d_model/H,
    # no biases, untied lm, no final norm.
    "encdec_post_rope_halves_silu_nobias": dict(
        architecture="encoder_decoder", vocab_size=26, d_model=16, n_heads=4, head_dim=6, n_layers=2, d_ff=20,
        norm="layer_norm", norm_placement="post", final_norm=False, activation="silu", position="rope",
        rope_pairing="halves", bias=False, tie_embeddings=False, head="lm"),
}


def make_one(out, name, d, seed):
    torch.manual_seed(seed)
    d = {"model_type": "transformer", **d, **NO_DROPOUT}
    c = Cfg({k: v for k, v in d.items() if k != "model_type"})
    params = random_params(c)
    B, S, T = 3, 9, 7

    def ids(n, lens):
        x = torch.randint(3, c.vocab_size, (B, n))
        return x.masked_fill(torch.arange(n)[None, :] >= lens[:, None], 0)  # pad_token_id

    inputs = {}
    if c.architecture == "decoder_only":
        inputs["valid_lens"] = torch.tensor([S, 6, 2])
        inputs["input_ids"] = ids(S, inputs["valid_lens"])
        if c.position == "sinusoidal":
            inputs["position_offset"] = torch.tensor(4)
    else:
        inputs["valid_lens"] = torch.tensor([S, 5, 3])
        inputs["input_ids"] = ids(S, inputs["valid_lens"])
        if c.type_vocab_size > 0:
            inputs["token_type_ids"] = torch.randint(0, c.type_vocab_size, (B, S))
        if c.architecture == "encoder_decoder":
            inputs["decoder_valid_lens"] = torch.tensor([4, T, 2])
            inputs["decoder_input_ids"] = ids(T, inputs["decoder_valid_lens"])
    logits = Ref(c, params).forward(inputs).float()
    w = torch.randn_like(logits)
    (logits.double() * w.double()).sum().backward()
    t = {f"param.{k}": v for k, v in params.items()}
    t.update({f"grad.{k}": v.grad for k, v in params.items()})
    t.update(inputs)
    t.update({"logits": logits, "w": w})
    save(os.path.join(out, f"engine_{name}.safetensors"), t, metadata={"config": json.dumps(d)})


def check_against_torch_transformer():
    """The reference itself, on the vaswani layout, against torch.nn.Transformer (post and pre)."""
    import torch.nn as nn
    from ref_models import C, engine_names  # engine_names splits in_proj by its module C
    for norm_first in (False, True):
        torch.manual_seed(7)
        V, H, FF, L = 19, 4, 24, 2
        model = nn.Transformer(d_model=C, nhead=H, num_encoder_layers=L, num_decoder_layers=L,
                               dim_feedforward=FF, dropout=0.0, batch_first=True, norm_first=norm_first).double()
        model.encoder.enable_nested_tensor = False
        emb = nn.Embedding(V, C).double()
        src, tgt = torch.randint(0, V, (2, 6)), torch.randint(0, V, (2, 5))
        src_lens, tgt_lens = torch.tensor([6, 3]), torch.tensor([5, 2])
        pe = sinusoidal(6, C)
        src_pad = torch.arange(6)[None, :] >= src_lens[:, None]
        tgt_pad = torch.arange(5)[None, :] >= tgt_lens[:, None]
        mem = model.encoder(emb(src) * math.sqrt(C) + pe[:6], src_key_padding_mask=src_pad)
        dec = model.decoder(emb(tgt) * math.sqrt(C) + pe[:5], mem, tgt_mask=model.generate_square_subsequent_mask(5).double(),
                            tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
        want = dec @ emb.weight.T
        c = Cfg(dict(architecture="encoder_decoder", vocab_size=V, d_model=C, n_heads=H, n_layers=L, d_ff=FF,
                     norm_placement="pre" if norm_first else "post", activation="relu", position="sinusoidal",
                     scale_embeddings=True))
        got = Ref(c, {k: v.detach() for k, v in engine_names(model, emb).items()}).forward(
            {"input_ids": src, "valid_lens": src_lens, "decoder_input_ids": tgt, "decoder_valid_lens": tgt_lens})
        # nn.Transformer's padded query rows may differ only where every key is masked: none here.
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-9), (norm_first, (got - want).abs().max())


def make(out):
    check_against_torch_transformer()
    for i, (name, d) in enumerate(sorted(CONFIGS.items())):
        make_one(out, name, d, 100 + i)
