"""Build data/sms-threads.tsv: long "threads" of SMS messages for the sparse-attention example.

Usage: python3 tools/make_sms_threads.py [data/sms-spam.tsv] [data/sms-threads.tsv]

Each thread is several messages of data/sms-spam.tsv joined by " | " until it would pass
MAX_CHARS characters (so a character-level model with max_length 1024 sees all of it). Half
the threads hide exactly one spam message at a random position among ham messages (label
"spam"), the other half are ham only (label "ham"). Every message is used at most once, so a
seeded test split of the threads never shares a message with the training split. The file
is deterministic (seeded; duplicate messages are dropped), so the shipped copy can be rebuilt byte for byte.
"""
import random
import sys

MAX_CHARS = 1000
SEED = 2024


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "data/sms-spam.tsv"
    dst = sys.argv[2] if len(sys.argv) > 2 else "data/sms-threads.tsv"
    ham, spam = [], []
    with open(src, encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            label, _, text = line.rstrip("\n").partition("\t")
            text = " ".join(text.split())
            if text and len(text) < 200:  # a long message alone would fill a thread
                (spam if label == "spam" else ham).append(text)
    # The collection repeats some messages verbatim: keep one copy, so no text is in two threads.
    ham, spam = list(dict.fromkeys(ham)), list(dict.fromkeys(spam))
    spam = [t for t in spam if t not in set(ham)]
    rng = random.Random(SEED)
    rng.shuffle(ham)
    rng.shuffle(spam)
    rows = []
    while ham:
        has_spam = len(rows) % 2 == 0 and bool(spam)
        first = spam.pop() if has_spam else None
        msgs, length = [], len(first) + 3 if first else 0
        while ham and length + len(ham[-1]) + 3 <= MAX_CHARS:
            msgs.append(ham.pop())
            length += len(msgs[-1]) + 3
        if len(msgs) < 4:  # the pool is running dry: stop rather than write short threads
            break
        if first:
            msgs.insert(rng.randrange(len(msgs) + 1), first)
        rows.append(("spam" if first else "ham", " | ".join(msgs)))
    with open(dst, "w", encoding="utf-8") as f:
        f.write("label\ttext\n")
        for label, text in rows:
            f.write(f"{label}\t{text}\n")
    n_spam = sum(1 for r in rows if r[0] == "spam")
    print(f"wrote {len(rows)} threads ({n_spam} spam, {len(rows) - n_spam} ham), "
          f"mean {sum(len(r[1]) for r in rows) / len(rows):.0f} chars, to {dst}")


if __name__ == "__main__":
    main()
