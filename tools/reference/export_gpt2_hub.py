"""Write a trained tfm decoder that has GPT-2's shape as a Hugging Face GPT2LMHeadModel directory
(config.json + model.safetensors in transformers' names, Conv1D weights stored (in, out), the
fused c_attn = [Wq; Wk; Wv] transposed; tokenizer.json copied), so the hub-layout GPT-2 path can
be measured with a trained model (docs/results.md, "Hub-layout GPT-2"). GPT-2's shape: decoder
only, pre-norm LayerNorm with biases, learned positions, biases on every linear, final norm,
tied embedding, GELU (exact "gelu" or tanh "gelu_new"), no GQA.

  python3 tools/reference/export_gpt2_hub.py MODEL_DIR OUT_DIR [--check TEXT --ctx N --stride S]

--check: the perplexity of TEXT under the exported weights by PyTorch (ref_hub.gpt2_forward, the
modeling_gpt2 reference of the parity tests, in float64) with transformers' strided-window
protocol, to compare with `tfm eval -m OUT_DIR --data TEXT --ctx N --stride S`. The tokenizer
must be character-level (WordLevel over single characters, as configs/shakespeare-gpt.json's).
"""
import argparse
import json
import math
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "peers", "torch"))
from bench_torch_decode import read_safetensors  # noqa: E402
from fixtures import save  # noqa: E402
import ref_hub  # noqa: E402


def require(cond, what):
    if not cond:
        sys.exit(f"export_gpt2_hub: the model is not GPT-2-shaped: {what}")


def gpt2_weights(cfg, t):
    L = cfg["n_layers"]
    out = {"transformer.wte.weight": t["embed_tokens.weight"], "transformer.wpe.weight": t["embed_positions.weight"],
           "transformer.ln_f.weight": t["decoder.norm.weight"], "transformer.ln_f.bias": t["decoder.norm.bias"]}
    for i in range(L):
        s, h = f"decoder.layers.{i}.", f"transformer.h.{i}."
        a = s + "self_attn."
        out[h + "ln_1.weight"], out[h + "ln_1.bias"] = t[s + "self_attn_norm.weight"], t[s + "self_attn_norm.bias"]
        out[h + "ln_2.weight"], out[h + "ln_2.bias"] = t[s + "ffn_norm.weight"], t[s + "ffn_norm.bias"]
        out[h + "attn.c_attn.weight"] = torch.cat([t[a + p + "_proj.weight"] for p in "qkv"], 0).T
        out[h + "attn.c_attn.bias"] = torch.cat([t[a + p + "_proj.bias"] for p in "qkv"], 0)
        out[h + "attn.c_proj.weight"], out[h + "attn.c_proj.bias"] = t[a + "o_proj.weight"].T, t[a + "o_proj.bias"]
        out[h + "mlp.c_fc.weight"], out[h + "mlp.c_fc.bias"] = t[s + "ffn.up_proj.weight"].T, t[s + "ffn.up_proj.bias"]
        out[h + "mlp.c_proj.weight"] = t[s + "ffn.down_proj.weight"].T
        out[h + "mlp.c_proj.bias"] = t[s + "ffn.down_proj.bias"]
    return {k: v.float().contiguous() for k, v in out.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir")
    ap.add_argument("out_dir")
    ap.add_argument("--check")
    ap.add_argument("--ctx", type=int, default=64)
    ap.add_argument("--stride", type=int, default=32)
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.model_dir, "config.json")))
    require(cfg.get("architecture") == "decoder_only", "architecture " + str(cfg.get("architecture")))
    require(cfg.get("norm") == "layer_norm" and cfg.get("norm_placement") == "pre", "pre-norm LayerNorm")
    require(cfg.get("position") == "learned", "learned positions")
    require(cfg.get("bias") and cfg.get("final_norm") and cfg.get("tie_embeddings"), "biases, final norm, tied embedding")
    require(cfg.get("activation") in ("gelu", "gelu_tanh"), "activation " + str(cfg.get("activation")))
    require(cfg.get("n_kv_heads", 0) in (0, cfg["n_heads"]) and cfg.get("d_ff") == 4 * cfg["d_model"],
            "multi-head attention and d_ff = 4 d_model")
    require(not cfg.get("logits_bias") and cfg.get("scale_attention_scores", True), "no logits bias, scaled scores")
    t = read_safetensors(os.path.join(a.model_dir, "model.safetensors"))
    w = gpt2_weights(cfg, t)
    act = "gelu" if cfg["activation"] == "gelu" else "gelu_new"
    hub = ref_hub.gpt2_config(
        _name_or_path=os.path.basename(os.path.normpath(a.model_dir)), activation_function=act, attn_pdrop=0.0,
        embd_pdrop=0.0, resid_pdrop=0.0, bos_token_id=cfg["bos_token_id"], eos_token_id=cfg["eos_token_id"],
        layer_norm_epsilon=cfg["norm_eps"], n_ctx=cfg["max_positions"], n_embd=cfg["d_model"], n_head=cfg["n_heads"],
        n_layer=cfg["n_layers"], n_positions=cfg["max_positions"], vocab_size=cfg["vocab_size"],
        task_specific_params=None)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "config.json"), "w") as f:
        json.dump(hub, f, indent=2)
    save(os.path.join(a.out_dir, "model.safetensors"), w, {"format": "pt"})
    shutil.copy(os.path.join(a.model_dir, "tokenizer.json"), os.path.join(a.out_dir, "tokenizer.json"))
    print(f"wrote {a.out_dir}: GPT2LMHeadModel, {len(w)} tensors, activation_function {act}")
    if a.check:
        tok = json.load(open(os.path.join(a.model_dir, "tokenizer.json")))
        require(tok["model"]["type"] == "WordLevel", "--check needs a character-level tokenizer")
        vocab, unk = tok["model"]["vocab"], tok["model"]["vocab"].get(tok["model"].get("unk_token", ""), 0)
        ids = torch.tensor([[vocab.get(c, unk) for c in open(a.check, encoding="utf-8").read()]])
        if act == "gelu":
            ref_hub.gelu_new = lambda x: torch.nn.functional.gelu(x)
        p = {k: v.double() for k, v in w.items()}
        nll, n = ref_hub.guide_perplexity(lambda x: ref_hub.gpt2_forward(hub, p, x), ids, a.ctx, a.stride)
        print(f"PyTorch reference: {n} predicted tokens, perplexity {math.exp(nll / n):.4f}")


if __name__ == "__main__":
    main()
