// llama.cpp's load of a GGUF file (node-llama-cpp, CPU, mmap as llama.cpp defaults): time to
// load the model, and to evaluate one token after it (which touches every weight page).
//   node bench_load.mjs MODEL.gguf      prints: load_s first_token_s
import {getLlama} from "node-llama-cpp";

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const t0 = performance.now();
const model = await llama.loadModel({modelPath: process.argv[2], gpuLayers: 0});
const t1 = performance.now();
const context = await model.createContext({contextSize: 64, batchSize: 8, threads: 2});
const seq = context.getSequence();
await seq.controlledEvaluate([[model.tokens.bos ?? 0, {generateNext: {token: true}}]]);
const t2 = performance.now();
console.log(((t1 - t0) / 1000).toFixed(3), ((t2 - t0) / 1000).toFixed(3));
await context.dispose();
await model.dispose();
await llama.dispose();
