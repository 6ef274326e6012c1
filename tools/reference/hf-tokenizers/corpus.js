// The parity corpus shared by gen_reference.js and bench.js: every line of the built-in data
// (tinyshakespeare, cmn-eng and sms-spam, and each column of the .tsv files on its own) plus
// an adversarial set. stride > 1 keeps every stride-th data line (the CI subset), always
// all the adversarial cases.
"use strict";
const fs = require("fs");
const path = require("path");

const adversarial = [
  "", " ", "  ", "\t", "\n", "\r\n", "a\r\nb\r\n", "\n\n\n", " \n \n ", "\t\t  \t", "x    y", "end   ",
  "   start", "tab\there", "line1\nline2\n\nline4", "e\u0301 e\u0301\u0301 a\u0308\u0304 \u1100\u1161\u11a8",
  "Cafe\u0301 na\u00efve r\u00e9sum\u00e9 \u00c5ngstr\u00f6m \u212b", "\ufb01nance \u2460 \uff21\uff22 \u00bd \u2163",
  "\ud83d\udc4d \ud83d\udc68\u200d\ud83d\udc69\u200d\ud83d\udc67\u200d\ud83d\udc66 \ud83c\uddfa\ud83c\uddf8 \ud83d\udc4b\ud83c\udffd x\u200dy",
  "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22",
  "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645 \u0661\u0662\u0663", "\u05e9\u05dc\u05d5\u05dd abc \u05e2\u05d5\u05dc\u05dd",
  "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u0395\u039b\u039b\u0397\u039d\u0399\u039a\u0391 \u03c3\u03c2\u03a3",
  "\u4f60\u597d\uff0c\u4e16\u754c\uff01 \u3053\u3093\u306b\u3061\u306f \ud55c\uad6d\uc5b4 \u20ac100 \u00a5200",
  "1234567890123456789012345678901234567890", "3.14159 2,718 1e10 0x1F -42 +7 100%", "\u0661\u0662\u0663\u0664 \u0967\u0968\u0969 \u2155",
  "<s> </s> <unk> <pad> [CLS] [SEP] [MASK] [UNK] [PAD] <|endoftext|> <|begin_of_text|> <|im_start|> <|im_end|>",
  "<s>hello</s>", "a<s>b", "<|begin_of_text|>Hi<|eot_id|>", "<|im_start|>user\nHello<|im_end|>\n", "[CLS]x[SEP]",
  "<0x41> <0xZZ> \u2581 \u2581\u2581x \u0120 \u010a", "'s 'S 'll 'LL 'Re n't I'M you've", "don't DON'T it's",
  "!!!??? ... --- *** ((())) {}[]", "http://example.com/a?b=c&d=e#f", "user@example.com", "C++ #include <vector>",
  "\u00a0nbsp\u00a0\u2003em\u2003\u3000ideo\u3000", "zero\u200bwidth\u200cnon\u200djoin\ufeffbom", "\u0000nul\u0001ctl\u007fdel",
  "\ufffd replacement \ufffd\ufffd", "\ud835\udd73\ud835\udd8a\ud835\udd91\ud835\udd91\ud835\udd94 \ud800\udf00\ud800\udf01",
  "A".repeat(300), "ab".repeat(200), " ".repeat(100) + "x", "\u4e2d".repeat(50), "\ud83d\ude00".repeat(20),
  "MiXeD CaSe WoRdS", "\u0130stanbul \u0131\u0307 \u1e9e \u00df", "tr\u00e8s \u00e9l\u00e9gant \u00ea\u0302",
];

function corpus(dataDir, stride = 1) {
  const out = [];
  const add = (line, k) => { if (k % stride === 0) out.push(line); };
  for (const name of ["tinyshakespeare.txt", "cmn-eng.tsv", "sms-spam.tsv"]) {
    const lines = fs.readFileSync(path.join(dataDir, name), "utf8").split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    lines.forEach((line, k) => {
      add(line, k);
      if (name.endsWith(".tsv")) for (const col of line.split("\t")) add(col, k);
    });
  }
  return out.concat(adversarial);
}

module.exports = { corpus, adversarial };
