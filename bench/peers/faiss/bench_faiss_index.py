"""The FAISS-from-Python side of `tfm bench index`: the same vectors (a raw f32 file), the same
index types and settings as `tfm index build`'s defaults (flat; HNSW M 32, efConstruction 80,
efSearch 128; IVF-PQ with ~4 sqrt(n) lists, 2-number sub-vectors of 8 bits, nprobe nlist / 4,
the top 10k re-ranked exactly), inner product. Build seconds, one query's latency (every 7th
vector as a query, one at a time, k = 10) and recall@10 against the flat index. One JSON object."""
import argparse
import json
import math
import time

import faiss
import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vectors", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--dim", type=int, required=True)
    ap.add_argument("--queries", type=int, default=1000)
    a = ap.parse_args()
    x = np.fromfile(a.vectors, dtype=np.float32).reshape(a.n, a.dim)
    k, ip = 10, faiss.METRIC_INNER_PRODUCT
    nlist = max(1, min(round(4 * math.sqrt(a.n)), a.n // 39))

    def hnsw():
        i = faiss.IndexHNSWFlat(a.dim, 32, ip)
        i.hnsw.efConstruction = 80
        i.hnsw.efSearch = 128
        return i

    def ivfpq():
        q = faiss.IndexFlat(a.dim, ip)
        base = faiss.IndexIVFPQ(q, a.dim, nlist, a.dim // 2, 8, ip)
        base.nprobe = max(1, nlist // 4)
        r = faiss.IndexRefineFlat(base)
        r.k_factor = 10
        r.q, r.base = q, base  # keep the Python objects alive
        return r

    results, exact = [], None
    for name, make in (("flat", lambda: faiss.IndexFlat(a.dim, ip)), ("hnsw", hnsw), ("ivfpq", ivfpq)):
        t0 = time.perf_counter()
        index = make()
        index.train(x)
        index.add(x)
        build = time.perf_counter() - t0
        found = []
        t0 = time.perf_counter()
        for q in range(a.queries):
            _, ids = index.search(x[q * 7:q * 7 + 1], k)
            found.append(ids[0])
        query_ms = (time.perf_counter() - t0) * 1e3 / a.queries
        if exact is None:
            exact = found
        recall = sum(len(set(f) & set(e)) for f, e in zip(found, exact)) / (k * a.queries)
        results.append({"type": name, "build_s": build, "query_ms": query_ms, "recall_at_10": recall})
    print(json.dumps({"faiss": faiss.__version__, "results": results}))


if __name__ == "__main__":
    main()
