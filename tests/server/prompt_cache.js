// The prompt cache through the official client: a long shared system prompt is read from the
// cache by later requests (usage.prompt_tokens_details.cached_tokens), and their answers are
// the answers without the cache, streamed or not. Run by structured_output.sh:
//   node prompt_cache.js URL URL_WITHOUT_CACHE OPENAI_PACKAGE_DIR
'use strict';
const assert = require('assert/strict');
const path = require('path');

const [URL, PLAIN, PKG] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const client = new OpenAI({ baseURL: URL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const plain = new OpenAI({ baseURL: PLAIN + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
let checks = 0;
const ok = (cond, msg) => { assert.ok(cond, msg); ++checks; };
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };

(async () => {
  const model = (await client.models.list()).data[0].id;
  const system = 'You answer questions about the following text. ' + 'The quick brown fox jumps over the lazy dog. '.repeat(40);
  const ask = (q, seed) => ({ model, seed, max_tokens: 12, temperature: 1,
                              messages: [{ role: 'system', content: system }, { role: 'user', content: q }] });
  const first = await client.chat.completions.create(ask('Who jumps?', 1));
  eq(first.usage.prompt_tokens_details.cached_tokens, 0, 'a new prompt reads nothing from the cache');
  ok(first.usage.prompt_tokens > 400, `a long prompt (${first.usage.prompt_tokens} tokens)`);
  for (const [q, seed] of [['Who jumps?', 1], ['Over what?', 2], ['What colour is the fox?', 3]]) {
    const r = await client.chat.completions.create(ask(q, seed));
    const cached = r.usage.prompt_tokens_details.cached_tokens;
    ok(cached >= r.usage.prompt_tokens - 128 && cached < r.usage.prompt_tokens, `${q}: ${cached} of ${r.usage.prompt_tokens} cached`);
    const want = await plain.chat.completions.create(ask(q, seed));
    eq(want.usage.prompt_tokens_details.cached_tokens, 0, '--cache-ram 0 caches nothing');
    eq(r.choices[0].message.content, want.choices[0].message.content, `${q}: cached == uncached`);
    let streamed = '';
    for await (const c of await client.chat.completions.create({ ...ask(q, seed), stream: true }))
      for (const ch of c.choices) streamed += ch.delta.content || '';
    eq(streamed, want.choices[0].message.content, `${q}: streamed from the cache == uncached`);
  }
  console.log(`prompt cache: ${checks} checks passed`);
})().catch((e) => {
  console.error('FAIL:', e.message || e);
  process.exit(1);
});
