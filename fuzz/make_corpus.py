#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/<target>/ from the project's own files and the
malformed cases of the unit tests (tests/unit/io/test_safetensors.cpp, test_tokenizer.cpp,
test_model_config.cpp, test_train.cpp). The seeds are committed; run this again only to
regenerate them:   python3 fuzz/make_corpus.py build/bin/tfm
It trains three tiny models (LM, classifier, translation) with tfm to get real model
directories (config.json, model.safetensors, tokenizer.json), then adds hand-made files."""
import json, os, shutil, struct, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def st_file(header, data_len):
    """A safetensors file: 8-byte length, the header text, data_len zero bytes."""
    h = header.encode()
    return struct.pack("<Q", len(h)) + h + bytes(data_len)


def tiny_config(task, train, extra_model):
    model = {"d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "max_positions": 64, "dropout": 0.0}
    model.update(extra_model)
    c = {"task": task, "seed": 1, "model": model, "training": {"batch_size": 2, "max_steps": 1},
         "eval": {"every": 1000, "batches": 1}}
    if task == "lm":
        c["tokenizer"] = {"kind": "char"}
        c["data"] = {"train": train, "val_fraction": 0.1, "block_size": 16}
    elif task == "classifier":
        c["tokenizer"] = {"kind": "word", "vocab_size": 200}
        c["data"] = {"train": train, "test_size": 20, "max_length": 24, "header": False}
    else:
        c["tokenizer"] = {"kind": "bpe", "vocab_size": 300, "isolate_cjk": True}
        c["data"] = {"train": train, "test_size": 20, "max_length": 24}
        c["eval"]["bleu_examples"] = 0
    return c


def main():
    tfm = os.path.abspath(sys.argv[1])
    tmp = tempfile.mkdtemp()
    try:
        # A small slice of each data set keeps the trained tokenizers (and so the seeds) small.
        def head(src, n, name):
            path = os.path.join(tmp, name)
            with open(os.path.join(ROOT, "data", src), encoding="utf-8") as f, open(path, "w", encoding="utf-8") as o:
                for i, line in enumerate(f):
                    if i >= n:
                        break
                    o.write(line)
            return path
        runs = {
            "lm": tiny_config("lm", head("tinyshakespeare.txt", 400, "lm.txt"), {"architecture": "decoder_only"}),
            "cls": tiny_config("classifier", head("sms-spam.tsv", 200, "cls.tsv"), {"architecture": "encoder_only", "head": "classifier", "pooling": "first"}),
            "mt": tiny_config("seq2seq", head("cmn-eng.tsv", 200, "mt.tsv"), {"architecture": "encoder_decoder"}),
        }
        for name, cfg in runs.items():
            cpath = os.path.join(tmp, name + ".json")
            with open(cpath, "w") as f:
                json.dump(cfg, f, indent=2)
            subprocess.run([tfm, "-t", "1", "train", cpath, "--out", os.path.join(tmp, name), "-q"], check=True,
                           stdout=subprocess.DEVNULL)
            d = os.path.join(tmp, name)
            def read(*parts):
                with open(os.path.join(d, *parts), "rb") as f:
                    return f.read()
            put("safetensors", name + "_model.safetensors", read("model.safetensors"))
            if name == "lm":  # the optimizer state of one (the others are larger copies of the same layout)
                put("safetensors", name + "_optimizer.safetensors", read("checkpoint", "optimizer.safetensors"))
            put("model_config", name + "_config.json", read("config.json"))
            put("tokenizer_json", name + "_tokenizer.json", read("tokenizer.json"))
            put("train_config", name + "_tiny.json", json.dumps(cfg, indent=2))
            put("train_config", name + "_recorded.json", read("train_config.json"))
    finally:
        shutil.rmtree(tmp)

    # safetensors: each dtype, metadata, an unaligned tensor, the unit test's malformed files.
    for dt, size in [("F32", 4), ("F16", 2), ("BF16", 2), ("I64", 8), ("I32", 4), ("U8", 1), ("F64", 8)]:
        put("safetensors", "dtype_" + dt, st_file(json.dumps(
            {"__metadata__": {"format": "pt", "step": "3"}, "t": {"dtype": dt, "shape": [2, 3], "data_offsets": [0, 6 * size]}}),
            6 * size))
    put("safetensors", "unaligned", st_file(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}}', 9))
    put("safetensors", "empty_tensor", st_file('{"z":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]}}', 0))
    put("safetensors", "bad_too_short", b"abc")
    put("safetensors", "bad_json", st_file('{"x":', 0))
    put("safetensors", "bad_huge_length", b"\xff" * 8)
    put("safetensors", "bad_outside", st_file('{"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 4))
    put("safetensors", "bad_size", st_file('{"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}', 8))
    put("safetensors", "bad_dtype", st_file('{"x":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}}', 8))
    put("safetensors", "bad_shape", st_file('{"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}', 8))

    # tokenizer.json: the unit test's malformed files and hand-written variants.
    pre = '"pre_tokenizer":{"type":"ByteLevel"},'
    for i, t in enumerate([
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a c"]}}',
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}',
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":0,"b":2},"merges":[]}}',
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":"x"},"merges":[]}}',
        '{"model":{"type":"Unigram","vocab":{}}}',
        '{"model":[]}',
        '{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"ByteLevel"}]},'
        '"model":{"type":"BPE","vocab":{"a":0},"merges":[]}}',
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}',
        '{' + pre + '"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]}}',
        '{"pre_tokenizer":{"type":"WhitespaceSplit"},"model":{"type":"WordLevel","vocab":{"<unk>":0,"hi":1},'
        '"unk_token":"<unk>"},"added_tokens":[{"id":0,"content":"<unk>","special":true}]}',
    ]):
        put("tokenizer_json", "case_%02d.json" % i, t)

    # tokenizer_encode: first byte picks the tokenizer (0 GPT-2, 1 BPE+CJK, 2 char, 3 word; +4 adds specials).
    texts = [s.encode() for s in ["Hello world, it's 42!", "First Citizen:\nBefore we proceed any further, hear me speak.",
             "Tom is my friend.\t汤姆是我的朋友。", "Où est la gare? 😀 ひらがな 한국어", "  spaces   and\ttabs\r\n",
             "<|endoftext|> <pad> <bos>", "\x00\x01\x7f"]]
    texts.append(b"a\xe4\xb8x\xff" + "是".encode())  # invalid UTF-8 (test_tokenizer.cpp's case)
    for i, raw in enumerate(texts):
        for sel in range(8):
            put("tokenizer_encode", "t%d_k%d" % (i, sel), bytes([sel]) + raw)

    # config.json: Hugging Face spellings and presets (test_model_config.cpp), and bad ones.
    for i, t in enumerate([
        '{"model_type":"llama","hidden_size":64,"intermediate_size":172,"num_hidden_layers":2,"num_attention_heads":8,'
        '"num_key_value_heads":2,"vocab_size":100,"rms_norm_eps":1e-6,"rope_theta":500000.0,"tie_word_embeddings":false,'
        '"torch_dtype":"float32","architectures":["LlamaForCausalLM"],"rope_scaling":null,"hidden_act":"silu"}',
        '{"model_type":"gpt2","n_embd":32,"n_layer":1,"n_head":4,"n_positions":64,"vocab_size":50,"n_inner":null,'
        '"activation_function":"gelu_new"}',
        '{"model_type":"bert","architectures":["BertForMaskedLM"],"hidden_size":32,"num_hidden_layers":1,'
        '"num_attention_heads":4,"intermediate_size":64,"vocab_size":99}',
        '{"preset":"vaswani","d_model":64,"n_heads":4,"n_layers":2,"norm_placement":"pre","vocab_size":1000}',
        '{"preset":"t5"}', '{"preset":"llama"}',
        '{"d_model": 64, "n_head": 4}', '{"norm": "batch_norm"}', '{"d_model": "big"}', '{"d_model": 30, "n_heads": 4}',
        '{"n_heads": 4, "n_kv_heads": 3}', '{"model_type": "mamba"}', '{"dropout": 1.5}', '{"d_model": 64,',
        '{"architecture":"encoder_only","head":"lm"}',
    ]):
        put("model_config", "case_%02d.json" % i, t)

    # train configs: the project's configs/ and test_train.cpp's cases.
    for f in sorted(os.listdir(os.path.join(ROOT, "configs"))):
        put("train_config", "configs_" + f, open(os.path.join(ROOT, "configs", f), "rb").read())
    ok = '"model": {"architecture": "decoder_only"}, "data": {"train": "x.txt"}'
    for i, t in enumerate(["{" + ok + "}", "{" + ok + ', "optimiser": {}}', "{" + ok + ', "optimizer": {"lr": -1}}',
                           "{" + ok + ', "schedule": {"name": "linear"}}', '{"data": {"train": "x"}}',
                           "{" + ok + ', "tokenizer": {"kind": "char", "isolate_cjk": true}}',
                           "{" + ok + ', "tokenizer": {"kind": "bpe", "isolate_cjk": true}}', "{ not json"]):
        put("train_config", "case_%02d.json" % i, t)


if __name__ == "__main__":
    main()
