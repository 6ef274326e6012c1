// tfm serve's side of the prompt-cache benchmark (bench/server/prompt_cache.sh): time to first
// token of streamed /v1/completions whose prompts share a long prefix. Round 0 is cold (the
// prefix is new to the server); rounds 1.. change only the question after it. One JSON line:
//   {"engine": "tfm serve", "cold_ms": .., "cached_ms": [..], "cached_tokens": [..]}
//   node prompt_cache_client.mjs --url URL --prefix-chars 2000 --rounds 5
import { parseArgs } from "./stats.mjs";
import { prefixPrompts } from "./prompt_cache_prompts.mjs";

const a = parseArgs(process.argv, { url: "", "prefix-chars": 2000, rounds: 5 });
const prompts = prefixPrompts(a["prefix-chars"], a.rounds + 1);

async function ttft(prompt) {
  const start = performance.now();
  const res = await fetch(`${a.url}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  let first = 0, cached = -1, buf = "";
  const decoder = new TextDecoder();
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) {
      const line = buf.slice(0, i);
      if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
      const j = JSON.parse(line.slice(6));
      if (!first && j.choices.length && j.choices[0].text) first = performance.now();
      if (j.usage) cached = j.usage.prompt_tokens_details.cached_tokens;
    }
  }
  return { ms: first - start, cached };
}

await ttft("warm-up: touch the weights once");
const cold = await ttft(prompts[0]);
const rest = [];
for (let r = 1; r <= a.rounds; r++) rest.push(await ttft(prompts[r]));
console.log(JSON.stringify({ engine: "tfm serve", cold_ms: cold.ms, cold_cached_tokens: cold.cached,
                             cached_ms: rest.map((x) => x.ms), cached_tokens: rest.map((x) => x.cached) }));
