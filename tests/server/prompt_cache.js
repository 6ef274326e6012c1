// The prompt cache through the official client: a long shared system prompt is read from the
// cache by later requests (usage.prompt_tokens_details.cached_tokens), and their answers are
// the answers without the cache, streamed or not; /slots saves the cache to a file of
// --slot-save-path, erases and restores it, and refuses file names that leave that directory.
// Run by structured_output.sh:
//   node prompt_cache.js URL URL_WITHOUT_CACHE OPENAI_PACKAGE_DIR SLOT_DIR
'use strict';
const assert = require('assert/strict');
const path = require('path');

const fs = require('fs');
const [URL, PLAIN, PKG, SLOTS] = process.argv.slice(2);
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
  // /slots: save, erase, restore.
  const post = async (url, body) => {
    const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
    return { status: r.status, json: await r.json() };
  };
  const saved = await post(URL + '/slots/0?action=save', { filename: 'system.bin' });
  eq(saved.status, 200, `save: ${JSON.stringify(saved.json)}`);
  ok(saved.json.n_saved >= 320 && saved.json.n_written > 0 && fs.existsSync(`${SLOTS}/system.bin`), 'saved to the directory');
  const erased = await post(URL + '/slots/1?action=erase', {});
  ok(erased.status === 200 && erased.json.n_erased > 0, `erase: ${JSON.stringify(erased.json)}`);
  const want = await plain.chat.completions.create(ask('Over what?', 2));
  const after = await client.chat.completions.create(ask('Over what?', 2));
  eq(after.usage.prompt_tokens_details.cached_tokens, 0, 'nothing cached after erase');
  await post(URL + '/slots/0?action=erase', {});
  const restored = await post(URL + '/slots/1?action=restore', { filename: 'system.bin' });
  ok(restored.status === 200 && restored.json.n_restored === saved.json.n_saved, `restore: ${JSON.stringify(restored.json)}`);
  const again = await client.chat.completions.create(ask('Over what?', 2));
  ok(again.usage.prompt_tokens_details.cached_tokens > 300, `restored blocks used (${again.usage.prompt_tokens_details.cached_tokens})`);
  eq(again.choices[0].message.content, want.choices[0].message.content, 'restored cache == uncached');
  // File names that would leave the directory, and other bad requests.
  for (const filename of ['../escape.bin', '/tmp/escape.bin', 'a/b', '.hidden', '', 'x'.repeat(200), 'a\\b', '..']) {
    const r = await post(URL + '/slots/0?action=save', { filename });
    eq([r.status, r.json.error.param], [400, 'filename'], `filename ${JSON.stringify(filename)}`);
  }
  ok(!fs.existsSync(`${SLOTS}/../escape.bin`), 'nothing written outside the directory');
  const missing = await post(URL + '/slots/0?action=restore', { filename: 'nope.bin' });
  ok(missing.status === 400 && !missing.json.error.message.includes(SLOTS), `a missing file, the directory not shown: ${missing.json.error.message}`);
  fs.writeFileSync(`${SLOTS}/junk.bin`, 'not a cache');
  const junk = await post(URL + '/slots/0?action=restore', { filename: 'junk.bin' });
  ok(junk.status === 400 && junk.json.error.message.includes('not a tfm prompt-cache file'), `junk: ${junk.json.error.message}`);
  eq((await post(URL + '/slots/99?action=save', { filename: 'x.bin' })).json.error.param, 'id_slot', 'slot out of range');
  eq((await post(URL + '/slots/0?action=dump', { filename: 'x.bin' })).json.error.param, 'action', 'unknown action');
  eq((await post(PLAIN + '/slots/0?action=save', { filename: 'x.bin' })).status, 501, 'no --slot-save-path: 501');
  console.log(`prompt cache: ${checks} checks passed`);
})().catch((e) => {
  console.error('FAIL:', e.message || e);
  process.exit(1);
});
