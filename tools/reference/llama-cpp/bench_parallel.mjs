// llama.cpp's side of the server benchmark (bench/server/bench_server.sh): S streams decoding at
// once in one context with S sequences — node-llama-cpp batches the pending tokens of all
// sequences into one llama_decode per step, as llama-server's parallel slots do. Each stream
// evaluates its prompt and then takes exactly --tokens greedy tokens (EOS is not a stop here:
// the figure is decode speed). Prints one JSON line per round (bench/server/stats.mjs).
//   node bench_parallel.mjs --model F.gguf --streams 1,4,16 --tokens 64 --prompt-chars 32 --threads 2 --rounds 2
import { getLlama } from "node-llama-cpp";
import { parseArgs, prompts, summarize } from "../../../bench/server/stats.mjs";

const a = parseArgs(process.argv, { model: "", streams: "1,4,16", tokens: 64, "prompt-chars": 32, threads: 2, rounds: 2 });
const llama = await getLlama({ gpu: false, build: "never", progressLogs: false, logLevel: "error" });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });

async function round(S, tokens) {
  const context = await model.createContext({
    sequences: S, contextSize: S * (a["prompt-chars"] + tokens + 16), batchSize: 512,
    threads: { ideal: a.threads, min: a.threads }, batching: { dispatchSchedule: "nextTick", itemPrioritizationStrategy: "maximumParallelism" },
  });
  const texts = prompts(S, a["prompt-chars"]);
  const run = async (k) => {
    const seq = context.getSequence();
    const input = model.tokenize(texts[k]);
    const s = { start: performance.now(), tokens: [] };
    for await (const _token of seq.evaluate(input, { temperature: 0 })) {
      s.tokens.push(performance.now());
      if (s.tokens.length >= tokens) break;
    }
    return s;
  };
  const streams = await Promise.all(Array.from({ length: S }, (_, k) => run(k)));
  await context.dispose();
  return summarize("llama.cpp", streams);
}

await round(1, 8);  // warm-up: first touch of the weights
for (const S of a.streams.split(",").map(Number)) {
  for (let r = 0; r < a.rounds; r++) console.log(JSON.stringify({ ...(await round(S, a.tokens)), round: r }));
}
await model.dispose();
await llama.dispose();
