"""What RETRO's neighbours hold of the text that follows (docs/results.md, Shakespeare with
retrieval). For random held-out positions, the chunk there is searched in a RETRO model
directory's chunk database exactly as the engine searches it (include/tfm/chunk_database.h: the
same hashed n-grams, rounded IDF weights, cosine, ties to the earlier chunk), and each of the k
neighbours' continuations (the r - m tokens after its chunk) is compared with the true next
chunk: the fraction of positions where the tokens agree, the length of their common prefix, and
the longest run of the next chunk found anywhere in the neighbour's r tokens (what a model could
copy once it aligns the two); a random database chunk is the baseline.

Usage: neighbour_overlap.py MODEL_DIR TEXT [VAL_FRACTION] [SAMPLES]
  e.g. neighbour_overlap.py runs/retro data/tinyshakespeare.txt 0.1 400
(a char-tokenized model: its tokenizer.json is a WordLevel vocabulary of characters)."""
import json
import struct
import sys

import numpy as np

MASK = (1 << 64) - 1


def read_tokens(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        begin, end = header["tokens"]["data_offsets"]
        f.seek(8 + n + begin)
        return np.frombuffer(f.read(end - begin), dtype="<i4").astype(np.int64)


def counts(ids, rc):
    m, D = rc["chunk_size"], rc["embedding_dim"]
    v = np.zeros(D)
    for n in range(1, min(rc["max_ngram"], m) + 1):
        for i in range(m - n + 1):
            h = 1469598103934665603 ^ n
            for t in ids[i:i + n]:
                h = ((h ^ int(t)) * 1099511628211) & MASK
                h = ((h ^ (h >> 29)) * 1099511628211) & MASK
            v[h % D] += 1
    return v


def main():
    model, text = sys.argv[1], sys.argv[2]
    val_fraction = float(sys.argv[3]) if len(sys.argv) > 3 else 0.1
    samples = int(sys.argv[4]) if len(sys.argv) > 4 else 400
    rc = json.load(open(f"{model}/config.json"))["retrieval"]
    vocab = json.load(open(f"{model}/tokenizer.json"))["model"]["vocab"]
    stream = np.array([vocab.get(c, 1) for c in open(text, encoding="utf-8").read()])
    val = stream[len(stream) - int(len(stream) * val_fraction):]
    db = read_tokens(f"{model}/retrieval_db.safetensors")
    m, r, k = rc["chunk_size"], rc["neighbour_length"], rc["neighbours"]
    starts = np.arange(0, len(db) - r + 1, m)
    X = np.stack([counts(db[s:s + m], rc) for s in starts])
    df = np.maximum((X > 0).sum(0), 1)
    idf = np.maximum(1, np.round(np.log(len(starts) / df)))
    X *= idf
    inv = 1 / np.maximum(np.linalg.norm(X, axis=1), 1e-300)
    rng = np.random.default_rng(0)
    agree, prefix, base, run, base_run = [], [], [], [], []

    def lcp(a, b):
        n = 0
        while n < len(a) and a[n] == b[n]:
            n += 1
        return n

    def longest_run(a, b):  # the longest common substring of two token lists
        best = 0
        prev = [0] * (len(b) + 1)
        for x in a:
            cur = [0] * (len(b) + 1)
            for j, y in enumerate(b):
                if x == y:
                    cur[j + 1] = prev[j] + 1
                    best = max(best, cur[j + 1])
            prev = cur
        return best

    for _ in range(samples):
        p = int(rng.integers(0, len(val) - 2 * m))
        score = (X @ (counts(val[p:p + m], rc) * idf)) * inv
        best = np.lexsort((np.arange(len(starts)), -score))[:k]  # by score, ties to the earlier chunk
        truth = val[p + m:p + 2 * m]
        for c in best:
            cont = db[starts[c] + m:starts[c] + r][:m]
            agree.append(np.mean(cont == truth[:len(cont)]))
            prefix.append(lcp(cont, truth))
            other = starts[int(rng.integers(0, len(starts)))]
            base.append(np.mean(db[other + m:other + r][:m] == truth[:len(cont)]))
            run.append(longest_run(list(truth), list(db[starts[c]:starts[c] + r])))
            base_run.append(longest_run(list(truth), list(db[other:other + r])))
    print(f"{model}: {len(starts)} chunks; {samples} held-out chunks x {k} neighbours: continuation agrees with "
          f"the next chunk at {np.mean(agree):.3f} of positions (a random chunk's: {np.mean(base):.3f}); "
          f"common prefix {np.mean(prefix):.2f} tokens; longest run of the next chunk inside the neighbour "
          f"{np.mean(run):.2f} tokens (a random chunk: {np.mean(base_run):.2f})")


if __name__ == "__main__":
    main()
