// llama.cpp's greedy decode speed with and without prompt-lookup drafting (node-llama-cpp's
// InputLookupTokenPredictor, the prebuilt CPU build), one sequence: the peer of
// bench/server/speculative.sh. Its predictor looks for the last tokens in the prompt only.
//   node bench_speculative.mjs MODEL.gguf THREADS TOKENS REPS PROMPT   prints one JSON line
// tokens/s = TOKENS / time of generating them after the prompt (prefill untimed); best of REPS.
import {getLlama, InputLookupTokenPredictor} from "node-llama-cpp";

const [modelPath, threadsArg, tokensArg, repsArg, prompt] = process.argv.slice(2);
const threads = Number(threadsArg), n = Number(tokensArg), reps = Number(repsArg);
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const promptTokens = model.tokenize(prompt);
const results = {};
for (const [name, predictor] of [["plain", null], ["lookup", () => new InputLookupTokenPredictor()]]) {
  let best = Infinity, text = "";
  for (let r = 0; r <= reps; ++r) {  // the first run warms up
    const context = await model.createContext({contextSize: 512, threads, flashAttention: false});
    const seq = context.getSequence(predictor ? {tokenPredictor: predictor()} : {});
    const out = [];
    let t0 = 0;
    for await (const t of seq.evaluate(promptTokens, {temperature: 0})) {
      if (out.length === 0) t0 = performance.now();  // the first token ends the prefill
      out.push(t);
      if (out.length > n) break;
    }
    const secs = (performance.now() - t0) / 1000;
    if (r > 0) best = Math.min(best, secs);
    text = model.detokenize(out.slice(0, n + 1));
    await context.dispose();
  }
  results[name] = n / best;
  results[name + " text"] = text;
}
console.log(JSON.stringify({threads, tokens: n, results}));
