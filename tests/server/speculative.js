// Speculative decoding in `tfm serve` through the official `openai` client: on a server that
// drafts by prompt lookup and on one with a draft model, greedy completions and chat (streamed
// and not, n = 2, under a JSON Schema) are the text of a server that drafts nothing, and of the
// same server with "speculative": false; sampled answers arrive whole; /metrics counts the
// drafts; "speculative": true where nothing drafts is a 400 and the server keeps serving. Run by
// structured_output.sh:
//   node speculative.js LOOKUP_URL DRAFT_URL PLAIN_URL OPENAI_PACKAGE_DIR
'use strict';
const assert = require('assert/strict');
const path = require('path');

const [LOOKUP, DRAFT, PLAIN, PKG] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const client = (url) => new OpenAI({ baseURL: url + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
let checks = 0;
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };
const ok = (c, msg) => { assert.ok(c, msg); ++checks; };

const SCHEMA = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, n: { type: 'integer' } },
                 required: ['name', 'n'], additionalProperties: false };

async function texts(url, kind, body) {
  const c = client(url);
  if (kind === 'chat') {
    const r = await c.chat.completions.create({ model: 'g2', ...body });
    return r.choices.map((x) => [x.message.content, x.finish_reason]);
  }
  const r = await c.completions.create({ model: 'g2', ...body });
  return r.choices.map((x) => [x.text, x.finish_reason]);
}

async function streamed(url, kind, body) {
  const c = client(url);
  const s = kind === 'chat' ? await c.chat.completions.create({ model: 'g2', ...body, stream: true })
                            : await c.completions.create({ model: 'g2', ...body, stream: true });
  let text = '', finish = null;
  for await (const ev of s) {
    for (const ch of ev.choices) {
      text += kind === 'chat' ? (ch.delta.content || '') : ch.text;
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  return [[text, finish]];
}

(async () => {
  const cases = [
    ['completions', { prompt: 'ROMEO: the the the', max_tokens: 48, temperature: 0 }],
    ['completions', { prompt: 'Hello, hello, hello', max_tokens: 30, temperature: 0, n: 2 }],
    ['chat', { messages: [{ role: 'user', content: 'Say it again and again' }], max_tokens: 40, temperature: 0 }],
    ['chat', { messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 60, temperature: 0,
               response_format: { type: 'json_schema', json_schema: { name: 'x', schema: SCHEMA } } }],
  ];
  for (const [kind, body] of cases) {
    const want = await texts(PLAIN, kind, body);
    for (const url of [LOOKUP, DRAFT]) {
      const tag = `${kind} ${JSON.stringify(body).slice(0, 60)} on ${url === LOOKUP ? 'lookup' : 'draft model'}`;
      eq(await texts(url, kind, body), want, tag);
      eq(await texts(url, kind, { ...body, speculative: false }), want, tag + ' (speculative: false)');
      if (!body.n) eq(await streamed(url, kind, body), want, tag + ' (streamed)');
    }
    if (body.response_format) {
      const v = JSON.parse(want[0][0]);
      ok(typeof v.name === 'string' && Number.isInteger(v.n), 'schema answer: ' + want[0][0]);
    }
  }
  // Concurrent requests: their rounds are scored together (one model step, shorter drafts
  // padded), and each text is still plain decoding's.
  const prompts = ['ROMEO: the the the', 'Hello, hello, hello', 'the the the the', 'O O O O O'];
  const body = (p) => ({ prompt: p, max_tokens: 40, temperature: 0 });
  const plain = await Promise.all(prompts.map((p) => texts(PLAIN, 'completions', body(p))));
  for (const url of [LOOKUP, DRAFT]) {
    const before = await (await fetch(url + '/metrics')).text();
    const got = await Promise.all(prompts.map((p) => texts(url, 'completions', body(p))));
    eq(got, plain, `four concurrent greedy completions on ${url === LOOKUP ? 'lookup' : 'draft model'}`);
    const after = await (await fetch(url + '/metrics')).text();
    const count = (m, name) => Number((m.match(new RegExp('^' + name + ' (\\d+)', 'm')) || [])[1]);
    const rounds = count(after, 'tfm_speculative_rounds_total') - count(before, 'tfm_speculative_rounds_total');
    const steps = count(after, 'tfm_speculative_steps_total') - count(before, 'tfm_speculative_steps_total');
    ok(rounds > 0 && steps > 0 && steps < rounds, `rounds ${rounds} scored in ${steps} steps (batched)`);
  }
  // Sampled: whole answers (the distribution is the unit tests').
  for (const url of [LOOKUP, DRAFT]) {
    const r = await client(url).completions.create({ model: 'g2', prompt: 'the the', max_tokens: 20, seed: 3, n: 2 });
    eq(r.choices.length, 2, 'sampled n = 2');
    for (const ch of r.choices) ok(ch.finish_reason === 'length' && r.usage.completion_tokens === 40, JSON.stringify(r));
  }
  // /metrics: the drafts counted.
  const m = await (await fetch(LOOKUP + '/metrics')).text();
  const drafted = Number((m.match(/^tfm_speculative_drafted_tokens_total (\d+)/m) || [])[1]);
  const accepted = Number((m.match(/^tfm_speculative_accepted_tokens_total (\d+)/m) || [])[1]);
  ok(drafted > 0 && accepted > 0 && accepted <= drafted, `metrics: drafted ${drafted}, accepted ${accepted}`);
  // Where nothing drafts, asking for it is a 400 naming the parameter; the server keeps serving.
  const bad = await fetch(PLAIN + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'g2', prompt: 'x', max_tokens: 2, speculative: true }),
  });
  eq(bad.status, 400, 'speculative: true without a drafter');
  eq((await bad.json()).error.param, 'speculative', 'the 400 names the parameter');
  eq((await fetch(PLAIN + '/health')).status, 200, 'still serving');
  console.log(`speculative.js: ${checks} checks passed`);
})().catch((e) => { console.error('FAIL:', e); process.exit(1); });
