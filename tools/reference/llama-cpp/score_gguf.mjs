// llama.cpp (node-llama-cpp's prebuilt CPU binaries) scoring a token sequence with a GGUF
// file: the log-probability of every next token (so the perplexity of the sequence), and a
// greedy continuation of its first PROMPT_LEN tokens. For quantized files the engine's
// numbers are compared with these (tests/gguf_llamacpp/test_llamacpp_quantized.cpp).
//
//   node score_gguf.mjs MODEL.gguf ID,ID,... PROMPT_LEN N_GREEDY OUT.json
//
// Never builds or downloads (see run_gguf.mjs). One thread, f32 KV cache, no flash attention.
import fs from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, idList, promptLen, nGreedy, outPath] = process.argv.slice(2);
const ids = idList.split(",").map(Number);
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
const context = await model.createContext({contextSize: 256, batchSize: 256, threads: 1, flashAttention: false,
                                          experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
const sequence = context.getSequence();
const allKept = {temperature: 1, topK: 0, topP: 1, minP: 0};

// Next-token log-probabilities at every position but the last.
const items = ids.map((id, i) => (i < ids.length - 1 ? [id, {generateNext: {probabilities: true, options: allKept}}] : id));
const res = await sequence.controlledEvaluate(items);
const nll = [];
for (let i = 0; i + 1 < ids.length; ++i) {
  const p = res[i].next.probabilities.get(ids[i + 1]);
  nll.push(-Math.log(p));
}
const perplexity = Math.exp(nll.reduce((a, b) => a + b, 0) / nll.length);

// Greedy from the first PROMPT_LEN tokens.
await sequence.eraseContextTokenRanges([{start: 0, end: sequence.nextTokenIndex}]);
const P = Number(promptLen);
const prompt = ids.slice(0, P);
const r0 = await sequence.controlledEvaluate(prompt.map((id, i) => (i === P - 1 ? [id, {generateNext: {token: true}}] : id)));
const greedy = [r0[P - 1].next.token];
let cur = greedy[0];
for (let k = 1; k < Number(nGreedy); ++k) {
  const r = await sequence.controlledEvaluate([[cur, {generateNext: {token: true}}]]);
  cur = r[0].next.token;
  greedy.push(cur);
}
fs.writeFileSync(outPath, JSON.stringify({nll, perplexity, greedy}));
await context.dispose();
await model.dispose();
await llama.dispose();
