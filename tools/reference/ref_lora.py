"""LoRA (Hu et al. 2021) as Hugging Face PEFT computes it, on the generic engine reference
(ref_engine.Ref): a targeted linear layer returns
    x W^T + b + (alpha / r) * (x A^T) B^T          A (r, in), B (out, r)
(lora_dropout 0). The fixture holds an encoder-decoder model whose attention (q, v, and
cross-attention's o) and FFN down projections carry factors with a non-zero B, the inputs,
the logits, every gradient of sum(logits * w) (the base weights' and the factors'), and the
logits of the model whose weights were merged, W + (alpha / r) B A, computed here in float64."""
import json
import os

import torch

from fixtures import save
from ref_engine import Cfg, Ref, random_params

R, ALPHA = 4, 8.0
TARGETS = ("self_attn.q_proj", "self_attn.v_proj", "cross_attn.o_proj", "ffn.down_proj")


class LoraRef(Ref):
    def __init__(self, c, params, lora, scale):
        super().__init__(c, params)
        self.lora = {k: v.to(self.dt) for k, v in lora.items()}
        self.scale = scale

    def lin(self, x, name):
        y = super().lin(x, name)
        a = self.lora.get(name + ".lora_A.weight")
        if a is None:
            return y
        return y + self.scale * ((x @ a.T) @ self.lora[name + ".lora_B.weight"].T)


def make(out):
    torch.manual_seed(21)
    d = dict(architecture="encoder_decoder", vocab_size=37, d_model=24, n_heads=4, n_layers=2, n_decoder_layers=2,
             d_ff=40, norm="rms_norm", norm_placement="pre", activation="swiglu", position="sinusoidal",
             bias=True, head="lm", dropout=0.0, attention_dropout=0.0, embedding_dropout=0.0)
    c = Cfg(d)
    params = random_params(c)
    lora = {}
    for name, p in params.items():
        module = name[: -len(".weight")]
        if name.endswith(".weight") and p.dim() == 2 and module.endswith(TARGETS):
            out_f, in_f = p.shape
            lora[module + ".lora_A.weight"] = (torch.randn(R, in_f) * 0.3).requires_grad_()
            lora[module + ".lora_B.weight"] = (torch.randn(out_f, R) * 0.3).requires_grad_()
    assert len(lora) == 2 * (2 * 3 + 2 * 4), sorted(lora)  # enc: q, v, down; dec: q, v, o (cross), down
    B, S, T = 2, 7, 5
    inputs = {"input_ids": torch.randint(3, c.vocab_size, (B, S)), "valid_lens": torch.tensor([S, 4]),
              "decoder_input_ids": torch.randint(3, c.vocab_size, (B, T)), "decoder_valid_lens": torch.tensor([T, 3])}
    scale = ALPHA / R
    logits = LoraRef(c, params, lora, scale).forward(inputs).float()
    w = torch.randn_like(logits)
    (logits.double() * w.double()).sum().backward()
    with torch.no_grad():
        merged = {k: v.detach().clone() for k, v in params.items()}
        for k in lora:
            if k.endswith(".lora_A.weight"):
                m = k[: -len(".lora_A.weight")]
                delta = scale * (lora[m + ".lora_B.weight"].double() @ lora[k].double())
                merged[m + ".weight"] = (merged[m + ".weight"].double() + delta).float()
        merged_logits = Ref(c, merged).forward(inputs).float()
    t = {f"param.{k}": v for k, v in params.items()}
    t.update({f"lora.{k}": v for k, v in lora.items()})
    t.update({f"grad.{k}": v.grad for k, v in {**params, **lora}.items()})
    t.update(inputs)
    t.update({"logits": logits, "w": w, "merged_logits": merged_logits})
    meta = {"config": json.dumps({"model_type": "transformer", **d}), "r": str(R), "alpha": str(ALPHA),
            "targets": json.dumps(list(TARGETS))}
    save(os.path.join(out, "lora_engine.safetensors"), t, metadata=meta)
