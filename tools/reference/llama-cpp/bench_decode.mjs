// llama.cpp's decode and prefill speed on a GGUF file (node-llama-cpp's prebuilt CPU build),
// with the protocol of `tfm bench decode` (bench/cli/cmd_bench_decode.cpp):
//   decode B:  B sequences of 8 random tokens, each prefilled alone (untimed), then STEPS
//              greedy steps of all B together (one token per sequence per step, queued at
//              once so llama.cpp batches them). tokens/s = B * STEPS / time.
//   prefill P: one prompt of P random tokens in one call. tokens/s = P / time.
// Best of REPS runs after a warm-up run. F16 KV cache (llama.cpp's default), no flash attention.
//
//   node bench_decode.mjs MODEL.gguf THREADS STEPS REPS [quick]   prints one JSON line
// quick: decode b=1 only.
import {getLlama} from "node-llama-cpp";

const [modelPath, threadsArg, stepsArg, repsArg] = process.argv.slice(2);
const threads = Number(threadsArg), steps = Number(stepsArg), reps = Number(repsArg ?? 3);
const quick = process.argv[6] === "quick";
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
// Random ids below 256 (byte tokens in every GPT-2-style vocabulary; speed does not depend on them).
const nVocab = 256;
let seed = 7;
const randomTokens = (n) => Array.from({length: n}, () => {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed % nVocab;
});
const greedy = {generateNext: {token: true}};
const results = {};

async function best(fn) {
  await fn();
  let b = Infinity;
  for (let r = 0; r < reps; ++r) b = Math.min(b, await fn());
  return b;
}

for (const B of quick ? [1] : [1, 8]) {
  const context = await model.createContext({contextSize: 64 * B, sequences: B, batchSize: 64, threads, flashAttention: false});
  const seqs = Array.from({length: B}, () => context.getSequence());
  const secs = await best(async () => {
    const next = [];
    for (const s of seqs) {
      await s.clearHistory();
      const p = randomTokens(8);
      const r = await s.controlledEvaluate(p.map((t, i) => (i === p.length - 1 ? [t, greedy] : t)));
      next.push(r[p.length - 1].next.token);
    }
    const t0 = performance.now();
    for (let k = 0; k < steps; ++k) {
      const rs = await Promise.all(seqs.map((s, i) => s.controlledEvaluate([[next[i], greedy]])));
      rs.forEach((r, i) => { next[i] = r[0].next.token; });
    }
    return (performance.now() - t0) / 1000;
  });
  results[`decode b=${B}`] = (B * steps) / secs;
  await context.dispose();
}
for (const P of quick ? [] : [128, 512]) {
  const context = await model.createContext({contextSize: P + 8, batchSize: P, threads, flashAttention: false});
  const s = context.getSequence();
  const secs = await best(async () => {
    await s.clearHistory();
    const p = randomTokens(P);
    const t0 = performance.now();
    await s.controlledEvaluate(p.map((t, i) => (i === P - 1 ? [t, greedy] : t)));
    return (performance.now() - t0) / 1000;
  });
  results[`prefill ${P}`] = P / secs;
  await context.dispose();
}
console.log(JSON.stringify({threads, steps, results}));
await model.dispose();
await llama.dispose();
