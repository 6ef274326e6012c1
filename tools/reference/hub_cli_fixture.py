"""Hub directories for the CLI test (tests/cli/hub_commands.sh): ref_hub.py's directories and
references, each given a word-level tokenizer.json whose token i is the word "w<i>" (special
tokens at the ids the family's config names), so a text prompt maps to known ids and the
command's output text to the reference's greedy ids.

Usage: python3 tools/reference/hub_cli_fixture.py OUT_DIR   (writes OUT_DIR/hub/...)
"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ref_hub  # noqa: E402

# Special tokens by family: id -> content (names the engine's tokenizer recognises).
SPECIALS = {
    "gpt2": {40: "<|endoftext|>"},
    "llama_bf16": {0: "<unk>", 1: "<s>", 2: "</s>"},
    "bert_cls": {0: "[PAD]", 1: "[UNK]", 2: "[CLS]", 3: "[SEP]"},
    "bert_model": {0: "[PAD]", 1: "[UNK]", 2: "[CLS]", 3: "[SEP]"},
    "t5": {0: "<pad>", 1: "</s>", 2: "<unk>"},
    "marian": {0: "</s>", 1: "<unk>", 32: "<pad>"},
}


def tokenizer_json(vocab_size, specials):
    vocab = {specials.get(i, f"w{i}"): i for i in range(vocab_size)}
    unk = next((t for t in specials.values() if "unk" in t.lower()), None)
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, t in sorted(specials.items())]
    model = {"type": "WordLevel", "vocab": vocab}
    if unk:
        model["unk_token"] = unk
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
            "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": None, "decoder": None, "model": model}


def main():
    out = sys.argv[1]
    torch.set_num_threads(1)
    ref_hub.make(out)
    for name, specials in SPECIALS.items():
        d = os.path.join(out, "hub", name)
        with open(os.path.join(d, "config.json")) as f:
            V = json.load(f)["vocab_size"]
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(tokenizer_json(V, specials), f)


if __name__ == "__main__":
    main()
