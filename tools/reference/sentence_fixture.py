"""sentence-transformers directories and their embeddings, for tests/cli/retrieval_commands.sh.

Debian 12 packages neither sentence-transformers nor transformers, so the pipeline is written
here in plain PyTorch after sentence_transformers/models (Transformer, Pooling, Dense,
Normalize) in float64, over ref_hub.py's BertModel. Two directories:

  st_mean   mean pooling, Normalize; max_seq_length 12; prompts {"query": "w5 w6 "} with
            include_prompt false (the prompt's tokens left out of the mean)
  st_multi  cls + max + mean_sqrt_len + weightedmean + lasttoken concatenated, a Dense layer
            with Tanh (80 -> 24), no Normalize; similarity "dot"

Each holds the hub files (config.json, model.safetensors, a word-level tokenizer.json whose
post-processor adds [CLS] .. [SEP]), modules.json, sentence_bert_config.json, 1_Pooling,
(2_Dense), and the reference vectors in OUT/expected.json:
  {"texts": [...], "st_mean": [[...]], "st_mean_query": [[...]], "st_multi": [[...]],
   "corpus_topk": [[ids of the 5 nearest corpus lines of each query, by exact cosine]], ...}
and cross: a cross-encoder (BertForSequenceClassification, num_labels 1) with its reference
relevance scores ("rerank") for /v1/rerank.
OUT/corpus.txt holds 1500 passages of random words for the index tests; OUT/queries.txt 20 queries.

Usage: python3 tools/reference/sentence_fixture.py OUT_DIR
"""
import json
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_hub  # noqa: E402
from fixtures import save  # noqa: E402

D64 = torch.float64
SPECIALS = {0: "[PAD]", 1: "[UNK]", 2: "[CLS]", 3: "[SEP]"}
V = 43


def tokenizer_json():
    vocab = {SPECIALS.get(i, f"w{i}"): i for i in range(V)}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in sorted(SPECIALS.items())]
    post = {"type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}}
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": post, "decoder": None,
            "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}}


def ids_of(text, max_len):
    """The Transformer module's tokens: [CLS] words [SEP], the words cut so the whole fits max_len."""
    words = [int(w[1:]) for w in text.split()]
    return [2] + words[:max_len - 2] + [3]


def write_bert(d, seed):
    torch.manual_seed(seed)
    cfg = ref_hub.bert_config("BertModel", max_position_embeddings=64)
    disk, p = ref_hub.stored(ref_hub.bert_params(cfg, "none"), torch.float32)
    ref_hub.write_dir(d, cfg, ref_hub.strip(disk, "bert."))
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)
    return cfg, p


def hidden_states(cfg, p, seqs):
    """BertModel's last hidden states of a right-padded batch, and the lengths."""
    T = max(len(s) for s in seqs)
    ids = torch.tensor([s + [0] * (T - len(s)) for s in seqs])
    lens = torch.tensor([len(s) for s in seqs])
    return ref_hub.bert_forward(cfg, p, ids, torch.zeros_like(ids), lens, "none"), lens


def pool(h, lens, modes, skip=0):
    """sentence_transformers.models.Pooling.forward over (B, T, C) with the mask of lens."""
    B, T, C = h.shape
    mask = (torch.arange(T)[None, :] < lens[:, None]).to(D64)
    if skip:
        mask[:, :skip] = 0  # include_prompt false
    m3 = mask[:, :, None].expand(B, T, C)
    out = []
    if "cls" in modes:
        out.append(h[:, 0])
    if "max" in modes:
        x = h.clone()
        x[m3 == 0] = -1e9
        out.append(x.max(1).values)
    if "mean" in modes or "mean_sqrt_len" in modes:
        s = (h * m3).sum(1)
        n = m3.sum(1).clamp(min=1e-9)
        if "mean" in modes:
            out.append(s / n)
        if "mean_sqrt_len" in modes:
            out.append(s / n.sqrt())
    if "weightedmean" in modes:
        w = torch.arange(1, T + 1, dtype=D64)[None, :, None] * m3
        out.append((h * w).sum(1) / w.sum(1).clamp(min=1e-9))
    if "lasttoken" in modes:
        out.append(h[torch.arange(B), lens - 1])
    return torch.cat(out, 1)


def pooling_config(C, modes, include_prompt=True):
    return {"word_embedding_dimension": C, "pooling_mode_cls_token": "cls" in modes,
            "pooling_mode_mean_tokens": "mean" in modes, "pooling_mode_max_tokens": "max" in modes,
            "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len" in modes,
            "pooling_mode_weightedmean_tokens": "weightedmean" in modes, "pooling_mode_lasttoken": "lasttoken" in modes,
            "include_prompt": include_prompt}


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(obj, f, indent=2)


def module(i, kind, path):
    return {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    rng = random.Random(5)
    texts = [" ".join(f"w{rng.randrange(4, V)}" for _ in range(n)) for n in (1, 3, 6, 9, 10, 14, 25)]
    exp = {"texts": texts}

    # st_mean: mean + Normalize, max_seq_length 12, a query prompt left out of the mean.
    d = os.path.join(out, "st_mean")
    cfg, p = write_bert(d, 201)
    C = cfg["hidden_size"]
    write_json(os.path.join(d, "modules.json"), [module(0, "Transformer", ""), module(1, "Pooling", "1_Pooling"),
                                                module(2, "Normalize", "2_Normalize")])
    write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": 12, "do_lower_case": False})
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(C, {"mean"}, include_prompt=False))
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    write_json(os.path.join(d, "config_sentence_transformers.json"),
               {"prompts": {"query": "w5 w6 "}, "default_prompt_name": None, "similarity_fn_name": "cosine"})
    normalize = lambda x: x / x.norm(dim=1, keepdim=True).clamp(min=1e-12)  # noqa: E731
    h, lens = hidden_states(cfg, p, [ids_of(t, 12) for t in texts])
    exp["st_mean"] = normalize(pool(h, lens, {"mean"})).tolist()
    # prompt_length = len(tokenize(prompt)) - 1: [CLS] w5 w6 (the [SEP] not counted)
    h, lens = hidden_states(cfg, p, [ids_of("w5 w6 " + t, 12) for t in texts])
    exp["st_mean_query"] = normalize(pool(h, lens, {"mean"}, skip=3)).tolist()
    exp["st_mean_dim8"] = normalize(torch.tensor(exp["st_mean"], dtype=D64)[:, :8]).tolist()

    # The corpus and queries for the indexes, with exact cosine top-5 by the reference.
    corpus = [" ".join(f"w{rng.randrange(4, V)}" for _ in range(rng.randrange(3, 11))) for _ in range(1500)]
    queries = [" ".join(f"w{rng.randrange(4, V)}" for _ in range(rng.randrange(3, 8))) for _ in range(20)]
    with open(os.path.join(out, "corpus.txt"), "w") as f:
        f.write("\n".join(corpus) + "\n")
    with open(os.path.join(out, "queries.txt"), "w") as f:
        f.write("\n".join(queries) + "\n")
    vecs = []
    for i in range(0, len(corpus), 100):
        h, lens = hidden_states(cfg, p, [ids_of(t, 12) for t in corpus[i:i + 100]])
        vecs.append(normalize(pool(h, lens, {"mean"})))
    cv = torch.cat(vecs)
    h, lens = hidden_states(cfg, p, [ids_of(t, 12) for t in queries])
    qv = normalize(pool(h, lens, {"mean"}))
    sims = qv @ cv.T
    top = sims.topk(6, dim=1)
    # ids are 1-based line numbers; the 6th score lets the test skip near-ties at rank 5.
    exp["corpus_topk"] = [[int(j) + 1 for j in row[:5]] for row in top.indices]
    exp["corpus_topk_scores"] = top.values.tolist()

    # st_multi: five pooling modes concatenated, Dense + Tanh, no Normalize, dot similarity.
    d = os.path.join(out, "st_multi")
    cfg, p = write_bert(d, 202)
    modes = {"cls", "max", "mean_sqrt_len", "weightedmean", "lasttoken"}
    write_json(os.path.join(d, "modules.json"), [module(0, "Transformer", ""), module(1, "Pooling", "1_Pooling"),
                                                module(2, "Dense", "2_Dense")])
    write_json(os.path.join(d, "sentence_bert_config.json"), {"max_seq_length": 40, "do_lower_case": False})
    write_json(os.path.join(d, "1_Pooling", "config.json"), pooling_config(C, modes))
    torch.manual_seed(203)
    W, b = ref_hub.rnd(24, 5 * C), ref_hub.rnd(24, std=0.1)
    W, b = W.float(), b.float()
    write_json(os.path.join(d, "2_Dense", "config.json"),
               {"in_features": 5 * C, "out_features": 24, "bias": True,
                "activation_function": "torch.nn.modules.activation.Tanh"})
    save(os.path.join(d, "2_Dense", "model.safetensors"), {"linear.weight": W, "linear.bias": b})
    write_json(os.path.join(d, "config_sentence_transformers.json"), {"similarity_fn_name": "dot"})
    h, lens = hidden_states(cfg, p, [ids_of(t, 40) for t in texts])
    pooled = pool(h, lens, modes)
    exp["st_multi"] = torch.tanh(pooled @ W.to(D64).T + b.to(D64)).tolist()

    # cross: a cross-encoder (BertForSequenceClassification, one label) for /v1/rerank: each
    # document paired with the query, [CLS] q [SEP] d [SEP] with segment ids 0 / 1, the document
    # cut from its end to the 24 positions; relevance = sigmoid(logit).
    d = os.path.join(out, "cross")
    torch.manual_seed(204)
    cfg = ref_hub.bert_config("BertForSequenceClassification", id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})
    disk, p = ref_hub.stored(ref_hub.bert_params(cfg, "cls"), torch.float32)
    ref_hub.write_dir(d, cfg, disk)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tokenizer_json(), f)
    query = "w5 w9 w11"
    docs = [" ".join(f"w{rng.randrange(4, V)}" for _ in range(n)) for n in (2, 5, 8, 30, 1, 12)]
    seqs, types = [], []
    for doc in docs:
        q, dd = [int(w[1:]) for w in query.split()], [int(w[1:]) for w in doc.split()]
        dd = dd[:cfg["max_position_embeddings"] - len(q) - 3]
        seqs.append([2] + q + [3] + dd + [3])
        types.append([0] * (len(q) + 2) + [1] * (len(dd) + 1))
    T = max(len(x) for x in seqs)
    ids = torch.tensor([x + [0] * (T - len(x)) for x in seqs])
    tt = torch.tensor([x + [0] * (T - len(x)) for x in types])
    lens = torch.tensor([len(x) for x in seqs])
    logits = ref_hub.bert_forward(cfg, p, ids, tt, lens, "cls")[:, 0]
    exp["rerank"] = {"query": query, "documents": docs, "logits": logits.tolist(),
                     "relevance": torch.sigmoid(logits).tolist()}

    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f)


if __name__ == "__main__":
    main()
