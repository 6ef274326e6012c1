// Encodes every stdin line with Hugging Face `tokenizers` and prints its ids, one line per
// input (no special tokens): the reference for a tokenizer.json we wrote ourselves.
// Usage: node encode_lines.js TOKENIZER_JSON < lines
"use strict";
const fs = require("fs");
const { Tokenizer } = require("tokenizers");

(async () => {
  const t = Tokenizer.fromFile(process.argv[2]);
  const lines = fs.readFileSync(0, "utf8").split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  const out = [];
  for (const e of await t.encodeBatch(lines, { addSpecialTokens: false })) out.push(e.getIds().join(" "));
  process.stdout.write(out.join("\n") + (out.length ? "\n" : ""));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
