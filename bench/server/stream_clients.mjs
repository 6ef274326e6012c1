// The tfm serve side of the server benchmark (bench/server/bench_server.sh): S clients each
// stream one POST /v1/completions at once (stream: true, greedy, exactly --tokens tokens:
// ignore_eos) and time every server-sent event that carries text. Prints one JSON line per
// round (bench/server/stats.mjs); fails when a stream returns fewer tokens than asked.
//   node stream_clients.mjs --url http://127.0.0.1:PORT --streams 1,4,16 --tokens 64 --prompt-chars 32 --rounds 2
import { parseArgs, prompts, summarize } from "./stats.mjs";

const a = parseArgs(process.argv, { url: "", streams: "1,4,16", tokens: 64, "prompt-chars": 32, rounds: 2, "api-key": "" });

async function stream(prompt, tokens) {
  const s = { start: performance.now(), tokens: [] };
  const headers = { "Content-Type": "application/json" };
  if (a["api-key"]) headers.Authorization = "Bearer " + a["api-key"];
  const resp = await fetch(a.url + "/v1/completions", {
    method: "POST", headers,
    body: JSON.stringify({ prompt, max_tokens: tokens, temperature: 0, stream: true, ignore_eos: true }),
  });
  if (!resp.ok) throw new Error(`HTTP ${resp.status}: ${await resp.text()}`);
  const decoder = new TextDecoder();
  let buf = "", usage = null;
  for await (const bytes of resp.body) {
    const now = performance.now();
    buf += decoder.decode(bytes, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut).trim();
      buf = buf.slice(cut + 2);
      if (!event.startsWith("data:")) continue;
      const data = event.slice(5).trim();
      if (data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      if (chunk.usage) usage = chunk.usage;
      // One event per generated token (a token that ends inside a UTF-8 character is held
      // back by the server and sent with the next, which the count check below would show).
      if (chunk.choices && chunk.choices[0] && chunk.choices[0].text) s.tokens.push(now);
    }
  }
  if (s.tokens.length !== tokens) throw new Error(`a stream returned ${s.tokens.length} text events, asked for ${tokens}`);
  if (usage && usage.completion_tokens !== tokens) throw new Error(`usage.completion_tokens ${usage.completion_tokens} != ${tokens}`);
  return s;
}

async function round(S, tokens) {
  const texts = prompts(S, a["prompt-chars"]);
  return summarize("tfm serve", await Promise.all(texts.map((t) => stream(t, tokens))));
}

await round(1, 8);  // warm-up
for (const S of a.streams.split(",").map(Number)) {
  for (let r = 0; r < a.rounds; r++) console.log(JSON.stringify({ ...(await round(S, a.tokens)), round: r }));
}
