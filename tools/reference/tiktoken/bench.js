// tiktoken (npm, gpt2) encode throughput on the files bench/micro/bench_tokenizer.cpp uses, one
// text per line, single thread (tiktoken's JS binding has no batched/threaded encode).
//   node tools/reference/tiktoken/bench.js data
"use strict";
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");
const enc = get_encoding("gpt2");
const dataDir = process.argv[2] || "data";
for (const f of ["tinyshakespeare.txt", "cmn-eng.tsv"]) {
  const text = fs.readFileSync(path.join(dataDir, f), "utf8");
  const lines = text.split("\n");
  const bytes = Buffer.byteLength(text, "utf8");
  for (const l of lines) enc.encode_ordinary(l);  // warm-up
  let best = Infinity;
  for (let rep = 0; rep < 5; ++rep) {
    const t0 = process.hrtime.bigint();
    for (const l of lines) enc.encode_ordinary(l);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
  }
  console.log(`tiktoken ${f}: ${(bytes / 1e6 / best).toFixed(2)} MB/s (best of 5: ${(best * 1e3).toFixed(1)} ms for ${bytes} bytes)`);
}
