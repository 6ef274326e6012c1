#!/usr/bin/env python3
"""SentencePiece's own unigram trainer on TRAIN, then the number of pieces it cuts HELDOUT
into: the reference figure for `tfm tokenizer train --type unigram` (same algorithm, same
vocabulary size). Settings mirror ours: NFKC, a dummy prefix ▁ before every word, every char
kept (character_coverage 1.0), pieces within one script and at most 16 chars.
Usage: unigram_tokens.py TRAIN HELDOUT PIECES  (PIECES: vocabulary size without <unk>, <s>, </s>)"""
import sys
import tempfile

import sentencepiece as spm


def main():
    train, heldout, pieces = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with tempfile.TemporaryDirectory() as tmp:
        spm.SentencePieceTrainer.train(
            input=train, model_prefix=f"{tmp}/m", model_type="unigram", vocab_size=pieces + 3,
            normalization_rule_name="nfkc", character_coverage=1.0, max_sentencepiece_length=16,
            split_by_unicode_script=True, split_by_number=True, split_by_whitespace=True,
            add_dummy_prefix=True, remove_extra_whitespaces=False, num_threads=2,
            minloglevel=2, hard_vocab_limit=False)
        sp = spm.SentencePieceProcessor(model_file=f"{tmp}/m.model")
        with open(heldout, encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        print(sum(len(sp.encode(line)) for line in lines))


if __name__ == "__main__":
    main()
