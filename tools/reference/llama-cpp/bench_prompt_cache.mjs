// llama.cpp's side of the prompt-cache benchmark (bench/server/prompt_cache.sh), as llama-server
// keeps a slot's prompt: one context sequence; each new prompt keeps the tokens it shares with
// what the sequence holds, erases the rest and evaluates only its own tail. Time to first token
// of each round (round 0 cold). One JSON line, as bench/server/prompt_cache_client.mjs.
//   node bench_prompt_cache.mjs --model F.gguf --prefix-chars 2000 --rounds 5 --threads 2
import { getLlama } from "node-llama-cpp";
import { parseArgs } from "../../../bench/server/stats.mjs";
import { prefixPrompts } from "../../../bench/server/prompt_cache_prompts.mjs";

const a = parseArgs(process.argv, { model: "", "prefix-chars": 2000, rounds: 5, threads: 2 });
const llama = await getLlama({ gpu: false, build: "never", progressLogs: false, logLevel: "error" });
const model = await llama.loadModel({ modelPath: a.model, gpuLayers: 0 });
const context = await model.createContext({ sequences: 1, contextSize: a["prefix-chars"] + 128, batchSize: 512,
                                            threads: { ideal: a.threads, min: a.threads } });
const seq = context.getSequence();

async function ttft(text) {
  const start = performance.now();
  const tokens = model.tokenize(text);
  const held = seq.contextTokens;
  let keep = 0;
  while (keep < held.length && keep < tokens.length - 1 && held[keep] === tokens[keep]) ++keep;
  if (keep < seq.nextTokenIndex) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
  for await (const _t of seq.evaluate(tokens.slice(keep), { temperature: 0 })) return { ms: performance.now() - start, cached: keep };
}

const prompts = prefixPrompts(a["prefix-chars"], a.rounds + 1);
await ttft("warm-up: touch the weights once");
await seq.clearHistory();
const cold = await ttft(prompts[0]);
const rest = [];
for (let r = 1; r <= a.rounds; r++) rest.push(await ttft(prompts[r]));
console.log(JSON.stringify({ engine: "llama.cpp", cold_ms: cold.ms, cold_cached_tokens: cold.cached,
                             cached_ms: rest.map((x) => x.ms), cached_tokens: rest.map((x) => x.cached) }));
await context.dispose();
await model.dispose();
await llama.dispose();
