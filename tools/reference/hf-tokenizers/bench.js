// HF tokenizers (npm, the Rust library) encode throughput on the inputs of
// bench/micro/bench_hf_tokenizers.cpp: MB/s with RAYON_NUM_THREADS=1 and =2 (set by
// bench/tokenizers/bench_tokenizers.sh, one process each), encodeBatch over all lines (one call, so
// the JS boundary is crossed once), best of 3 after a warm-up.
// Usage: RAYON_NUM_THREADS=N node bench.js DATA_DIR NAME=PATH...
"use strict";
const fs = require("fs");
const path = require("path");
const { Tokenizer } = require("tokenizers");

const [dataDir, ...specs] = process.argv.slice(2);
(async () => {
  for (const spec of specs) {
    const [name, file] = spec.split("=");
    const t = Tokenizer.fromFile(file);
    for (const f of ["tinyshakespeare.txt", "cmn-eng.tsv"]) {
      const lines = fs.readFileSync(path.join(dataDir, f), "utf8").split("\n");
      if (lines[lines.length - 1] === "") lines.pop();
      const mb = lines.reduce((n, l) => n + Buffer.byteLength(l), 0) / 1e6;
      let ntok = 0;
      await t.encodeBatch(lines, { addSpecialTokens: false });
      let best = Infinity;
      for (let r = 0; r < 3; ++r) {
        const t0 = process.hrtime.bigint();
        const out = await t.encodeBatch(lines, { addSpecialTokens: false });
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e9);
        ntok = out.reduce((n, e) => n + e.getLength(), 0);
      }
      console.log(`${name.padEnd(16)} ${f.padEnd(20)} ${(mb / best).toFixed(2).padStart(12)} ${String(ntok).padStart(8)}`);
    }
  }
})();
