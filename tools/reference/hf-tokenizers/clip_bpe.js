// A tokenizer.json laid out as OpenAI CLIP's is on the hub (openai/clip-vit-base-patch32):
// NFC, runs of whitespace to one space, lowercase; CLIP's word pattern (Split, inverted);
// byte-level symbols; BPE whose word-final symbols carry "</w>"; <|startoftext|> and
// <|endoftext|> around every text (RobertaProcessing). The real file's 49,152 merges cannot be
// installed here, so the merges are learnt from the given lines by the plain BPE rule (the most
// frequent adjacent pair, ties to the smaller pair), which exercises every component the
// same way. The vocabulary is ordered as CLIP's: the 256 byte symbols, the same with "</w>",
// one entry per merge, then the two special tokens.
//   node clip_bpe.js TEXT_FILE MERGES OUT.json
"use strict";
const fs = require("fs");

// GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to 256 + n.
function byteSymbols() {
  const keep = [];
  for (let b = 33; b <= 126; ++b) keep.push(b);
  for (let b = 161; b <= 172; ++b) keep.push(b);
  for (let b = 174; b <= 255; ++b) keep.push(b);
  const map = new Array(256);
  let extra = 0;
  for (let b = 0; b < 256; ++b) map[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
  const rest = [...Array(256).keys()].filter((b) => !keep.includes(b));
  return { map, order: keep.concat(rest).map((b) => map[b]) };
}

const WORD = /<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+/gu;

function clipTokenizer(lines, merges) {
  const { map, order } = byteSymbols();
  const counts = new Map();  // word (symbols joined by " ") -> count
  for (const line of lines) {
    const text = line.normalize("NFC").replace(/\s+/g, " ").toLowerCase();
    for (const w of text.match(WORD) || []) {
      const syms = [...Buffer.from(w, "utf8")].map((b) => map[b]);
      syms[syms.length - 1] += "</w>";
      const key = syms.join(" ");
      counts.set(key, (counts.get(key) || 0) + 1);
    }
  }
  let words = [...counts.entries()].map(([k, n]) => [k.split(" "), n]);
  const vocab = {};
  order.forEach((s) => (vocab[s] = Object.keys(vocab).length));
  order.forEach((s) => (vocab[s + "</w>"] = Object.keys(vocab).length));
  const learnt = [];
  for (let m = 0; m < merges; ++m) {
    const pairs = new Map();
    for (const [syms, n] of words)
      for (let i = 0; i + 1 < syms.length; ++i) {
        const p = syms[i] + " " + syms[i + 1];
        pairs.set(p, (pairs.get(p) || 0) + n);
      }
    let best = null, bestN = 0;
    for (const [p, n] of pairs) if (n > bestN || (n === bestN && p < best)) { best = p; bestN = n; }
    if (best === null) break;
    const [a, b] = best.split(" ");
    if (!((a + b) in vocab)) vocab[a + b] = Object.keys(vocab).length;
    learnt.push(best);
    words = words.map(([syms, n]) => {
      const out = [];
      for (let i = 0; i < syms.length; ++i) {
        if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) { out.push(a + b); ++i; } else out.push(syms[i]);
      }
      return [out, n];
    });
  }
  const bos = Object.keys(vocab).length, eos = bos + 1;
  vocab["<|startoftext|>"] = bos;
  vocab["<|endoftext|>"] = eos;
  const special = (id, content) => ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true });
  return {
    version: "1.0", truncation: null, padding: null,
    added_tokens: [special(bos, "<|startoftext|>"), special(eos, "<|endoftext|>")],
    normalizer: { type: "Sequence", normalizers: [{ type: "NFC" }, { type: "Replace", pattern: { Regex: "\\s+" }, content: " " }, { type: "Lowercase" }] },
    pre_tokenizer: { type: "Sequence", pretokenizers: [
      { type: "Split", pattern: { Regex: WORD.source }, behavior: "Removed", invert: true },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false }] },
    post_processor: { type: "RobertaProcessing", sep: ["<|endoftext|>", eos], cls: ["<|startoftext|>", bos], trim_offsets: false, add_prefix_space: false },
    decoder: { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    model: { type: "BPE", dropout: null, unk_token: "<|endoftext|>", continuing_subword_prefix: "", end_of_word_suffix: "</w>",
             fuse_unk: false, byte_fallback: false, vocab, merges: learnt },
  };
}

module.exports = { clipTokenizer };

if (require.main === module) {
  const [file, merges, out] = process.argv.slice(2);
  if (!file || !merges || !out) {
    console.error("usage: node clip_bpe.js TEXT_FILE MERGES OUT.json");
    process.exit(2);
  }
  const lines = fs.readFileSync(file, "utf8").split("\n");
  fs.writeFileSync(out, JSON.stringify(clipTokenizer(lines, Number(merges))));
}
