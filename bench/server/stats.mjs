// What the server benchmark reports for one round of S concurrent streams, the same for both
// engines (bench/server/stream_clients.mjs for tfm serve, tools/reference/llama-cpp/
// bench_parallel.mjs for llama.cpp). Each stream gives its start time and the arrival time of
// every generated token (ms, one clock):
//   throughput   all streams' generated tokens / (last token of any stream - the common start)
//   ttft         first token - the stream's start (p50, max over streams)
//   itl          gaps between consecutive tokens of a stream, pooled over streams (p50, p99)
export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));  // nearest rank
  return sorted[i];
}

export function summarize(engine, streams) {
  const t0 = Math.min(...streams.map((s) => s.start));
  const end = Math.max(...streams.map((s) => s.tokens[s.tokens.length - 1]));
  const total = streams.reduce((n, s) => n + s.tokens.length, 0);
  const ttft = streams.map((s) => s.tokens[0] - s.start).sort((a, b) => a - b);
  const gaps = [];
  for (const s of streams) for (let i = 1; i < s.tokens.length; i++) gaps.push(s.tokens[i] - s.tokens[i - 1]);
  gaps.sort((a, b) => a - b);
  return {
    engine, streams: streams.length, tokens: total, wall_s: (end - t0) / 1000,
    tokens_per_s: total / ((end - t0) / 1000),
    ttft_ms_p50: percentile(ttft, 50), ttft_ms_max: ttft[ttft.length - 1],
    itl_ms_p50: percentile(gaps, 50), itl_ms_p99: percentile(gaps, 99),
  };
}

// The S prompts of a round: distinct texts of `chars` ASCII characters (the benchmark model's
// vocabulary is byte tokens, so a character is a token in both engines).
export function prompts(count, chars) {
  const words = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "and", "runs", "far", "away"];
  const out = [];
  for (let k = 0; k < count; k++) {
    let t = `Stream ${k}:`;
    for (let i = 0; t.length < chars; i++) t += " " + words[(k * 7 + i * 3) % words.length];
    out.push(t.slice(0, chars));
  }
  return out;
}

export function parseArgs(argv, defaults) {
  const a = { ...defaults };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "");
    if (!(k in defaults)) throw new Error(`unknown option --${k}; allowed: ${Object.keys(defaults).map((d) => "--" + d).join(", ")}`);
    a[k] = typeof defaults[k] === "number" ? Number(argv[i + 1]) : argv[i + 1];
  }
  return a;
}
