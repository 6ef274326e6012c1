// A SentencePiece unigram .model as a tokenizer.json, the way transformers' SpmConverter
// builds one: Unigram(pieces, scores, unk_id), normalizer Precompiled(the model's
// precompiled_charsmap) + Replace(" {2,}" -> " "), Metaspace pre-tokenizer and decoder.
// It exists to put the Precompiled normalizer under the parity test. The .model is read
// with a minimal protobuf reader (ModelProto: 1 = pieces {1 piece, 2 score, 3 type},
// 3 = normalizer_spec {2 precompiled_charsmap}).
"use strict";
const fs = require("fs");

function fields(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0n, shift = 0n;
    for (;;) {
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      shift += 7n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >> 3, wire = key & 7;
    if (wire === 0) out.push([no, varint()]);
    else if (wire === 1) { out.push([no, buf.subarray(i, i + 8)]); i += 8; }
    else if (wire === 2) { const n = Number(varint()); out.push([no, buf.subarray(i, i + n)]); i += n; }
    else if (wire === 5) { out.push([no, buf.subarray(i, i + 4)]); i += 4; }
    else throw new Error(`protobuf wire type ${wire}`);
  }
  return out;
}

function spmToJson(modelFile) {
  const top = fields(fs.readFileSync(modelFile));
  const vocab = [];
  let unk = 0, charsmap = Buffer.alloc(0);
  for (const [no, v] of top) {
    if (no === 1) {
      let piece = "", score = 0, type = 1;
      for (const [f, x] of fields(v)) {
        if (f === 1) piece = Buffer.from(x).toString("utf8");
        else if (f === 2) score = Buffer.from(x).readFloatLE(0);
        else if (f === 3) type = Number(x);
      }
      if (type === 2) unk = vocab.length;
      vocab.push([piece, score]);
    } else if (no === 3) {
      for (const [f, x] of fields(v)) if (f === 2) charsmap = Buffer.from(x);
    }
  }
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: vocab.slice(0, 3).map(([p], id) => ({ id, content: p, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
    normalizer: { type: "Sequence", normalizers: [
      { type: "Precompiled", precompiled_charsmap: charsmap.toString("base64") },
      { type: "Replace", pattern: { Regex: " {2,}" }, content: " " }] },
    pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    post_processor: null,
    decoder: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: unk, vocab, byte_fallback: false },
  };
}

module.exports = { spmToJson };
