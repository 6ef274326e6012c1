#!/usr/bin/env bash
# Sentence embeddings and vector indexes end to end, against tools/reference/sentence_fixture.py's
# PyTorch reference of sentence-transformers (two directories: mean + Normalize with a prompt
# and max_seq_length; five poolings concatenated + Dense/Tanh):
#   tfm embed --input equals the reference's vectors (prompt names, --dimensions too);
#   tfm index build (flat, hnsw, ivfpq) reports recall@10 >= 0.95 against exact search, and
#   search returns the reference's exact top-5 (flat), 90% of them (hnsw, ivfpq);
#   an interrupted build resumes, --add grows an index, and a wrong encoder, a damaged file,
#   a second build into a full directory and bad corpus lines are one-line errors; Fusion-in-
#   Decoder (tfm translate --retrieve) equals a PyTorch reference token for token.
# Usage: retrieval_commands.sh /path/to/tfm SOURCE_DIR
set -euo pipefail
tfm="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
trap 'echo "FAIL: retrieval_commands.sh line $LINENO: $BASH_COMMAND" >&2' ERR
fail() { echo "FAIL: $*" >&2; exit 1; }
py=/usr/bin/python3
[ -x "$py" ] || py=python3
export OMP_WAIT_POLICY=passive
"$py" "$src/tools/reference/sentence_fixture.py" "$tmp"
"$py" -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))['texts']))" "$tmp/expected.json" > "$tmp/texts.txt"

# compare KEY < JSON lines: each "embedding" within 1e-5 of expected.json's KEY.
compare_py='
import json, sys
ref = json.load(open(sys.argv[1]))[sys.argv[2]]
got = [json.loads(l)["embedding"] for l in sys.stdin if l.strip()]
assert len(got) == len(ref), f"{sys.argv[2]}: {len(got)} vectors, reference {len(ref)}"
for i, (g, r) in enumerate(zip(got, ref)):
    assert len(g) == len(r), f"{sys.argv[2]} #{i}: {len(g)} numbers, reference {len(r)}"
    err = max(abs(a - b) for a, b in zip(g, r))
    assert err < 1e-5, f"{sys.argv[2]} #{i}: max |diff| {err}"
'
compare() { "$py" -c "$compare_py" "$tmp/expected.json" "$1"; }
"$tfm" -t 1 embed -m "$tmp/st_mean" --input "$tmp/texts.txt" --batch 3 | compare st_mean || fail "st_mean embeddings"
"$tfm" -t 1 embed -m "$tmp/st_mean" --input "$tmp/texts.txt" --prompt-name query | compare st_mean_query ||
  fail "st_mean with the query prompt"
"$tfm" -t 1 embed -m "$tmp/st_mean" --input "$tmp/texts.txt" --dimensions 8 | compare st_mean_dim8 || fail "--dimensions 8"
"$tfm" -t 1 embed -m "$tmp/st_multi" --input "$tmp/texts.txt" | compare st_multi || fail "st_multi embeddings"
# .jsonl input keeps the ids
printf '{"id": "a7", "text": "w5 w9"}\n{"text": "w11"}\n' > "$tmp/in.jsonl"
"$tfm" -t 1 embed -m "$tmp/st_mean" --input "$tmp/in.jsonl" | "$py" -c '
import json, sys
ids = [json.loads(l)["id"] for l in sys.stdin]
assert ids == ["a7", "2"], ids' || fail "jsonl ids"
# one-line errors
expect_error() {  # expect_error PATTERN CMD...: non-zero exit, one stderr line matching PATTERN
  local pat=$1; shift
  if "$@" > /dev/null 2> "$tmp/err"; then fail "expected an error from: $*"; fi
  [ "$(wc -l < "$tmp/err")" -eq 1 ] || fail "more than one line from: $* -> $(cat "$tmp/err")"
  grep -qF -- "$pat" "$tmp/err" || fail "error of '$*' lacks '$pat': $(cat "$tmp/err")"
}
expect_error "is not among the model's prompts" "$tfm" embed -m "$tmp/st_mean" --prompt-name passage "w5"
expect_error "more than the model's 16" "$tfm" embed -m "$tmp/st_mean" --dimensions 17 "w5"
printf '{"id": "a", "text": "w5"}\n{"txt": "w6"}\n' > "$tmp/bad.jsonl"
expect_error "bad.jsonl:2" "$tfm" embed -m "$tmp/st_mean" --input "$tmp/bad.jsonl"

# Indexes: the report's recall, and the top hits against the reference's exact search.
for t in flat hnsw ivfpq; do
  "$tfm" -t 1 index build -m "$tmp/st_mean" --input "$tmp/corpus.txt" -o "$tmp/idx_$t" --type $t --checkpoint 400 \
    > "$tmp/build_$t.txt" 2> "$tmp/build_$t.err"
  grep -q "1500 passages (1500 added), $t" "$tmp/build_$t.txt" || fail "index build $t: $(cat "$tmp/build_$t.txt")"
  recall=$(sed -n 's/.*recall@10 \([0-9.]*\).*/\1/p' "$tmp/build_$t.txt")
  "$py" -c "import sys; sys.exit(0 if float('$recall') >= 0.95 else 1)" || fail "$t recall@10 $recall < 0.95"
  "$tfm" -t 1 index search "$tmp/idx_$t" -k 5 --json < "$tmp/queries.txt" > "$tmp/hits_$t.jsonl"
done
"$py" - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
exp = json.load(open(f"{d}/expected.json"))
queries = open(f"{d}/queries.txt").read().split("\n")[:20]
corpus = open(f"{d}/corpus.txt").read().split("\n")
found = {}
for t in ("flat", "hnsw", "ivfpq"):
    hits = [json.loads(l) for l in open(f"{d}/hits_{t}.jsonl")]
    assert len(hits) == 100, f"{t}: {len(hits)} hits for 20 queries x 5"
    for q in range(20):
        mine = [h for h in hits if h["query"] == queries[q]]
        assert [h["rank"] for h in mine] == [1, 2, 3, 4, 5], (t, q)
        for h in mine:
            assert corpus[int(h["id"]) - 1] == h["text"], (t, h)
        ref, s = exp["corpus_topk"][q], exp["corpus_topk_scores"][q]
        # Ranks whose reference scores are closer than f32 rounding may swap: compare up to them.
        n = next((i for i in range(5) if s[i] - s[i + 1] < 1e-6), 5)
        got = [int(h["id"]) for h in mine]
        if t == "flat":
            assert got[:n] == ref[:n], f"flat query {q}: {got} vs the reference's {ref}"
            for h, r in zip(mine, s):
                assert abs(h["score"] - r) < 1e-5, (h["score"], r)
        else:
            found[t] = found.get(t, 0) + len(set(got) & set(ref))
for t in ("hnsw", "ivfpq"):  # approximate: the reference's top-5 mostly found
    assert found[t] >= 0.9 * 100, f"{t}: {found[t]} of the reference's 100 top-5 hits found"
PY
# Plain-text output: the query, then "  1. [id] score  text".
"$tfm" -t 1 index search "$tmp/idx_flat" -k 2 "w5 w9 w11" > "$tmp/plain.txt"
[ "$(sed -n 1p "$tmp/plain.txt")" = "w5 w9 w11" ] && grep -Eq '^  2\. \[[0-9]+\] [0-9.]+  w' "$tmp/plain.txt" ||
  fail "plain search output: $(cat "$tmp/plain.txt")"

# An interrupted build resumes from its last checkpoint: index.json rewound to 400 of 1500
# with junk past it in both files (a crash after the checkpoint), then the same command.
cp -r "$tmp/idx_flat" "$tmp/idx_resume"
"$py" - "$tmp/idx_resume" <<'PY'
import json, sys
d = sys.argv[1]
m = json.load(open(f"{d}/index.json"))
lines = open(f"{d}/passages.jsonl", "rb").read().split(b"\n")
m["complete"], m["count"] = False, 400
m["files"]["passages.jsonl"] = {"bytes": sum(len(l) + 1 for l in lines[:400])}
m["files"]["vectors.f32"] = {"bytes": 400 * 16 * 4}
json.dump(m, open(f"{d}/index.json", "w"))
open(f"{d}/passages.jsonl", "ab").write(b'{"id": "junk"')
open(f"{d}/vectors.f32", "ab").write(b"\0" * 30)
PY
expect_error "unfinished build (400 passages so far)" "$tfm" index search "$tmp/idx_resume" "w5"
"$tfm" -t 1 index build -q -m "$tmp/st_mean" --input "$tmp/corpus.txt" -o "$tmp/idx_resume" > "$tmp/resume.txt"
grep -q "1500 passages (1100 added, resumed after 400)" "$tmp/resume.txt" || fail "resume: $(cat "$tmp/resume.txt")"
cmp "$tmp/idx_resume/passages.jsonl" "$tmp/idx_flat/passages.jsonl" || fail "resumed passages differ"
cmp "$tmp/idx_resume/vectors.f32" "$tmp/idx_flat/vectors.f32" || fail "resumed vectors differ"

# --add grows an index; building again into it without --add is refused.
head -5 "$tmp/queries.txt" > "$tmp/more.txt"
"$tfm" -t 1 index build -q -m "$tmp/st_mean" --input "$tmp/more.txt" -o "$tmp/idx_hnsw" --type hnsw --add > "$tmp/add.txt"
grep -q "1505 passages (5 added)" "$tmp/add.txt" || fail "--add: $(cat "$tmp/add.txt")"
top=$("$tfm" -t 1 index search "$tmp/idx_hnsw" -k 1 --json "$(head -1 "$tmp/queries.txt")")
echo "$top" | grep -q '"index":1500' || fail "the added passage is not its own nearest: $top"
expect_error "already holds an index of 1500 passages" \
  "$tfm" index build -q -m "$tmp/st_mean" --input "$tmp/more.txt" -o "$tmp/idx_flat"
expect_error "holds a flat index; asked for hnsw" \
  "$tfm" index build -q -m "$tmp/st_mean" --input "$tmp/more.txt" -o "$tmp/idx_flat" --type hnsw --add
expect_error "was built by an encoder of dimension 16; this one gives 24" \
  "$tfm" index search "$tmp/idx_flat" -m "$tmp/st_multi" "w5"
cp -r "$tmp/st_mean" "$tmp/st_cls"  # the same weights pooled another way: other vectors, same size
sed -i 's/"pooling_mode_cls_token": false/"pooling_mode_cls_token": true/; s/"pooling_mode_mean_tokens": true/"pooling_mode_mean_tokens": false/' \
  "$tmp/st_cls/1_Pooling/config.json"
expect_error "was built by another encoder" "$tfm" index search "$tmp/idx_flat" -m "$tmp/st_cls" "w5"
expect_error "learns from at least" \
  "$tfm" index build -q -m "$tmp/st_mean" --input "$tmp/more.txt" -o "$tmp/idx_small" --type ivfpq
# A damaged file is named.
printf 'X' | dd of="$tmp/idx_flat/index.faiss" bs=1 seek=100 conv=notrunc 2> /dev/null
expect_error "index.faiss] fails its checksum" "$tfm" index search "$tmp/idx_flat" "w5"
truncate -s -10 "$tmp/idx_hnsw/passages.jsonl"
expect_error "passages.jsonl] holds" "$tfm" index search "$tmp/idx_hnsw" "w5"
# generate --retrieve: its flags go together, and a missing index is named before any model loads.
expect_error "go with --retrieve" "$tfm" generate -m "$tmp/none" -p "w5" -k 2
expect_error "is not an index directory" "$tfm" generate -m "$tmp/none" -p "w5" --retrieve "$tmp/no_index"
# Fusion-in-Decoder: tfm translate --retrieve on a T5 hub directory (hub_cli_fixture.py, word-level
# vocabulary w0..w28) equals a PyTorch reference that encodes the input joined with each
# retrieved passage apart and decodes over their concatenation (ref_hub.t5_forward with a list).
"$py" "$src/tools/reference/hub_cli_fixture.py" "$tmp/fx" > /dev/null
for i in $(seq 1 40); do echo "w$((i % 20 + 3)) w$((i % 7 + 10)) w$((i % 11 + 5))"; done > "$tmp/fid_corpus.txt"
"$tfm" -t 1 index build -q -m "$tmp/st_mean" --input "$tmp/fid_corpus.txt" -o "$tmp/idx_fid" > /dev/null
printf '%s' '{{ prompt }} {{ document.text }}' > "$tmp/fid.jinja"
Q="w4 w12 w8"
got=$("$tfm" -t 1 translate -m "$tmp/fx/hub/t5" --retrieve "$tmp/idx_fid" -k 3 --retrieve-template "$tmp/fid.jinja" --beam 1 -n 6 "$Q" 2> /dev/null)
"$tfm" -t 1 index search "$tmp/idx_fid" -k 3 --json "$Q" > "$tmp/fid_hits.jsonl"
want=$("$py" - "$src/tools/reference" "$tmp/fx/hub/t5" "$tmp/fid_hits.jsonl" "$Q" <<'PY'
import json, struct, sys
import torch
sys.path.insert(0, sys.argv[1])
import ref_hub
d, hits, q = sys.argv[2], [json.loads(l) for l in open(sys.argv[3])], sys.argv[4]
cfg = json.load(open(f"{d}/config.json"))
b = open(f"{d}/model.safetensors", "rb").read()
n = struct.unpack("<Q", b[:8])[0]
p = {}
for name, e in json.loads(b[8:8 + n]).items():
    if name == "__metadata__":
        continue
    lo, hi = e["data_offsets"]
    p[name] = torch.frombuffer(bytearray(b[8 + n + lo:8 + n + hi]), dtype=torch.float32).reshape(e["shape"]).double()
ids = lambda text: [int(w[1:]) for w in text.split()] + [1]  # noqa: E731  (the source's </s>)
parts = [torch.tensor([ids(q + " " + h["text"])]) for h in hits]
out = []
for t in ref_hub.seq2seq_greedy(lambda s, tgt: ref_hub.t5_forward(cfg, p, s, tgt), parts, 0, 6).tolist():
    if t == 1:
        break
    out.append(f"w{t}")
print(" ".join(out))
PY
)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "Fusion-in-Decoder: '$got' != the reference's '$want'"
echo "retrieval commands: ok"
