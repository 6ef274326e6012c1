"""Hugging Face hub directories, as the hub publishes them, for tests/parity/test_parity_hub.cpp.

Debian 12 has no python3-transformers, so each family's forward pass is written here in plain
PyTorch following transformers' modeling code (modeling_gpt2, modeling_llama / mistral / qwen2,
modeling_bert, modeling_t5, modeling_marian), in float64. Each directory holds config.json with
the keys the hub's files carry (informational ones included), generation_config.json and the
weights in one of the hub's layouts:

  prefixed or not (GPT2LMHeadModel's "transformer.h.0..." vs the hub gpt2's "h.0..."),
  sharded (model-0000k-of-0000N.safetensors + model.safetensors.index.json),
  buffers (attn.bias, attn.masked_bias, rotary_emb.inv_freq, position_ids, Marian's table),
  F32 / F16 / BF16 storage, tied heads absent or present, untied heads.

Next to each directory DIR, DIR.ref.safetensors holds the inputs, the reference logits (or
hidden states) and the greedy continuation. The reference runs on the weights as stored
(rounded to f16/bf16 where the file is).
"""
import json
import math
import os

import torch
import torch.nn.functional as F

from fixtures import save
from ref_position import t5_bucket

D64 = torch.float64


def rnd(*shape, std=0.2):
    return torch.randn(*shape) * std


def near_one(n):
    return 1.0 + 0.1 * torch.randn(n)


# ---- shared pieces ------------------------------------------------------------------------
def layer_norm(x, w, b, eps):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


def rms_norm(x, w, eps):  # LlamaRMSNorm / T5LayerNorm: x * rsqrt(mean(x^2) + eps) * w
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def heads(x, H):  # (B, T, H*D) -> (B, H, T, D)
    B, T, _ = x.shape
    return x.view(B, T, H, -1).transpose(1, 2)


def merge(x):  # (B, H, T, D) -> (B, T, H*D)
    B, H, T, D = x.shape
    return x.transpose(1, 2).reshape(B, T, H * D)


def attend(q, k, v, scale, add=None):
    s = q @ k.transpose(-1, -2) * scale
    if add is not None:
        s = s + add
    return torch.softmax(s, -1) @ v


def causal(T, window=0):  # additive mask; window w: query i sees keys j with i - w < j <= i
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    ok = j <= i
    if window:
        ok = ok & (i - j < window)
    return torch.where(ok, 0.0, float("-inf")).to(D64)


def lin(p, name, x):
    y = x @ p[name + ".weight"].T
    b = p.get(name + ".bias")
    return y if b is None else y + b


def greedy(step_fn, ids, n):
    """Greedy continuation by full recompute: step_fn(ids (1, T)) -> logits (1, T, V)."""
    out = []
    for _ in range(n):
        nxt = int(step_fn(ids)[0, -1].argmax())
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], 1)
    return torch.tensor(out, dtype=torch.int64)


# ---- GPT-2 ------------------------------------------------------------------------------
def gpt2_params(cfg, tied):
    C, V, P, L, I = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"], 4 * cfg["n_embd"]
    p = {"transformer.wte.weight": rnd(V, C), "transformer.wpe.weight": rnd(P, C)}
    for i in range(L):
        h = f"transformer.h.{i}."
        p.update({h + "ln_1.weight": near_one(C), h + "ln_1.bias": rnd(C, std=0.1),
                  h + "attn.c_attn.weight": rnd(C, 3 * C), h + "attn.c_attn.bias": rnd(3 * C, std=0.1),
                  h + "attn.c_proj.weight": rnd(C, C), h + "attn.c_proj.bias": rnd(C, std=0.1),
                  h + "ln_2.weight": near_one(C), h + "ln_2.bias": rnd(C, std=0.1),
                  h + "mlp.c_fc.weight": rnd(C, I), h + "mlp.c_fc.bias": rnd(I, std=0.1),
                  h + "mlp.c_proj.weight": rnd(I, C), h + "mlp.c_proj.bias": rnd(C, std=0.1)})
    p["transformer.ln_f.weight"] = near_one(C)
    p["transformer.ln_f.bias"] = rnd(C, std=0.1)
    if not tied:
        p["lm_head.weight"] = rnd(V, C)
    return p


def gpt2_forward(cfg, p, ids):
    H, eps = cfg["n_head"], cfg["layer_norm_epsilon"]
    T = ids.shape[1]
    x = p["transformer.wte.weight"][ids] + p["transformer.wpe.weight"][torch.arange(T)]
    for i in range(cfg["n_layer"]):
        h = f"transformer.h.{i}."
        a = layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps)
        qkv = a @ p[h + "attn.c_attn.weight"] + p[h + "attn.c_attn.bias"]  # Conv1D: x @ W + b
        q, k, v = (heads(t, H) for t in qkv.split(x.shape[-1], -1))
        o = merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), causal(T)))
        x = x + o @ p[h + "attn.c_proj.weight"] + p[h + "attn.c_proj.bias"]
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = gelu_new(m @ p[h + "mlp.c_fc.weight"] + p[h + "mlp.c_fc.bias"])
        x = x + m @ p[h + "mlp.c_proj.weight"] + p[h + "mlp.c_proj.bias"]
    x = layer_norm(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"], eps)
    return x @ p.get("lm_head.weight", p["transformer.wte.weight"]).T


def gpt2_config(**over):
    c = {"_name_or_path": "gpt2", "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
         "attn_pdrop": 0.1, "bos_token_id": 40, "embd_pdrop": 0.1, "eos_token_id": 40, "initializer_range": 0.02,
         "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 24, "n_embd": 16, "n_head": 4, "n_inner": None,
         "n_layer": 2, "n_positions": 24, "reorder_and_upcast_attn": False, "resid_pdrop": 0.1,
         "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
         "summary_first_dropout": 0.1, "summary_proj_to_labels": True, "summary_type": "cls_index",
         "summary_use_proj": True, "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
         "torch_dtype": "float32", "transformers_version": "4.26.0.dev0", "use_cache": True, "vocab_size": 41}
    c.update(over)
    return c


def gpt2_buffers(cfg, prefix):
    P = cfg["n_positions"]
    out = {}
    for i in range(cfg["n_layer"]):
        out[f"{prefix}h.{i}.attn.bias"] = torch.tril(torch.ones(P, P)).view(1, 1, P, P)
        out[f"{prefix}h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return out


# ---- Llama, Mistral, Qwen2 --------------------------------------------------------------------
def llama_params(cfg, qkv_bias=False, o_bias=False):
    C, V, L, I = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    D = C // H
    p = {"model.embed_tokens.weight": rnd(V, C)}
    for i in range(L):
        h = f"model.layers.{i}."
        p.update({h + "input_layernorm.weight": near_one(C), h + "post_attention_layernorm.weight": near_one(C),
                  h + "self_attn.q_proj.weight": rnd(H * D, C), h + "self_attn.k_proj.weight": rnd(KV * D, C),
                  h + "self_attn.v_proj.weight": rnd(KV * D, C), h + "self_attn.o_proj.weight": rnd(C, H * D),
                  h + "mlp.gate_proj.weight": rnd(I, C), h + "mlp.up_proj.weight": rnd(I, C),
                  h + "mlp.down_proj.weight": rnd(C, I)})
        if qkv_bias:
            p.update({h + "self_attn.q_proj.bias": rnd(H * D, std=0.1), h + "self_attn.k_proj.bias": rnd(KV * D, std=0.1),
                      h + "self_attn.v_proj.bias": rnd(KV * D, std=0.1)})
        if o_bias:
            p[h + "self_attn.o_proj.bias"] = rnd(C, std=0.1)
    p["model.norm.weight"] = near_one(C)
    if not cfg.get("tie_word_embeddings", False):
        p["lm_head.weight"] = rnd(V, C)
    return p


def rope(x, base):  # x (B, H, T, D): LlamaRotaryEmbedding + apply_rotary_pos_emb (halves)
    D, T = x.shape[-1], x.shape[-2]
    inv = 1.0 / (base ** (torch.arange(0, D, 2, dtype=D64) / D))
    f = torch.arange(T, dtype=D64)[:, None] * inv[None]
    emb = torch.cat([f, f], -1)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return x * emb.cos() + torch.cat([-x2, x1], -1) * emb.sin()


def llama_forward(cfg, p, ids):
    H, KV, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    window = cfg.get("sliding_window") if cfg["model_type"] == "mistral" else 0
    T = ids.shape[1]
    x = p["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        h = f"model.layers.{i}."
        a = rms_norm(x, p[h + "input_layernorm.weight"], eps)
        q = rope(heads(lin(p, h + "self_attn.q_proj", a), H), cfg["rope_theta"])
        k = rope(heads(lin(p, h + "self_attn.k_proj", a), KV), cfg["rope_theta"])
        v = heads(lin(p, h + "self_attn.v_proj", a), KV)
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)  # repeat_kv
        o = merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), causal(T, window or 0)))
        x = x + lin(p, h + "self_attn.o_proj", o)
        m = rms_norm(x, p[h + "post_attention_layernorm.weight"], eps)
        x = x + lin(p, h + "mlp.down_proj", F.silu(lin(p, h + "mlp.gate_proj", m)) * lin(p, h + "mlp.up_proj", m))
    x = rms_norm(x, p["model.norm.weight"], eps)
    return x @ p.get("lm_head.weight", p["model.embed_tokens.weight"]).T


def llama_config(model_type="llama", **over):
    arch = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}[model_type]
    c = {"architectures": [arch], "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu",
         "hidden_size": 16, "initializer_range": 0.02, "intermediate_size": 40, "max_position_embeddings": 64,
         "model_type": model_type, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "transformers_version": "4.40.0", "use_cache": True, "vocab_size": 37}
    # Each family's own keys, as its published config.json files carry them.
    c.update({"llama": {"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1},
              "mistral": {"sliding_window": 4},
              "qwen2": {"max_window_layers": 2, "sliding_window": 64, "use_sliding_window": False,
                        "bos_token_id": 35, "eos_token_id": 36}}[model_type])
    c.update(over)
    return c


# ---- BERT ---------------------------------------------------------------------------------
def bert_params(cfg, head):
    C, V, L, I, P = (cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"],
                     cfg["max_position_embeddings"])
    p = {"bert.embeddings.word_embeddings.weight": rnd(V, C), "bert.embeddings.position_embeddings.weight": rnd(P, C),
         "bert.embeddings.token_type_embeddings.weight": rnd(cfg["type_vocab_size"], C),
         "bert.embeddings.LayerNorm.weight": near_one(C), "bert.embeddings.LayerNorm.bias": rnd(C, std=0.1)}
    for i in range(L):
        h = f"bert.encoder.layer.{i}."
        for n, o, inp in (("attention.self.query", C, C), ("attention.self.key", C, C), ("attention.self.value", C, C),
                          ("attention.output.dense", C, C), ("intermediate.dense", I, C), ("output.dense", C, I)):
            p[h + n + ".weight"], p[h + n + ".bias"] = rnd(o, inp), rnd(o, std=0.1)
        for n in ("attention.output.LayerNorm", "output.LayerNorm"):
            p[h + n + ".weight"], p[h + n + ".bias"] = near_one(C), rnd(C, std=0.1)
    # BertModel's pooler is in every checkpoint of the family.
    p["bert.pooler.dense.weight"], p["bert.pooler.dense.bias"] = rnd(C, C), rnd(C, std=0.1)
    if head == "mlm":
        p["cls.predictions.transform.dense.weight"] = rnd(C, C)
        p["cls.predictions.transform.dense.bias"] = rnd(C, std=0.1)
        p["cls.predictions.transform.LayerNorm.weight"] = near_one(C)
        p["cls.predictions.transform.LayerNorm.bias"] = rnd(C, std=0.1)
        p["cls.predictions.bias"] = rnd(V, std=0.1)
    if head == "cls":
        n = len(cfg["id2label"])
        p["classifier.weight"], p["classifier.bias"] = rnd(n, C), rnd(n, std=0.1)
    return p


def bert_forward(cfg, p, ids, types, lens, head):
    H, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    B, T = ids.shape
    e = "bert.embeddings."
    x = p[e + "word_embeddings.weight"][ids] + p[e + "position_embeddings.weight"][torch.arange(T)] + \
        p[e + "token_type_embeddings.weight"][types]
    x = layer_norm(x, p[e + "LayerNorm.weight"], p[e + "LayerNorm.bias"], eps)
    keep = torch.arange(T)[None, :] < lens[:, None]  # (B, T)
    add = torch.zeros(B, T, dtype=D64).masked_fill(~keep, torch.finfo(D64).min)[:, None, None, :]
    for i in range(cfg["num_hidden_layers"]):
        h = f"bert.encoder.layer.{i}."
        q, k, v = (heads(lin(p, h + "attention.self." + n, x), H) for n in ("query", "key", "value"))
        a = lin(p, h + "attention.output.dense", merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), add)))
        x = layer_norm(a + x, p[h + "attention.output.LayerNorm.weight"], p[h + "attention.output.LayerNorm.bias"], eps)
        f = lin(p, h + "output.dense", F.gelu(lin(p, h + "intermediate.dense", x)))
        x = layer_norm(f + x, p[h + "output.LayerNorm.weight"], p[h + "output.LayerNorm.bias"], eps)
    if head == "none":
        return x
    if head == "mlm":
        t = F.gelu(lin(p, "cls.predictions.transform.dense", x))
        t = layer_norm(t, p["cls.predictions.transform.LayerNorm.weight"], p["cls.predictions.transform.LayerNorm.bias"], eps)
        return t @ p[e + "word_embeddings.weight"].T + p["cls.predictions.bias"]
    pooled = torch.tanh(lin(p, "bert.pooler.dense", x[:, 0]))
    return lin(p, "classifier", pooled)


def bert_config(arch, **over):
    c = {"architectures": [arch], "attention_probs_dropout_prob": 0.1, "classifier_dropout": None,
         "gradient_checkpointing": False, "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 16,
         "initializer_range": 0.02, "intermediate_size": 32, "layer_norm_eps": 1e-12, "max_position_embeddings": 24,
         "model_type": "bert", "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0,
         "position_embedding_type": "absolute", "torch_dtype": "float32", "transformers_version": "4.6.0.dev0",
         "type_vocab_size": 2, "use_cache": True, "vocab_size": 43}
    c.update(over)
    return c


# ---- T5 ----------------------------------------------------------------------------------
def t5_params(cfg):
    C, V, Dk, H, I = cfg["d_model"], cfg["vocab_size"], cfg["d_kv"], cfg["num_heads"], cfg["d_ff"]
    gated = cfg["feed_forward_proj"].startswith("gated")
    p = {"shared.weight": rnd(V, C, std=1.0)}
    for side, n in (("encoder", cfg["num_layers"]), ("decoder", cfg["num_decoder_layers"])):
        for i in range(n):
            b = f"{side}.block.{i}."
            atts = ["layer.0.SelfAttention."] + (["layer.1.EncDecAttention."] if side == "decoder" else [])
            for a in atts:
                for m in "qkv":
                    p[b + a + m + ".weight"] = rnd(H * Dk, C)
                p[b + a + "o.weight"] = rnd(C, H * Dk)
            if i == 0:
                p[b + "layer.0.SelfAttention.relative_attention_bias.weight"] = rnd(cfg["relative_attention_num_buckets"], H, std=0.5)
            for j in range(len(atts) + 1):
                p[b + f"layer.{j}.layer_norm.weight"] = near_one(C)
            f = b + f"layer.{len(atts)}.DenseReluDense."
            if gated:
                p[f + "wi_0.weight"], p[f + "wi_1.weight"] = rnd(I, C), rnd(I, C)
            else:
                p[f + "wi.weight"] = rnd(I, C)
            p[f + "wo.weight"] = rnd(C, I)
        p[f"{side}.final_layer_norm.weight"] = near_one(C)
    if not cfg["tie_word_embeddings"]:
        p["lm_head.weight"] = rnd(V, C)
    return p


def t5_forward(cfg, p, src, tgt):
    H, eps, NB, MD = cfg["num_heads"], cfg["layer_norm_epsilon"], cfg["relative_attention_num_buckets"], \
        cfg["relative_attention_max_distance"]
    gated = cfg["feed_forward_proj"].startswith("gated")

    def rel_bias(side, Tq, Tk, bidirectional):
        rel = torch.arange(Tk)[None, :] - torch.arange(Tq)[:, None]
        bk = t5_bucket(rel, bidirectional, NB, MD)
        return p[f"{side}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"][bk].permute(2, 0, 1)[None]

    def attn(x, kv, pre, bias):
        q, k, v = heads(lin(p, pre + "q", x), H), heads(lin(p, pre + "k", kv), H), heads(lin(p, pre + "v", kv), H)
        return lin(p, pre + "o", merge(attend(q, k, v, 1.0, bias)))  # T5: no 1/sqrt(d) scaling

    def ffn(x, f):
        if gated:
            return lin(p, f + "wo", gelu_new(lin(p, f + "wi_0", x)) * lin(p, f + "wi_1", x))
        return lin(p, f + "wo", F.relu(lin(p, f + "wi", x)))

    def encode(s):
        x = p["shared.weight"][s]
        bias = rel_bias("encoder", s.shape[1], s.shape[1], True)
        for i in range(cfg["num_layers"]):
            b = f"encoder.block.{i}."
            h = rms_norm(x, p[b + "layer.0.layer_norm.weight"], eps)
            x = x + attn(h, h, b + "layer.0.SelfAttention.", bias)
            x = x + ffn(rms_norm(x, p[b + "layer.1.layer_norm.weight"], eps), b + "layer.1.DenseReluDense.")
        return rms_norm(x, p["encoder.final_layer_norm.weight"], eps)

    # Fusion-in-Decoder: a list of sources is encoded part by part, the decoder reads them all.
    mem = torch.cat([encode(s) for s in src], 1) if isinstance(src, (list, tuple)) else encode(src)
    T = tgt.shape[1]
    y = p["shared.weight"][tgt]
    bias = rel_bias("decoder", T, T, False) + causal(T)
    for i in range(cfg["num_decoder_layers"]):
        b = f"decoder.block.{i}."
        h = rms_norm(y, p[b + "layer.0.layer_norm.weight"], eps)
        y = y + attn(h, h, b + "layer.0.SelfAttention.", bias)
        y = y + attn(rms_norm(y, p[b + "layer.1.layer_norm.weight"], eps), mem, b + "layer.1.EncDecAttention.", None)
        y = y + ffn(rms_norm(y, p[b + "layer.2.layer_norm.weight"], eps), b + "layer.2.DenseReluDense.")
    y = rms_norm(y, p["decoder.final_layer_norm.weight"], eps)
    if cfg["tie_word_embeddings"]:
        return (y * cfg["d_model"] ** -0.5) @ p["shared.weight"].T
    return y @ p["lm_head.weight"].T


def fid_training_reference(cfg, p):
    """Fusion-in-Decoder training on the tied T5: two examples of two parts each, every part
    encoded alone and the decoder reading each example's parts joined; the summed token loss and
    its gradient on the shared table (which the encoder, the decoder and the head all read)."""
    parts = [[[4, 12, 8, 1], [9, 3, 1]], [[5, 7, 1], [11, 2, 14, 6, 1]]]
    tgt = torch.tensor([[0, 6, 15, 3], [0, 9, 2, 7]])
    labels = torch.tensor([[6, 15, 3, 1], [9, 2, 7, -100]])
    q = {k: (v.clone().requires_grad_() if k == "shared.weight" else v) for k, v in p.items()}
    logits = torch.cat([t5_forward(cfg, q, [torch.tensor([x]) for x in ex], tgt[b:b + 1]) for b, ex in enumerate(parts)])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum")
    loss.backward()
    S = max(len(x) for ex in parts for x in ex)
    return {"fid_input_ids": torch.tensor([x + [0] * (S - len(x)) for ex in parts for x in ex]),
            "fid_valid_lens": torch.tensor([len(x) for ex in parts for x in ex]),
            "fid_decoder_input_ids": tgt, "fid_labels": labels, "fid_logits": logits.detach().float(),
            "fid_loss": loss.detach().float().reshape(1), "fid_grad_shared": q["shared.weight"].grad.float()}


def t5_config(v11, **over):
    c = {"architectures": ["T5ForConditionalGeneration"], "d_ff": 32, "d_kv": 4, "d_model": 16,
         "decoder_start_token_id": 0, "dropout_rate": 0.1, "eos_token_id": 1, "initializer_factor": 1.0,
         "is_encoder_decoder": True, "layer_norm_epsilon": 1e-06, "model_type": "t5", "n_positions": 512,
         "num_decoder_layers": 2, "num_heads": 4, "num_layers": 2, "output_past": True, "pad_token_id": 0,
         "relative_attention_max_distance": 20, "relative_attention_num_buckets": 8, "feed_forward_proj": "relu",
         "tie_word_embeddings": True, "transformers_version": "4.23.1", "use_cache": True, "vocab_size": 29,
         "task_specific_params": {"translation_en_to_de": {"early_stopping": True, "max_length": 300, "num_beams": 4,
                                                           "prefix": "translate English to German: "}}}
    if v11:  # google/t5-v1_1 and flan-t5
        c.update({"dense_act_fn": "gelu_new", "feed_forward_proj": "gated-gelu", "is_gated_act": True,
                  "tie_word_embeddings": False, "torch_dtype": "bfloat16", "num_decoder_layers": 3})
        del c["task_specific_params"]
    c.update(over)
    return c


def guide_perplexity(step_fn, ids, max_length, stride):
    """transformers' perplexity guide, verbatim in logic: returns (nll_sum, predicted tokens)."""
    seq_len = ids.shape[1]
    nll_sum, n_tokens, prev_end = 0.0, 0, 0
    for begin in range(0, seq_len, stride):
        end = min(begin + max_length, seq_len)
        trg_len = end - prev_end
        input_ids = ids[:, begin:end]
        target_ids = input_ids.clone()
        target_ids[:, :-trg_len] = -100
        logits = step_fn(input_ids)
        labels = target_ids[:, 1:]  # the model shifts labels left
        valid = labels != -100
        logp = torch.log_softmax(logits[:, :-1], -1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
        nll_sum += float(-(logp[valid]).sum())
        n_tokens += int(valid.sum())
        prev_end = end
        if end == seq_len:
            break
    return nll_sum, n_tokens


def seq2seq_greedy(forward, src, start, n):
    tgt = torch.tensor([[start]])
    for _ in range(n):
        nxt = int(forward(src, tgt)[0, -1].argmax())
        tgt = torch.cat([tgt, torch.tensor([[nxt]])], 1)
    return tgt[0, 1:].clone()


# ---- Marian (OPUS-MT) ----------------------------------------------------------------------
def marian_table(P, C):  # MarianSinusoidalPositionalEmbedding: sin in the first half, cos in the second
    pos = torch.arange(P, dtype=D64)[:, None]
    j = torch.arange(C)[None, :]
    enc = pos / torch.pow(torch.tensor(10000.0, dtype=D64), 2 * (j // 2) / C)
    out = torch.zeros(P, C, dtype=D64)
    out[:, : C // 2] = torch.sin(enc[:, 0::2])
    out[:, C // 2:] = torch.cos(enc[:, 1::2])
    return out


def marian_params(cfg):
    C, V, I = cfg["d_model"], cfg["vocab_size"], cfg["encoder_ffn_dim"]
    p = {"model.shared.weight": rnd(V, C), "final_logits_bias": rnd(1, V, std=0.5)}
    for side in ("encoder", "decoder"):
        for i in range(cfg[side + "_layers"]):
            h = f"model.{side}.layers.{i}."
            for a in ["self_attn"] + (["encoder_attn"] if side == "decoder" else []):
                for m in ("q_proj", "k_proj", "v_proj", "out_proj"):
                    p[f"{h}{a}.{m}.weight"], p[f"{h}{a}.{m}.bias"] = rnd(C, C), rnd(C, std=0.1)
                p[f"{h}{a}_layer_norm.weight"], p[f"{h}{a}_layer_norm.bias"] = near_one(C), rnd(C, std=0.1)
            p[h + "fc1.weight"], p[h + "fc1.bias"] = rnd(I, C), rnd(I, std=0.1)
            p[h + "fc2.weight"], p[h + "fc2.bias"] = rnd(C, I), rnd(C, std=0.1)
            p[h + "final_layer_norm.weight"], p[h + "final_layer_norm.bias"] = near_one(C), rnd(C, std=0.1)
    return p


def marian_forward(cfg, p, src, tgt):
    H, C = cfg["encoder_attention_heads"], cfg["d_model"]
    scale = math.sqrt(C) if cfg["scale_embedding"] else 1.0
    table = marian_table(cfg["max_position_embeddings"], C)
    E = p["model.shared.weight"]

    def attn(x, kv, pre, add):  # BartAttention: q_proj(x) * head_dim^-0.5
        q, k, v = (heads(lin(p, pre + n, t), H) for n, t in (("q_proj", x), ("k_proj", kv), ("v_proj", kv)))
        return lin(p, pre + "out_proj", merge(attend(q, k, v, 1.0 / math.sqrt(q.shape[-1]), add)))

    def ln(x, n):
        return layer_norm(x, p[n + ".weight"], p[n + ".bias"], 1e-5)

    def ffn(x, h):
        return lin(p, h + "fc2", F.silu(lin(p, h + "fc1", x)))

    x = E[src] * scale + table[: src.shape[1]]
    for i in range(cfg["encoder_layers"]):
        h = f"model.encoder.layers.{i}."
        x = ln(x + attn(x, x, h + "self_attn.", None), h + "self_attn_layer_norm")
        x = ln(x + ffn(x, h), h + "final_layer_norm")
    T = tgt.shape[1]
    y = E[tgt] * scale + table[:T]
    for i in range(cfg["decoder_layers"]):
        h = f"model.decoder.layers.{i}."
        y = ln(y + attn(y, y, h + "self_attn.", causal(T)), h + "self_attn_layer_norm")
        y = ln(y + attn(y, x, h + "encoder_attn.", None), h + "encoder_attn_layer_norm")
        y = ln(y + ffn(y, h), h + "final_layer_norm")
    return y @ E.T + p["final_logits_bias"]


def marian_config(V):
    return {"_name_or_path": "Helsinki-NLP/opus-mt-en-de", "activation_dropout": 0.0, "activation_function": "swish",
            "add_bias_logits": False, "add_final_layer_norm": False, "architectures": ["MarianMTModel"],
            "attention_dropout": 0.0, "bad_words_ids": [[V - 1]], "bos_token_id": 0, "classif_dropout": 0.0,
            "classifier_dropout": 0.0, "d_model": 16, "decoder_attention_heads": 4, "decoder_ffn_dim": 32,
            "decoder_layerdrop": 0.0, "decoder_layers": 2, "decoder_start_token_id": V - 1, "decoder_vocab_size": V,
            "dropout": 0.1, "encoder_attention_heads": 4, "encoder_ffn_dim": 32, "encoder_layerdrop": 0.0,
            "encoder_layers": 2, "eos_token_id": 0, "extra_pos_embeddings": V, "forced_eos_token_id": 0,
            "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02, "is_encoder_decoder": True,
            "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2}, "max_length": 512, "max_position_embeddings": 32,
            "model_type": "marian", "normalize_before": False, "normalize_embedding": False, "num_beams": 4,
            "num_hidden_layers": 2, "pad_token_id": V - 1, "scale_embedding": True,
            "share_encoder_decoder_embeddings": True, "static_position_embeddings": True, "torch_dtype": "float32",
            "transformers_version": "4.22.0.dev0", "use_cache": True, "vocab_size": V}


# ---- writing hub directories ----------------------------------------------------------------
def stored(p, dtype):
    """The tensors as the file holds them, and the float64 values the reference computes with."""
    disk = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in p.items()}
    return disk, {k: (v.to(D64) if v.is_floating_point() else v) for k, v in disk.items()}


def write_dir(d, cfg, disk, shards=1, gen=None):
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        os.remove(os.path.join(d, f))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    if gen is not None:
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(gen, f, indent=2)
    if shards == 1:
        save(os.path.join(d, "model.safetensors"), disk, {"format": "pt"})
        return
    names = sorted(disk)
    weight_map = {}
    for s in range(shards):
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: disk[n] for n in names[s::shards]}
        save(os.path.join(d, fname), part, {"format": "pt"})
        weight_map.update({n: fname for n in part})
    total = sum(t.numel() * t.element_size() for t in disk.values())
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def strip(p, prefix):
    return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in p.items()}


def make(out):
    root = os.path.join(out, "hub")
    os.makedirs(root, exist_ok=True)
    ids = torch.tensor([[3, 17, 5, 9, 30, 2, 11, 7]])

    def ref(name, tensors):
        save(os.path.join(root, name + ".ref.safetensors"), tensors)

    # GPT-2 as the hub publishes gpt2: unprefixed GPT2Model names, buffers, tied head absent.
    torch.manual_seed(101)
    cfg = gpt2_config()
    disk, p = stored(gpt2_params(cfg, tied=True), torch.float32)
    disk = strip(disk, "transformer.")
    disk.update(gpt2_buffers(cfg, ""))
    gen = {"_from_model_config": True, "bos_token_id": 40, "eos_token_id": 40, "transformers_version": "4.26.0.dev0"}
    write_dir(os.path.join(root, "gpt2"), cfg, disk, gen=gen)
    run = lambda x: gpt2_forward(cfg, p, x)
    stream = torch.randint(0, cfg["vocab_size"], (1, 37))
    ppl = {}
    for ctx, stride in ((8, 3), (8, 8), (24, 5)):
        nll, n = guide_perplexity(run, stream, ctx, stride)
        ppl[f"ppl_{ctx}_{stride}"] = torch.tensor([nll, float(n)], dtype=torch.float32)
    ref("gpt2", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6), "stream": stream, **ppl})

    # GPT-2 with the prefix and buffers, untied, F16, two shards.
    torch.manual_seed(102)
    cfg = gpt2_config(tie_word_embeddings=False, torch_dtype="float16")
    disk, p = stored(gpt2_params(cfg, tied=False), torch.float16)
    disk.update(gpt2_buffers(cfg, "transformer."))
    write_dir(os.path.join(root, "gpt2_f16_sharded"), cfg, disk, shards=2)
    run = lambda x: gpt2_forward(cfg, p, x)
    ref("gpt2_f16_sharded", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6)})

    # Llama, BF16, untied, rotary buffers; generation_config with a list of EOS ids.
    torch.manual_seed(103)
    cfg = llama_config()
    disk, p = stored(llama_params(cfg), torch.bfloat16)
    for i in range(cfg["num_hidden_layers"]):
        D = cfg["hidden_size"] // cfg["num_attention_heads"]
        disk[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = 1.0 / (10000.0 ** (torch.arange(0, D, 2).float() / D))
    gen = {"bos_token_id": 1, "eos_token_id": [2, 36], "do_sample": True, "temperature": 0.6, "top_p": 0.9,
           "max_length": 64, "transformers_version": "4.40.0"}
    write_dir(os.path.join(root, "llama_bf16"), cfg, disk, gen=gen)
    run = lambda x: llama_forward(cfg, p, x)
    ref("llama_bf16", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6)})

    # Llama with attention_bias (q, k, v and o biases), tied, unprefixed (LlamaModel names).
    torch.manual_seed(104)
    cfg = llama_config(attention_bias=True, tie_word_embeddings=True, torch_dtype="float32")
    disk, p = stored(llama_params(cfg, qkv_bias=True, o_bias=True), torch.float32)
    write_dir(os.path.join(root, "llama_bias_tied"), cfg, strip(disk, "model."))
    run = lambda x: llama_forward(cfg, p, x)
    ref("llama_bias_tied", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6)})

    # Mistral: sliding window 4 over 8 tokens, so the window shapes the result.
    torch.manual_seed(105)
    cfg = llama_config("mistral", torch_dtype="float32")
    disk, p = stored(llama_params(cfg), torch.float32)
    write_dir(os.path.join(root, "mistral"), cfg, disk)
    run = lambda x: llama_forward(cfg, p, x)
    ref("mistral", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6)})

    # Qwen2: q/k/v biases, no o or MLP bias, tied (lm_head absent), F16, sharded in three.
    torch.manual_seed(106)
    cfg = llama_config("qwen2", tie_word_embeddings=True, torch_dtype="float16")
    disk, p = stored(llama_params(cfg, qkv_bias=True), torch.float16)
    write_dir(os.path.join(root, "qwen2_f16"), cfg, disk, shards=3,
              gen={"bos_token_id": 35, "eos_token_id": [36, 35], "max_new_tokens": 5, "top_k": 20})
    run = lambda x: llama_forward(cfg, p, x)
    ref("qwen2_f16", {"input_ids": ids, "logits": run(ids).float(), "greedy": greedy(run, ids, 6)})

    # BERT: BertModel (unprefixed, pooler and position_ids present), BertForMaskedLM (with
    # the tied decoder copies), BertForSequenceClassification (id2label, problem_type).
    bids = torch.tensor([[2, 9, 14, 30, 7, 3], [2, 21, 5, 3, 0, 0]])
    types = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]])
    lens = torch.tensor([6, 4])
    for name, arch, head, seed in (("bert_model", "BertModel", "none", 107), ("bert_mlm", "BertForMaskedLM", "mlm", 108),
                                   ("bert_cls", "BertForSequenceClassification", "cls", 109)):
        torch.manual_seed(seed)
        over = {"id2label": {"0": "NEGATIVE", "1": "NEUTRAL", "2": "POSITIVE"},
                "label2id": {"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2},
                "problem_type": "single_label_classification", "finetuning_task": "sst3"} if head == "cls" else {}
        cfg = bert_config(arch, **over)
        disk, p = stored(bert_params(cfg, head), torch.float32)
        disk["bert.embeddings.position_ids"] = torch.arange(cfg["max_position_embeddings"])[None]
        if head == "none":
            disk = strip(disk, "bert.")
        if head == "mlm":  # as bert-base-uncased's file: TensorFlow-era LayerNorm names
            disk = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
                    for k, v in disk.items()}
            disk["cls.predictions.decoder.weight"] = disk["bert.embeddings.word_embeddings.weight"]
            disk["cls.predictions.decoder.bias"] = disk["cls.predictions.bias"]
        write_dir(os.path.join(root, name), cfg, disk)
        ref(name, {"input_ids": bids, "token_type_ids": types, "valid_lens": lens,
                   "logits": bert_forward(cfg, p, bids, types, lens, head).float()})

    # T5 v1.0 (relu, tied, the embed_tokens copies in the file) and v1.1 (gated-gelu, untied, BF16).
    src = torch.tensor([[4, 12, 8, 20, 1]])
    tgt = torch.tensor([[0, 6, 15, 3]])
    for name, v11, dtype, seed in (("t5", False, torch.float32, 110), ("t5_v1_1_bf16", True, torch.bfloat16, 111)):
        torch.manual_seed(seed)
        cfg = t5_config(v11)
        disk, p = stored(t5_params(cfg), dtype)
        if not v11:
            disk["encoder.embed_tokens.weight"] = disk["shared.weight"]
            disk["decoder.embed_tokens.weight"] = disk["shared.weight"]
        write_dir(os.path.join(root, name), cfg, disk,
                  gen={"decoder_start_token_id": 0, "eos_token_id": 1, "pad_token_id": 0})
        run = lambda s, t: t5_forward(cfg, p, s, t)
        tensors = {"input_ids": src, "decoder_input_ids": tgt, "logits": run(src, tgt).float(),
                   "greedy": seq2seq_greedy(run, src, 0, 5)}
        if name == "t5":
            tensors.update(fid_training_reference(cfg, p))
        ref(name, tensors)

    # Marian (OPUS-MT): the static tables, tied copies and lm_head in the file, as converted
    # checkpoints hold them; decoder_start_token_id = pad.
    torch.manual_seed(112)
    V = 33
    cfg = marian_config(V)
    disk, p = stored(marian_params(cfg), torch.float32)
    table = marian_table(cfg["max_position_embeddings"], cfg["d_model"]).float()
    for side in ("encoder", "decoder"):
        disk[f"model.{side}.embed_positions.weight"] = table
        disk[f"model.{side}.embed_tokens.weight"] = disk["model.shared.weight"]
    disk["lm_head.weight"] = disk["model.shared.weight"]
    write_dir(os.path.join(root, "marian"), cfg, disk,
              gen={"bad_words_ids": [[V - 1]], "bos_token_id": 0, "decoder_start_token_id": V - 1, "eos_token_id": 0,
                   "forced_eos_token_id": 0, "max_length": 512, "num_beams": 4, "pad_token_id": V - 1,
                   "renormalize_logits": True, "transformers_version": "4.34.0.dev0"})
    run = lambda s_, t_: marian_forward(cfg, p, s_, t_)
    msrc = torch.tensor([[5, 19, 7, 26, 11, 0]])
    mtgt = torch.tensor([[V - 1, 8, 14, 3]])
    ref("marian", {"input_ids": msrc, "decoder_input_ids": mtgt, "logits": run(msrc, mtgt).float(),
                   "greedy": seq2seq_greedy(run, msrc, V - 1, 5)})
