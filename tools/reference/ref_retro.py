"""Reference of RETRO's chunked cross-attention (Borgeaud et al. 2022, section 2.4) in a
decoder-only model of the engine's family (model_type "retro"), in plain PyTorch from the
definition, a chunk at a time:

  the sequence is cut into chunks of m tokens (the last may be shorter); the k neighbours of
  chunk u (r tokens each) are encoded by the retrieval encoder (a bidirectional stack
  "retriever" over the shared token embedding and positions, each neighbour alone); in each
  layer listed in retrieval.layers, after self-attention, the positions of chunk u + 1 attend
  to all k * r encoded tokens of chunk u's neighbours (one softmax, no mask, no positions;
  multi-head attention with the layer's cca.{q,k,v,o}_proj), under the layer's norm placement
  (cca_norm); the positions of chunk 0 add nothing.

The rest of the model is ref_engine.Ref. Each fixture retro_<name>.safetensors holds the config
(metadata "config"), parameters, input_ids, neighbours (B, L, k, r), logits, a cotangent w and
every parameter's gradient of sum(logits * w), in float64 from float32 parameters."""
import json
import os

import torch

from fixtures import save
from ref_engine import Cfg, Ref, random_params, specs, NO_DROPOUT


def retro_specs(c, rc):
    s = specs(c)
    decoder = dict(s)
    for i in rc["layers"]:
        p = f"decoder.layers.{i}."
        for name, shape in list(s):
            if name.startswith(p + "self_attn"):
                s.append((p + name[len(p):].replace("self_attn", "cca", 1), shape))
    enc = Cfg({**c.json, "architecture": "encoder_only", "n_layers": rc["encoder_layers"], "head": "none"})
    s += [("retriever." + n[len("encoder."):], shape) for n, shape in specs(enc) if n.startswith("encoder.")]
    assert len(dict(s)) == len(s) and all(k in dict(s) for k in decoder)
    return s


class RetroRef(Ref):
    def __init__(self, c, rc, params):
        super().__init__(c, params)
        self.rc = rc

    def cca(self, h, encoded, pre):
        m = self.rc["chunk_size"]
        B, T, C = h.shape
        parts = [torch.zeros(B, min(m, T), C, dtype=self.dt)]
        for u in range(1, (T + m - 1) // m):
            q = h[:, u * m:(u + 1) * m]
            parts.append(self.attention(q, encoded[:, u - 1], pre, None, False, None, False))
        return torch.cat(parts, 1)

    def forward(self, ids, neighbours):
        c, rc = self.c, self.rc
        B, L, k, r = neighbours.shape
        flat = neighbours.reshape(B * L * k, r)
        enc = self.stack(self.embed(flat), "retriever", rc["encoder_layers"], False, None)
        encoded = enc.reshape(B, L, k * r, c.d_model)

        def sub(x, norm, f):
            if c.norm_placement == "pre":
                return x + f(self.norm(x, norm))
            return self.norm(x + f(x), norm)

        x = self.embed(ids)
        for i in range(c.n_layers):
            p = f"decoder.layers.{i}."
            x = sub(x, p + "self_attn_norm", lambda h: self.attention(h, h, p + "self_attn.", "decoder", True, None, True))
            if i in rc["layers"]:
                x = sub(x, p + "cca_norm", lambda h: self.cca(h, encoded, p + "cca."))
            x = sub(x, p + "ffn_norm", lambda h: self.ffn(h, p + "ffn."))
        if c.final_norm:
            x = self.norm(x, "decoder.norm")
        return self.head(x, None)


CONFIGS = {
    # Pre-LN, learned positions, GQA 4/2, GELU; chunks of 3 over 8 tokens (the last chunk short),
    # 2 neighbours of 4 tokens, chunked cross-attention in layers 0 and 2 of 3, a 1-layer encoder;
    # the inputs carry one chunk's neighbours more than the model reads.
    "pre_learned_gqa_short_last_chunk": (
        dict(vocab_size=23, d_model=16, n_heads=4, n_kv_heads=2, n_layers=3, d_ff=24, max_positions=10,
             norm="layer_norm", norm_placement="pre", activation="gelu", position="learned"),
        dict(chunk_size=3, neighbours=2, neighbour_length=4, layers=[0, 2], encoder_layers=1), 8, 3),
    # Post-RMSNorm, RoPE (the encoder's neighbours get positions 0..r-1), SwiGLU, no biases, untied
    # head; 9 tokens in whole chunks of 3, 3 neighbours of 6, layer 1 of 2, a 2-layer encoder.
    "post_rms_rope_swiglu_untied": (
        dict(vocab_size=19, d_model=16, n_heads=2, n_layers=2, d_ff=20, norm="rms_norm", norm_placement="post",
             activation="swiglu", position="rope", bias=False, tie_embeddings=False),
        dict(chunk_size=3, neighbours=3, neighbour_length=6, layers=[1], encoder_layers=2), 9, 2),
}


def make(out):
    for seed, (name, (d, rc, T, L)) in enumerate(sorted(CONFIGS.items())):
        torch.manual_seed(300 + seed)
        d = {**d, **NO_DROPOUT, "architecture": "decoder_only", "head": "lm"}
        c = Cfg(d)
        rc = {"max_ngram": 3, "embedding_dim": 64, **rc}
        params = random_params(c, retro_specs(c, rc))
        B = 2
        ids = torch.randint(3, c.vocab_size, (B, T))
        neighbours = torch.randint(3, c.vocab_size, (B, L, rc["neighbours"], rc["neighbour_length"]))
        logits = RetroRef(c, rc, params).forward(ids, neighbours).float()
        w = torch.randn_like(logits)
        (logits.double() * w.double()).sum().backward()
        t = {f"param.{k}": v for k, v in params.items()}
        t.update({f"grad.{k}": v.grad for k, v in params.items()})
        t.update({"input_ids": ids, "neighbours": neighbours, "logits": logits, "w": w})
        config = {"model_type": "retro", **d, "retrieval": rc}
        save(os.path.join(out, f"retro_{name}.safetensors"), t, metadata={"config": json.dumps(config)})
