"""Bottleneck adapters and prefix tuning on the generic engine reference (ref_engine.Ref),
written from the papers' definitions:

  bottleneck (Houlsby et al. 2019)  a(h) = h + W_up f(W_down h + b_down) + b_up on a sublayer's
      output before the residual sum: pre-norm x + a(f(norm(x))), post-norm norm(x + a(f(x))).
      Houlsby: after self-attention and after the FFN of every layer; Pfeiffer: after the FFN
      only; cross-attention never. Names <layer>attention_adapter.* / <layer>output_adapter.*.
  prefix tuning (Li & Liang 2021, PEFT's PREFIX_TUNING)  a table (P, L*2*Hkv*Dh) whose row p is
      [layer 0 keys | layer 0 values | layer 1 keys | ...] (heads major), layers counted
      encoder first, then decoder; optionally produced by PEFT's reparameterisation
      tanh(E W0^T + b0) W2^T + b2 from E (P, C). Each self-attention prepends its P keys/values
      to every row: no RoPE on them, never padding, visible to every query (causal included);
      ALiBi and T5 buckets see them at the P positions before the first token (queries are
      end-aligned, i = t + P). Tokens keep their positions 0..T-1.

Each fixture peft_<name>.safetensors holds the config, base parameters (param.*), adapter
tensors (adapter.*), inputs with padding, logits, a cotangent w and every gradient (base and
adapter) of sum(logits * w), in float64 from float32 values."""
import json
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save
from ref_attention import get_slopes
from ref_engine import NO_DROPOUT, Cfg, Ref, random_params
from ref_position import rope_adjacent, rope_halves, t5_bucket


class PeftRef(Ref):
    def __init__(self, c, params, adapter, placement=None, act="relu", prefix_projection=False):
        super().__init__(c, params)
        self.a = {k: v.to(self.dt) for k, v in adapter.items()}
        self.placement, self.act = placement, act
        self.prefix = None
        if "prompt_encoder.embedding.weight" in self.a:
            e = self.a["prompt_encoder.embedding.weight"]
            if prefix_projection:
                h = torch.tanh(e @ self.a["prompt_encoder.transform.0.weight"].T + self.a["prompt_encoder.transform.0.bias"])
                e = h @ self.a["prompt_encoder.transform.2.weight"].T + self.a["prompt_encoder.transform.2.bias"]
            self.prefix = e  # (P, L*2*kv)

    # ---- bottleneck ----
    def adapter(self, h, name):
        if name + ".adapter_down.weight" not in self.a:
            return h
        z = h @ self.a[name + ".adapter_down.weight"].T + self.a[name + ".adapter_down.bias"]
        z = {"relu": F.relu, "gelu": F.gelu, "swish": F.silu}[self.act](z)
        return h + z @ self.a[name + ".adapter_up.weight"].T + self.a[name + ".adapter_up.bias"]

    def stack(self, x, name, layers, causal, lens, memory=None, mem_lens=None, offset=0):
        c = self.c

        def sub(x, norm, f, ad):
            if c.norm_placement == "pre":
                return x + self.adapter(f(self.norm(x, norm)), ad)
            return self.norm(x + self.adapter(f(x), ad), norm)

        for i in range(layers):
            p = f"{name}.layers.{i}."
            x = sub(x, p + "self_attn_norm",
                    lambda h: self.attention(h, h, p + "self_attn.", name, causal, lens, True, offset),
                    p + "attention_adapter")
            if memory is not None:
                x = sub(x, p + "cross_attn_norm",
                        lambda h: self.attention(h, memory, p + "cross_attn.", name, False, mem_lens, False), "none")
            x = sub(x, p + "ffn_norm", lambda h: self.ffn(h, p + "ffn."), p + "output_adapter")
        return self.norm(x, name + ".norm") if c.final_norm else x

    # ---- prefix ----
    def layer_index(self, pre, stack):
        i = int(pre.split(".")[2])
        return i + (self.c.n_layers if stack == "decoder" and self.c.architecture == "encoder_decoder" else 0)

    def attention(self, xq, xkv, pre, stack, causal, lens, self_attn, offset=0):
        if self.prefix is None or not self_attn:
            return super().attention(xq, xkv, pre, stack, causal, lens, self_attn, offset)
        c = self.c
        B, T, _ = xq.shape
        H, KV, D = c.n_heads, c.kv, c.dh
        P = self.prefix.shape[0]
        q = self.lin(xq, pre + "q_proj").reshape(B, T, H, D).transpose(1, 2)
        k = self.lin(xkv, pre + "k_proj").reshape(B, T, KV, D).transpose(1, 2)
        v = self.lin(xkv, pre + "v_proj").reshape(B, T, KV, D).transpose(1, 2)
        if c.position == "rope":
            fn = rope_halves if c.rope_pairing == "halves" else rope_adjacent
            q, k = fn(q, torch.arange(T) + offset, c.rope_base), fn(k, torch.arange(T) + offset, c.rope_base)
        l, kvd = self.layer_index(pre, stack), KV * D
        pk = self.prefix[:, 2 * l * kvd:(2 * l + 1) * kvd].reshape(P, KV, D).transpose(0, 1)  # (KV, P, D)
        pv = self.prefix[:, (2 * l + 1) * kvd:(2 * l + 2) * kvd].reshape(P, KV, D).transpose(0, 1)
        k = torch.cat([pk[None].expand(B, -1, -1, -1), k], 2)
        v = torch.cat([pv[None].expand(B, -1, -1, -1), v], 2)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        s = q @ k.transpose(-1, -2)
        if c.scale_attention_scores:
            s = s / math.sqrt(D)
        i = torch.arange(T)[:, None] + P  # queries after the prefix
        j = torch.arange(P + T)[None, :]
        allowed = torch.ones(B, 1, T, P + T, dtype=torch.bool)
        if causal:
            allowed = allowed & (j <= i)
        if lens is not None:
            allowed = allowed & (j[None] < (lens + P)[:, None, None])[:, None]
        if c.position == "t5_relative":
            buckets = t5_bucket(j - i, not causal, c.relative_buckets, c.relative_max_distance)
            s = s + self.p[stack + ".relative_attention_bias.weight"][buckets].permute(2, 0, 1)[None]
        if c.position == "alibi":
            slopes = torch.tensor(get_slopes(H), dtype=self.dt)
            s = s - slopes[None, :, None, None] * (i - j).abs().to(self.dt)
        s = s.masked_fill(~allowed, float("-inf"))
        a = torch.softmax(s, -1) @ v
        return self.lin(a.transpose(1, 2).reshape(B, T, H * D), pre + "o_proj")


def bottleneck_tensors(c, placement, m):
    t = {}
    stacks = {"decoder_only": [("decoder", c.n_layers)], "encoder_only": [("encoder", c.n_layers)],
              "encoder_decoder": [("encoder", c.n_layers), ("decoder", c.dec_layers)]}[c.architecture]
    for name, n in stacks:
        for i in range(n):
            for where in ("attention_adapter", "output_adapter"):
                if placement == "pfeiffer" and where == "attention_adapter":
                    continue
                p = f"{name}.layers.{i}.{where}."
                # Non-zero up-projections (a trained adapter), so every tensor matters.
                t[p + "adapter_down.weight"] = torch.randn(m, c.d_model) / math.sqrt(c.d_model)
                t[p + "adapter_down.bias"] = 0.1 * torch.randn(m)
                t[p + "adapter_up.weight"] = torch.randn(c.d_model, m) / math.sqrt(m)
                t[p + "adapter_up.bias"] = 0.1 * torch.randn(c.d_model)
    return t


def prefix_tensors(c, P, projection, hidden):
    layers = c.n_layers + (c.dec_layers if c.architecture == "encoder_decoder" else 0)
    W = layers * 2 * c.kv * c.dh
    if not projection:
        return {"prompt_encoder.embedding.weight": torch.randn(P, W) * 0.5}
    return {"prompt_encoder.embedding.weight": torch.randn(P, c.d_model),
            "prompt_encoder.transform.0.weight": torch.randn(hidden, c.d_model) / math.sqrt(c.d_model),
            "prompt_encoder.transform.0.bias": 0.1 * torch.randn(hidden),
            "prompt_encoder.transform.2.weight": torch.randn(W, hidden) / math.sqrt(hidden),
            "prompt_encoder.transform.2.bias": 0.1 * torch.randn(W)}


CASES = {
    # BERT-like post-LN encoder, Houlsby with GELU, mean-pooled classifier.
    "bottleneck_houlsby_enc_post": (dict(architecture="encoder_only", vocab_size=23, d_model=16, n_heads=4, n_layers=2,
                                         d_ff=24, norm_placement="post", activation="gelu", position="learned",
                                         head="classifier", num_labels=3, pooling="mean"),
                                    dict(kind="bottleneck", placement="houlsby", act="gelu", m=4)),
    # Encoder-decoder pre-RMSNorm, Pfeiffer with ReLU (cross-attention untouched).
    "bottleneck_pfeiffer_encdec_pre": (dict(architecture="encoder_decoder", vocab_size=29, d_model=16, n_heads=2,
                                            n_layers=2, n_decoder_layers=1, d_ff=24, norm="rms_norm",
                                            norm_placement="pre", activation="swiglu", position="sinusoidal",
                                            head="lm"),
                                       dict(kind="bottleneck", placement="pfeiffer", act="relu", m=6)),
    # Decoder, RoPE + GQA, padding, the reparameterisation MLP.
    "prefix_dec_rope_gqa_projection": (dict(architecture="decoder_only", vocab_size=31, d_model=32, n_heads=4,
                                            n_kv_heads=2, n_layers=2, d_ff=48, position="rope", head="lm"),
                                       dict(kind="prefix", P=3, projection=True, hidden=12)),
    # Decoder, ALiBi, learned table.
    "prefix_dec_alibi": (dict(architecture="decoder_only", vocab_size=27, d_model=16, n_heads=4, n_layers=2, d_ff=32,
                              position="alibi", norm_placement="post", head="lm"),
                         dict(kind="prefix", P=2, projection=False)),
    # Encoder-decoder, T5 relative buckets in both stacks, padding on both sides.
    "prefix_encdec_t5rel": (dict(architecture="encoder_decoder", vocab_size=33, d_model=16, n_heads=4, n_layers=2,
                                 n_decoder_layers=1, d_ff=24, norm="rms_norm", position="t5_relative",
                                 relative_buckets=8, relative_max_distance=20, bias=False, head="lm"),
                            dict(kind="prefix", P=4, projection=False)),
}


def make(out):
    for n, (name, (d, a)) in enumerate(CASES.items()):
        torch.manual_seed(100 + n)
        d = {"model_type": "transformer", **d, **NO_DROPOUT}
        c = Cfg({k: v for k, v in d.items() if k != "model_type"})
        params = random_params(c)
        if a["kind"] == "bottleneck":
            adapter = bottleneck_tensors(c, a["placement"], a["m"])
            ref_args = dict(placement=a["placement"], act=a["act"])
        else:
            adapter = prefix_tensors(c, a["P"], a["projection"], a.get("hidden", 0))
            ref_args = dict(prefix_projection=a["projection"])
        adapter = {k: v.float().requires_grad_() for k, v in adapter.items()}
        B, S, T = 3, 7, 5

        def ids(n_, lens):
            x = torch.randint(3, c.vocab_size, (B, n_))
            return x.masked_fill(torch.arange(n_)[None, :] >= lens[:, None], 0)

        inputs = {"valid_lens": torch.tensor([S, 5, 2])}
        inputs["input_ids"] = ids(S, inputs["valid_lens"])
        if c.architecture == "encoder_decoder":
            inputs["decoder_valid_lens"] = torch.tensor([3, T, 2])
            inputs["decoder_input_ids"] = ids(T, inputs["decoder_valid_lens"])
        logits = PeftRef(c, params, adapter, **ref_args).forward(inputs).float()
        w = torch.randn_like(logits)
        (logits.double() * w.double()).sum().backward()
        t = {f"param.{k}": v for k, v in params.items()}
        t.update({f"adapter.{k}": v for k, v in adapter.items()})
        t.update({f"grad.{k}": v.grad for k, v in {**params, **adapter}.items()})
        t.update(inputs)
        t.update({"logits": logits, "w": w})
        meta = {"config": json.dumps(d), "adapter": json.dumps(a)}
        save(os.path.join(out, f"peft_{name}.safetensors"), t, metadata=meta)
