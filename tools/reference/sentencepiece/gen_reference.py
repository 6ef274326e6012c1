"""SentencePiece reference for tests/tokenizer_parity/test_spm_parity.cpp (Debian's
python3-sentencepiece): trains a small unigram and a small BPE .model on the built-in data,
then writes each model's ids and decode for every STRIDE-th data line plus an adversarial set.

Usage: python3 gen_reference.py DATA_DIR OUT_DIR [STRIDE]
Writes OUT_DIR/{unigram,bpe}.model and OUT_DIR/{unigram,bpe}.tsv: hex(input) ids hex(decode).
"""
import os
import sys

import sentencepiece as spm

ADVERSARIAL = [
    "", " ", "  a  b  ", "\t tab", "line\r\nbreak", "Café naïve e\u0301", "\ufb01nance \u2460 \uff21",
    "\U0001F44D \U0001F468\u200d\U0001F469\u200d\U0001F467", "สวัสดีครับ", "مرحبا بالعالم", "你好，世界！",
    "1234567890123456789", "<s> </s> <unk>", "don't I'M", "\u00a0nbsp\u3000ideo", "A" * 200,
]


def corpus(data_dir, stride):
    out = []
    for name in ("tinyshakespeare.txt", "cmn-eng.tsv", "sms-spam.tsv"):
        with open(os.path.join(data_dir, name), encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for k, line in enumerate(lines):
            if k % stride == 0:
                out.append(line)
    return out + ADVERSARIAL


def main():
    data_dir, out_dir = sys.argv[1], sys.argv[2]
    stride = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    os.makedirs(out_dir, exist_ok=True)
    train = os.path.join(out_dir, "spm_train.txt")
    with open(train, "w", encoding="utf-8") as f:
        f.write("\n".join(s for s in corpus(data_dir, 20) if s.strip()))
    inputs = corpus(data_dir, stride)
    for kind, size in (("unigram", 2000), ("bpe", 2000)):
        prefix = os.path.join(out_dir, kind)
        spm.SentencePieceTrainer.train(input=train, model_prefix=prefix, model_type=kind, vocab_size=size,
                                       character_coverage=0.9995, byte_fallback=(kind == "bpe"),
                                       minloglevel=2, num_threads=1)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        with open(prefix + ".tsv", "w", encoding="utf-8") as f:
            for s in inputs:
                ids = sp.encode(s)
                f.write("%s\t%s\t%s\n" % (s.encode().hex(), " ".join(map(str, ids)), sp.decode(ids).encode().hex()))
        print("%s: %d reference encodings" % (kind, len(inputs)))
    os.remove(train)


if __name__ == "__main__":
    main()
