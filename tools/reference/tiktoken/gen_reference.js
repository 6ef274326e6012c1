// Writes tiktoken's gpt2 token ids for the GPT-2 parity test (tests/parity/
// test_parity_gpt2_tokenizer.cpp): one record per line "<input as hex>\t<ids>\n" for
//   - every line of data/tinyshakespeare.txt and data/sms-spam.tsv,
//   - every line of data/cmn-eng.tsv, and its English and Chinese columns on their own,
//   - the adversarial cases below.
// Usage: node gen_reference.js DATA_DIR OUT_FILE
//
// Invalid UTF-8: tiktoken takes a JS string, so it never sees raw bytes. For inputs with
// invalid UTF-8 the reference is "GPT-2 on bytes": each byte that is not part of a
// well-formed sequence is one code point of class "other" (as Python's surrogateescape
// gives), the pre-tokenizer pattern runs over that, and each piece is BPE-merged over
// its raw bytes with tiktoken's own ranks. Valid pieces go through tiktoken itself.
"use strict";
const fs = require("fs");
const path = require("path");
const { get_encoding } = require("tiktoken");

const enc = get_encoding("gpt2");
const [dataDir, outFile] = process.argv.slice(2);
if (!dataDir || !outFile) {
  console.error("usage: node gen_reference.js DATA_DIR OUT_FILE");
  process.exit(2);
}

// ---- strict UTF-8 decode; an invalid byte b becomes the lone surrogate U+DC00+b ------
function decodeEscaped(buf) {
  let s = "";
  let i = 0;
  let invalid = false;
  const cont = (k, lo = 0x80, hi = 0xbf) => k < buf.length && buf[k] >= lo && buf[k] <= hi;
  while (i < buf.length) {
    const b = buf[i];
    let cp = -1, len = 1;
    if (b < 0x80) cp = b;
    else if (b >= 0xc2 && b <= 0xdf && cont(i + 1)) { cp = ((b & 0x1f) << 6) | (buf[i + 1] & 0x3f); len = 2; }
    else if (b >= 0xe0 && b <= 0xef && cont(i + 1, b === 0xe0 ? 0xa0 : 0x80, b === 0xed ? 0x9f : 0xbf) && cont(i + 2)) {
      cp = ((b & 0x0f) << 12) | ((buf[i + 1] & 0x3f) << 6) | (buf[i + 2] & 0x3f); len = 3;
    } else if (b >= 0xf0 && b <= 0xf4 && cont(i + 1, b === 0xf0 ? 0x90 : 0x80, b === 0xf4 ? 0x8f : 0xbf) && cont(i + 2) && cont(i + 3)) {
      cp = ((b & 0x07) << 18) | ((buf[i + 1] & 0x3f) << 12) | ((buf[i + 2] & 0x3f) << 6) | (buf[i + 3] & 0x3f); len = 4;
    }
    if (cp < 0) { cp = 0xdc00 + b; invalid = true; }
    s += String.fromCodePoint(cp);
    i += len;
  }
  return { s, invalid };
}
function encodeEscaped(str) {
  const out = [];
  for (const ch of str) {
    const cp = ch.codePointAt(0);
    if (cp >= 0xdc80 && cp <= 0xdcff) out.push(cp - 0xdc00);
    else out.push(...Buffer.from(ch, "utf8"));
  }
  return Buffer.from(out);
}

// GPT-2's pattern in JS syntax; \s spelled out as Unicode White_Space (JS's \s differs).
const WS = "\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000";
const PAT = new RegExp(
  `'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^${WS}\\p{L}\\p{N}]+|[${WS}]+(?![^${WS}])|[${WS}]+`, "gu");

let ranks = null;
function bpeBytes(bytes) {
  if (!ranks) {
    ranks = new Map();
    // token_byte_values() is not in id order: ask tiktoken for each token's rank.
    for (const v of enc.token_byte_values())
      ranks.set(Buffer.from(v).toString("latin1"), enc.encode_single_token(new Uint8Array(v)));
  }
  const key = (a, b) => bytes.subarray(a, b).toString("latin1");
  let parts = [];
  for (let k = 0; k <= bytes.length; ++k) parts.push(k);
  const rank = (k) => (k + 2 < parts.length ? ranks.get(key(parts[k], parts[k + 2])) ?? Infinity : Infinity);
  for (;;) {
    let best = Infinity, at = -1;
    for (let k = 0; k + 2 < parts.length; ++k) { const r = rank(k); if (r < best) { best = r; at = k; } }
    if (at < 0) break;
    parts.splice(at + 1, 1);
  }
  const ids = [];
  for (let k = 0; k + 1 < parts.length; ++k) ids.push(ranks.get(key(parts[k], parts[k + 1])));
  return ids;
}

function reference(buf) {
  const { s, invalid } = decodeEscaped(buf);
  if (!invalid) return Array.from(enc.encode_ordinary(s));
  const ids = [];
  for (const m of s.matchAll(PAT)) {
    const piece = m[0];
    const bytes = encodeEscaped(piece);
    if (decodeEscaped(bytes).invalid) ids.push(...bpeBytes(bytes));
    else ids.push(...enc.encode_ordinary(piece));
  }
  return ids;
}

const adversarial = [
  "Hello world", "It's", "IT'S", "it'll they're we've I'd you'm 'S 's 't", "''s ' 's x'sy",
  "😀😃 emoji 👩‍👩‍👧 family 🇫🇷 flag", "e\u0301 combining n\u0303 a\u0300\u0301\u0302", "Zalgo: Z\u0336\u0301a\u0334l",
  "mixed Ελληνικά русский 中文 日本語 한국어 العربية עברית हिन्दी", "   leading", "trailing   ", "a    b", "\n\n\nx",
  "x\n\n", " \n \n ", "\t\ttab\t", "\r\n windows\r\n", "1234567890 3.14159 1,000,000 ١٢٣ ½ Ⅻ", "a1b2c3",
  "\u00a0nbsp\u00a0 \u3000ideo\u2003em", "\u0085nel\u2028ls", "\u200bzero\u200dwidth\ufeffbom", "!!!???...,,,;;;",
  " !!", "$$$ %%% ^^^", "<|endoftext|", "a" + " ".repeat(100) + "b", "x".repeat(300), "-".repeat(500),
  "🦀".repeat(40), "\u{10FFFF}\u{E000}", "",
].map((t) => Buffer.from(t, "utf8"));
// Raw byte cases: invalid UTF-8 (lone continuation, truncated sequences, overlong,
// surrogate, > U+10FFFF, 0xFF) and NUL bytes.
adversarial.push(
  Buffer.from([0x80]), Buffer.from([0x61, 0xff, 0x62]), Buffer.from([0xc3]), Buffer.from([0xe2, 0x82, 0x20, 0x61]),
  Buffer.from([0xc0, 0xaf, 0x41]), Buffer.from([0xed, 0xa0, 0x80, 0x20, 0x41]), Buffer.from([0xf4, 0x90, 0x80, 0x80]),
  Buffer.from([0x20, 0xfe, 0xfe, 0x20, 0x68, 0x69]), Buffer.from([0x68, 0x69, 0xc3, 0x28, 0x27, 0x73]),
  Buffer.from([0x00]), Buffer.from([0x61, 0x00, 0x62, 0x20, 0x00, 0x00]), Buffer.from("caf\xe9 na\xefve", "latin1"),
  Buffer.from([0xf0, 0x9f, 0x98]), Buffer.from([0xe4, 0xb8, 0xad, 0xe6, 0x96]),
);

const out = fs.createWriteStream(outFile);
let count = 0;
function emit(buf) {
  out.write(buf.toString("hex") + "\t" + reference(buf).join(" ") + "\n");
  ++count;
}
function lines(file) {
  const buf = fs.readFileSync(path.join(dataDir, file));
  const res = [];
  let start = 0;
  for (let i = 0; i <= buf.length; ++i) {
    if (i === buf.length || buf[i] === 0x0a) {
      if (i > start || i < buf.length) res.push(buf.subarray(start, i));
      start = i + 1;
    }
  }
  return res;
}
for (const f of ["tinyshakespeare.txt", "sms-spam.tsv"]) lines(f).forEach(emit);
for (const line of lines("cmn-eng.tsv")) {
  emit(line);
  const cols = line.toString("latin1").split("\t");
  for (const c of cols.slice(0, 2)) emit(Buffer.from(c, "latin1"));
}
adversarial.forEach(emit);
out.end(() => console.log(`wrote ${count} reference encodings to ${outFile}`));
