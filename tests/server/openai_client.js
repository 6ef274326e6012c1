// tfm serve against the official `openai` npm client (and raw fetch for what the client
// cannot send). Run by serve_test.sh:
//   node openai_client.js MAIN_URL SMALL_URL API_KEY EXPECTED_FILE OPENAI_PACKAGE_DIR
// MAIN: --parallel 4 --queue 64 --prefill-chunk 16 --api-key KEY; SMALL: --parallel 1 --queue 1.
'use strict';
const assert = require('assert/strict');
const fs = require('fs');
const path = require('path');

const [MAIN, SMALL, KEY, EXPECTED_FILE, PKG] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const client = new OpenAI({ baseURL: MAIN + '/v1', apiKey: KEY, maxRetries: 0, timeout: 60000 });
const small = new OpenAI({ baseURL: SMALL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60000 });
let checks = 0;
const ok = (cond, msg) => { assert.ok(cond, msg); ++checks; };
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };

// The sampling settings `tfm generate --temp 1 --top-k 0 --top-p 1 --min-p 0` uses.
const plain = { temperature: 1, top_p: 1 };

async function collect(stream) {
  let text = '', finish = null, usage = null, chunks = 0;
  for await (const c of stream) {
    ++chunks;
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text += ch.text !== undefined ? ch.text : (ch.delta.content || '');
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return { text, finish, usage, chunks };
}

async function api() {
  const models = await client.models.list();
  eq(models.data.length, 1, 'one model');
  ok(typeof models.data[0].id === 'string' && models.data[0].object === 'model', 'model object');

  // Completions: the CLI's tokens for the same prompt, seed and sampling (one inference path).
  const expected = fs.readFileSync(EXPECTED_FILE, 'utf8');
  const req = { model: 'tiny', prompt: 'ROMEO:', max_tokens: 24, seed: 7, ...plain };
  const a = await client.completions.create(req);
  eq(a.object, 'text_completion');
  eq(a.choices[0].text, expected, 'server text == tfm generate text');
  eq(a.usage.prompt_tokens, 6);
  eq(a.timings.predicted_n, a.usage.completion_tokens, 'llama-server timings');
  ok(a.timings.prompt_ms >= 0 && a.timings.predicted_ms >= 0, 'timings are durations');
  eq(a.usage.total_tokens, a.usage.prompt_tokens + a.usage.completion_tokens);
  ok(['stop', 'length'].includes(a.choices[0].finish_reason), 'finish_reason');
  // seed reproducibility, and streaming gives the same text
  eq((await client.completions.create(req)).choices[0].text, a.choices[0].text, 'same seed, same text');
  const s = await collect(await client.completions.create({ ...req, stream: true }));
  eq(s.text, a.choices[0].text, 'streamed text == whole text');
  eq(s.finish, a.choices[0].finish_reason);
  // another seed, another text (24 sampled characters from a near-uniform model)
  ok((await client.completions.create({ ...req, seed: 8 })).choices[0].text !== a.choices[0].text, 'seed matters');
  // max_tokens
  const short = await client.completions.create({ ...req, max_tokens: 5 });
  eq(short.usage.completion_tokens, 5);
  eq(short.choices[0].finish_reason, 'length');
  eq(short.choices[0].text, a.choices[0].text.slice(0, 5), 'a prefix of the longer run');
  // stop strings: the text is cut before the first one, finish_reason "stop"
  const full = a.choices[0].text;
  const stop = full.slice(10, 12);
  const st = await client.completions.create({ ...req, stop: [stop] });
  eq(st.choices[0].text, full.slice(0, full.indexOf(stop)), 'cut before the stop string');
  eq(st.choices[0].finish_reason, 'stop');
  const sst = await collect(await client.completions.create({ ...req, stop, stream: true }));
  eq(sst.text, st.choices[0].text, 'streamed stop');
  // n > 1: choice 0 is the n = 1 result; the others are their own streams
  const multi = await client.completions.create({ ...req, n: 3 });
  eq(multi.choices.length, 3);
  eq(multi.choices.map((c) => c.index), [0, 1, 2]);
  eq(multi.choices[0].text, full, 'choice 0 == n=1');
  ok(multi.choices[1].text !== full && multi.choices[2].text !== multi.choices[1].text, 'choices differ');
  // logprobs
  const lp = await client.completions.create({ ...req, max_tokens: 6, logprobs: 3 });
  const L = lp.choices[0].logprobs;
  eq(L.tokens.length, 6);
  eq(L.tokens.join(''), lp.choices[0].text);
  ok(L.token_logprobs.every((x) => x <= 0), 'log-probabilities <= 0');
  ok(L.top_logprobs.every((t) => Object.keys(t).length === 3), 'three alternatives');
  ok(L.top_logprobs.every((t, i) => Math.max(...Object.values(t)) >= L.token_logprobs[i]), 'best >= chosen');
  const lsum = L.top_logprobs.map((t) => Object.values(t).reduce((x, y) => x + Math.exp(y), 0));
  ok(lsum.every((x) => x <= 1 + 1e-9), 'probabilities sum <= 1');

  // Chat completions, with the template of the model's tokenizer_config.json (serve_test.sh):
  // "user: Hello | assistant:" is 24 characters, 24 tokens of the character tokenizer.
  const creq = { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 16, seed: 3, ignore_eos: true, ...plain };
  const c = await client.chat.completions.create(creq);
  eq(c.object, 'chat.completion');
  eq(c.choices[0].message.role, 'assistant');
  ok(c.choices[0].message.content.length > 0, 'chat reply not empty');
  eq(c.usage.prompt_tokens, 24, 'the model\'s chat template');
  const viaCompletion = await client.completions.create({ ...creq, messages: undefined, prompt: 'user: Hello | assistant:' });
  eq(c.choices[0].message.content, viaCompletion.choices[0].text, 'chat == completion of the rendered prompt');
  const cs = await collect(await client.chat.completions.create({ ...creq, stream: true, stream_options: { include_usage: true } }));
  eq(cs.text, c.choices[0].message.content, 'streamed chat == whole chat');
  // The same prompt again: its first whole prefill chunk (16 of 24 tokens) comes from the prompt cache.
  eq({ ...cs.usage, prompt_tokens_details: undefined }, { ...c.usage, prompt_tokens_details: undefined }, 'usage chunk');
  eq(cs.usage.prompt_tokens_details.cached_tokens, 16, 'the prompt cache (--prefill-chunk 16)');
  const cl = await client.chat.completions.create({ ...creq, max_tokens: 4, ignore_eos: true, logprobs: true, top_logprobs: 2 });
  eq(cl.choices[0].logprobs.content.length, 4);
  ok(cl.choices[0].logprobs.content.every((t) => t.top_logprobs.length === 2), 'chat top_logprobs');
  const cn = await client.chat.completions.create({ ...creq, n: 2 });
  eq(cn.choices[0].message.content, c.choices[0].message.content, 'chat choice 0 == n=1');

  // Embeddings: the client asks for base64 by default; float gives the same numbers
  const e = await client.embeddings.create({ model: 'tiny', input: ['To be', 'or not'] });
  eq(e.data.length, 2);
  eq(e.data[0].embedding.length, 32, 'd_model values');
  const ef = await client.embeddings.create({ model: 'tiny', input: ['To be', 'or not'], encoding_format: 'float' });
  for (let i = 0; i < 2; ++i)
    ok(ef.data[i].embedding.every((x, k) => Math.fround(x) === e.data[i].embedding[k] || Math.abs(x - e.data[i].embedding[k]) < 1e-6 * Math.abs(x)), 'base64 == float');
  ok(e.data[0].embedding.some((x, k) => x !== e.data[1].embedding[k]), 'different texts differ');
  eq(e.usage.prompt_tokens, 11);

  // Errors as the client's exception types
  const rejects = async (p, type, status, code) => {
    try { await p; } catch (err) {
      ok(err instanceof type, `${err.constructor.name} is ${type.name}: ${err.message}`);
      eq(err.status, status);
      if (code) eq(err.code, code);
      return;
    }
    assert.fail(`no ${type.name}`);
  };
  await rejects(client.completions.create({ ...req, temperature: 5 }), OpenAI.BadRequestError, 400);
  await rejects(client.completions.create({ ...req, prompt: 'x'.repeat(1100) }), OpenAI.BadRequestError, 400, 'context_length_exceeded');
  await rejects(client.chat.completions.create({ ...creq, messages: [] }), OpenAI.BadRequestError, 400);
  const wrong = new OpenAI({ baseURL: MAIN + '/v1', apiKey: 'sk-wrong', maxRetries: 0 });
  await rejects(wrong.models.list(), OpenAI.AuthenticationError, 401, 'invalid_api_key');
  await rejects(client.get('/nothing-here'), OpenAI.NotFoundError, 404);
  await rejects(small.classifications ? null : small.post('/classify', { body: { input: 'x' } }), OpenAI.BadRequestError, 400, 'model_not_supported');
}

// Raw HTTP: the bad inputs the client would never send. Each answer: the status and
// {"error": {"message", "type", "code"}}.
async function badInput() {
  const auth = { Authorization: 'Bearer ' + KEY, 'Content-Type': 'application/json' };
  const expectError = async (route, body, status, headers = auth, code) => {
    const r = await fetch(MAIN + route, { method: 'POST', headers, body });
    const j = await r.json();
    eq(r.status, status, `${route} ${String(body).slice(0, 40)} -> ${r.status} ${JSON.stringify(j)}`);
    ok(j.error && typeof j.error.message === 'string' && typeof j.error.type === 'string' && 'code' in j.error, 'error shape');
    if (code) eq(j.error.code, code);
  };
  const good = JSON.stringify({ prompt: 'ROMEO:', max_tokens: 2 });
  await expectError('/v1/completions', '{"prompt": "ROMEO:", ', 400, auth, 'invalid_json');        // malformed
  await expectError('/v1/completions', '[1, 2]', 400, auth, 'invalid_json');                       // not an object
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', max_tokens: 'ten' }), 400);  // wrong type
  await expectError('/v1/completions', JSON.stringify({ prompt: 7 }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', stream: 'yes' }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', frobnicate: 1 }), 400, auth, 'unknown_parameter');
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', max_tokens: -1 }), 400);      // negative
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', max_tokens: 1e12 }), 400);    // absurd
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', n: 1000 }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', top_p: 0 }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: '' }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a', stop: ['', 'x'] }), 400);
  await expectError('/v1/completions', JSON.stringify({ prompt: 'a'.repeat(2000) }), 400, auth, 'context_length_exceeded');
  await expectError('/v1/completions', '['.repeat(100000) + ']'.repeat(100000), 413, auth);       // over --max-body-bytes
  await expectError('/v1/completions', '{"a":' + '['.repeat(500) + ']'.repeat(500) + '}', 400, auth, 'invalid_json');  // too deep
  // invalid UTF-8 inside a JSON string
  const bad = Buffer.concat([Buffer.from('{"prompt": "RO'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]);
  await expectError('/v1/completions', bad, 400, auth, 'invalid_json');
  await expectError('/v1/chat/completions', JSON.stringify({ messages: [{ role: 'wizard', content: 'hi' }] }), 400);
  await expectError('/v1/chat/completions', JSON.stringify({ messages: 'hi' }), 400);
  await expectError('/v1/embeddings', JSON.stringify({ input: [] }), 400);
  await expectError('/detokenize', JSON.stringify({ tokens: [1, 99999] }), 400);
  await expectError('/v1/completions', good, 401, { 'Content-Type': 'application/json' }, 'invalid_api_key');   // no key
  await expectError('/v1/completions', good, 401, { ...auth, Authorization: 'Bearer nope' }, 'invalid_api_key');
  // the server keeps serving: /health needs no key; a good request still works
  eq((await fetch(MAIN + '/health')).status, 200);
  const r = await fetch(MAIN + '/v1/completions', { method: 'POST', headers: auth, body: good });
  eq(r.status, 200);
  ok(r.headers.get('x-request-id').startsWith('req-'), 'request id header');
  // tokenize / detokenize round trip
  const t = await (await fetch(MAIN + '/tokenize', { method: 'POST', headers: auth, body: JSON.stringify({ content: 'To be' }) })).json();
  eq(t.tokens.length, 5);
  const d = await (await fetch(MAIN + '/detokenize', { method: 'POST', headers: auth, body: JSON.stringify({ tokens: t.tokens }) })).json();
  eq(d.content, 'To be');
  // /metrics is Prometheus text
  const m = await (await fetch(MAIN + '/metrics', { headers: auth })).text();
  ok(/^tfm_tokens_generated_total \d+$/m.test(m) && /tfm_time_to_first_token_seconds_count \d+/.test(m), 'metrics');
}

// 32 clients x 8 requests, mixed prompt lengths (some over the 16-token prefill chunk), token
// counts and streaming, at --parallel 4: no errors, each text equal to the same request alone.
async function concurrency() {
  const base = 'ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun.';
  const requests = [];
  for (let c = 0; c < 32; ++c)
    for (let k = 0; k < 8; ++k) {
      const i = c * 8 + k;
      requests.push({ model: 'tiny', prompt: base.slice(0, 3 + ((i * 7) % 90)), max_tokens: 1 + ((i * 13) % 40),
                      seed: 1000 + i, temperature: 0.9, top_k: 20, top_p: 0.95, stream: i % 3 === 0 });
    }
  const run = async (r) => r.stream ? (await collect(await client.completions.create(r))).text
                                    : (await client.completions.create(r)).choices[0].text;
  const alone = [];
  for (const r of requests) alone.push(await run(r));  // one at a time
  const together = new Array(requests.length);
  await Promise.all(Array.from({ length: 32 }, async (_, c) => {
    for (let k = 0; k < 8; ++k) together[c * 8 + k] = await run(requests[c * 8 + k]);
  }));
  for (let i = 0; i < requests.length; ++i) eq(together[i], alone[i], `request ${i}: batched == alone`);
  ok(together.some((t) => t.length > 20), 'some long outputs');
}

const metric = async (url, name) => {
  const m = await (await fetch(url + '/metrics')).text();
  return Number(new RegExp('^' + name + ' (\\d+)$', 'm').exec(m)[1]);
};

// --parallel 1 --queue 1: one request decoding, one waiting, the third gets 503 + Retry-After.
// A client that disconnects mid-stream frees its slot (/metrics shows it).
async function queueAndDisconnect() {
  const long = { model: 'wide', prompt: 'ROMEO:', max_tokens: 1000, ignore_eos: true, seed: 1, stream: true };
  const ac = new AbortController();
  const first = await small.completions.create(long, { signal: ac.signal });
  const it = first[Symbol.asyncIterator]();
  await it.next();  // decoding now: the slot is taken
  const waiting = fetch(SMALL + '/v1/completions', { method: 'POST', body: JSON.stringify({ prompt: 'A', max_tokens: 2 }) });
  for (let i = 0; i < 1000 && (await metric(SMALL, 'tfm_queue_length')) < 1; ++i) await new Promise((r) => setTimeout(r, 10));
  const r = await fetch(SMALL + '/v1/completions', { method: 'POST', body: JSON.stringify({ prompt: 'B', max_tokens: 2 }) });
  eq(r.status, 503, 'queue full');
  eq(r.headers.get('retry-after'), '1');
  eq((await r.json()).error.code, 'queue_full');
  ok((await metric(SMALL, 'tfm_requests_rejected_queue_full_total')) >= 1, 'counted');
  await it.next();
  ac.abort();  // the client leaves mid-stream
  eq((await waiting).status, 200, 'the queued request ran once the slot was freed');
  eq(await metric(SMALL, 'tfm_choices_cancelled_total'), 1, 'the disconnect cancelled its sequence');
  eq(await metric(SMALL, 'tfm_slots_busy'), 0, 'no slot busy');
  const generated = await metric(SMALL, 'tfm_tokens_generated_total');
  ok(generated < 1000, `the abandoned stream stopped early (${generated} tokens generated)`);
}

// A client that drops a non-streamed request frees its slot too: nothing is written to its
// connection until the answer is ready, so the server has to notice the close on its own.
async function wholeDisconnect() {
  const http = require('http');
  const url = new URL(SMALL);
  const before = await metric(SMALL, 'tfm_tokens_generated_total');
  const body = JSON.stringify({ prompt: 'ROMEO:', max_tokens: 1000, ignore_eos: true, seed: 2 });
  const req = http.request({ host: url.hostname, port: Number(url.port), path: '/v1/completions', method: 'POST',
                             headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } });
  req.on('error', () => {});
  req.end(body);
  for (let i = 0; i < 1000 && (await metric(SMALL, 'tfm_slots_busy')) < 1; ++i) await new Promise((r) => setTimeout(r, 5));
  eq(await metric(SMALL, 'tfm_slots_busy'), 1, 'the non-streamed request is decoding');
  req.destroy();  // the client leaves before the answer
  for (let i = 0; i < 1000 && (await metric(SMALL, 'tfm_slots_busy')) > 0; ++i) await new Promise((r) => setTimeout(r, 5));
  eq(await metric(SMALL, 'tfm_slots_busy'), 0, 'its slot was freed');
  eq(await metric(SMALL, 'tfm_choices_cancelled_total'), 2, 'the disconnect cancelled its sequence');
  const generated = (await metric(SMALL, 'tfm_tokens_generated_total')) - before;
  ok(generated < 1000, `the abandoned request stopped early (${generated} tokens generated)`);
}

// An idle connection (--idle-timeout 1 on SMALL) is closed by the server.
async function idleConnection() {
  const net = require('net');
  const url = new URL(SMALL);
  const closed = await new Promise((resolve) => {
    const sock = net.connect(Number(url.port), url.hostname);
    const timer = setTimeout(() => { sock.destroy(); resolve(false); }, 10000);
    sock.on('close', () => { clearTimeout(timer); resolve(true); });
    sock.on('error', () => {});
  });
  ok(closed, 'idle connection closed by the server');
}

(async () => {
  await api();
  await badInput();
  await concurrency();
  await queueAndDisconnect();
  await wholeDisconnect();
  await idleConnection();
  console.log(`openai client tests: ${checks} checks ok`);
})().catch((e) => { console.error('FAIL:', e); process.exit(1); });
