// llama.cpp (node-llama-cpp's prebuilt CPU binaries) on a GGUF file: the prompt's tokens,
// the next-token log-probabilities after the prompt ids (node-llama-cpp 3.21 exposes the
// softmax of the logits at temperature 1 with every filter off, not the raw logits: the
// log of it is the logits minus their logsumexp), and a greedy continuation.
//
//   node run_gguf.mjs MODEL.gguf "prompt text" ID,ID,... N_GREEDY OUT.json
//
// Never builds or downloads: getLlama({build: "never"}) uses the binaries of the
// @node-llama-cpp/linux-x64 package pinned in package-lock.json (scripts/deps.sh runs
// npm ci with NODE_LLAMA_CPP_SKIP_DOWNLOAD=true, so the postinstall step fetches nothing).
import fs from "node:fs";
import {getLlama} from "node-llama-cpp";

const [modelPath, prompt, idList, nGreedy, outPath] = process.argv.slice(2);
const ids = idList.split(",").map(Number);
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const t0 = performance.now();
const model = await llama.loadModel({modelPath, gpuLayers: 0, useMmap: true});
const loadMs = performance.now() - t0;
// An f32 KV cache (llama.cpp defaults to f16) and no flash attention: F32 files compare at f32 precision.
const context = await model.createContext({contextSize: 64, batchSize: 64, threads: 1, flashAttention: false,
                                          experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32"});
const sequence = context.getSequence();

const promptTokens = Array.from(model.tokenize(prompt, false));
const allKept = {temperature: 1, topK: 0, topP: 1, minP: 0};
const items = ids.map((id, i) => (i === ids.length - 1 ? [id, {generateNext: {probabilities: true, options: allKept}}] : id));
const res = await sequence.controlledEvaluate(items);
const probs = res[ids.length - 1].next.probabilities;
const logprobs = [];
for (const [tok, p] of probs) logprobs[tok] = Math.log(p);
let first = 0;  // greedy: the most probable token (ties: the lowest id, as argmax in the engine)
for (let t = 1; t < logprobs.length; ++t) if (logprobs[t] > logprobs[first]) first = t;
// Continue from the prompt again with greedy sampling (temperature 0).
await sequence.eraseContextTokenRanges([{start: 0, end: sequence.nextTokenIndex}]);
const r0 = await sequence.controlledEvaluate(ids.map((id, i) => (i === ids.length - 1 ? [id, {generateNext: {token: true}}] : id)));
const greedy = [r0[ids.length - 1].next.token];
let cur = greedy[0];
for (let k = 1; k < Number(nGreedy); ++k) {
  const r = await sequence.controlledEvaluate([[cur, {generateNext: {token: true}}]]);
  cur = r[0].next.token;
  greedy.push(cur);
}
fs.writeFileSync(outPath, JSON.stringify({prompt_tokens: promptTokens, n_vocab: probs.size, argmax: first,
                                         logprobs: Array.from(logprobs), greedy, load_ms: loadMs}));
await context.dispose();
await model.dispose();
await llama.dispose();
