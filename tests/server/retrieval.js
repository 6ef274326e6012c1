// /v1/embeddings and /v1/rerank against sentence_fixture.py's reference (run by retrieval.sh).
// With --retrieve: completions and chat against the CLI's answers that retrieval.sh wrote.
//   node retrieval.js ST_URL CROSS_URL OPENAI_PACKAGE_DIR DIR RAG_URL RAG_PLAIN_URL
'use strict';
const assert = require('assert/strict');
const fs = require('fs');
const path = require('path');

const [ST, CROSS, PKG, DIR, RAG, RAG_PLAIN] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const client = new OpenAI({ baseURL: ST + '/v1', apiKey: 'unused', maxRetries: 0 });
const exp = JSON.parse(fs.readFileSync(path.join(DIR, 'expected.json'), 'utf8'));
let checks = 0;
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };
const ok = (c, msg) => { assert.ok(c, msg); ++checks; };
const close = (got, ref, tol, what) => {
  eq(got.length, ref.length, `${what}: length`);
  const err = Math.max(...got.map((x, i) => Math.abs(x - ref[i])));
  ok(err < tol, `${what}: max |diff| ${err}`);
};
async function post(url, body) {
  const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, body: await r.json() };
}

(async () => {
  // The client asks for base64 and decodes it; float gives the same numbers.
  const e = await client.embeddings.create({ model: 'st', input: exp.texts });
  exp.texts.forEach((_, i) => close(e.data[i].embedding, exp.st_mean[i], 1e-5, `embedding ${i}`));
  const f = await client.embeddings.create({ model: 'st', input: exp.texts, encoding_format: 'float' });
  exp.texts.forEach((_, i) => close(f.data[i].embedding, exp.st_mean[i], 1e-5, `float embedding ${i}`));
  const d8 = await client.embeddings.create({ model: 'st', input: exp.texts, dimensions: 8 });
  exp.texts.forEach((_, i) => close(d8.data[i].embedding, exp.st_mean_dim8[i], 1e-5, `dimensions 8, ${i}`));
  const q = await client.embeddings.create({ model: 'st', input: exp.texts, prompt_name: 'query' });
  exp.texts.forEach((_, i) => close(q.data[i].embedding, exp.st_mean_query[i], 1e-5, `query prompt ${i}`));
  for (const [body, pattern] of [[{ input: 'w5', dimensions: 17 }, /more than the model's 16/],
                                 [{ input: 'w5', dimensions: 0 }, /positive integer/],
                                 [{ input: 'w5', prompt_name: 'passage' }, /no prompt named 'passage'/]]) {
    const r = await post(ST + '/v1/embeddings', body);
    eq(r.status, 400, JSON.stringify(body));
    ok(pattern.test(r.body.error.message), r.body.error.message);
  }
  // An embedding model has no classifier head: rerank is refused.
  eq((await post(ST + '/v1/rerank', { query: 'w5', documents: ['w6'] })).status, 400, 'rerank on an embedding model');

  // Rerank: every document scored as the reference, best first.
  const rr = exp.rerank;
  const r = await post(CROSS + '/v1/rerank', { model: 'cross', query: rr.query, documents: rr.documents });
  eq(r.status, 200, JSON.stringify(r.body));
  const order = rr.relevance.map((s, i) => [s, i]).sort((a, b) => b[0] - a[0]).map((x) => x[1]);
  eq(r.body.results.map((x) => x.index), order, 'best first');
  for (const x of r.body.results) {
    ok(Math.abs(x.relevance_score - rr.relevance[x.index]) < 1e-5, `relevance of ${x.index}`);
    eq(x.document.text, rr.documents[x.index]);
  }
  ok(r.body.usage.total_tokens > 0, 'usage');
  const top = await post(CROSS + '/rerank', { query: rr.query, documents: rr.documents.map((t) => ({ text: t })), top_n: 2, return_documents: false });
  eq(top.body.results.map((x) => x.index), order.slice(0, 2), 'top_n 2');
  ok(top.body.results.every((x) => !('document' in x)), 'return_documents false');
  for (const [body, pattern] of [[{ query: 'w5', documents: [] }, /non-empty array/],
                                 [{ query: '', documents: ['w5'] }, /non-empty string/],
                                 [{ query: 'w5', documents: [3] }, /string or \{"text": string\}/],
                                 [{ query: 'w5', documents: ['w6'], top_n: 0 }, /top_n/],
                                 [{ query: 'w5', documents: ['w6'], rank: 1 }, /rank/]]) {
    const b = await post(CROSS + '/v1/rerank', body);
    eq(b.status, 400, JSON.stringify(body));
    ok(pattern.test(b.body.error.message), b.body.error.message);
  }
  eq((await fetch(CROSS + '/health')).status, 200, 'still serving');

  // Retrieval-augmented completions and chat equal `tfm generate` on the augmented prompt.
  const expect = (name) => fs.readFileSync(path.join(DIR, `expect_${name}.txt`), 'utf8').replace(/\n$/, '');
  const greedy = { prompt: 'w5 w9 w11', max_tokens: 4, temperature: 0 };
  const c = await post(RAG + '/v1/completions', greedy);
  eq(c.status, 200, JSON.stringify(c.body));
  eq(c.body.choices[0].text, expect('completion'), 'completion with the passages == tfm generate --retrieve');
  eq(c.body.usage.prompt_tokens, 3 + 2 * 4, 'the prompt holds two passages of 4 words');
  const off = await post(RAG + '/v1/completions', { ...greedy, retrieve: false });
  eq(off.body.choices[0].text, expect('plain'), 'retrieve: false');
  eq(off.body.usage.prompt_tokens, 3, 'retrieve: false: the prompt alone');
  eq((await post(RAG + '/v1/completions', { ...greedy, retrieve: 1 })).body.usage.prompt_tokens, 3 + 4, 'retrieve: 1');
  const chat = { messages: [{ role: 'user', content: 'w5 w9 w11' }], max_tokens: 4, temperature: 0 };
  for (const [url, what] of [[RAG, 'a template that reads documents'], [RAG_PLAIN, 'passages put into the user message']]) {
    const r = await post(url + '/v1/chat/completions', chat);
    eq(r.status, 200, JSON.stringify(r.body));
    eq(r.body.choices[0].message.content, expect('chat'), `chat: ${what}`);
    eq(r.body.usage.prompt_tokens, 3 + 2 * 4, `chat prompt: ${what}`);
  }
  for (const [body, status, pattern] of [[{ ...greedy, retrieve: 'yes' }, 400, /true, false or a number/],
                                         [{ ...greedy, retrieve: 101 }, 400, /true, false or a number/]]) {
    const r = await post(RAG + '/v1/completions', body);
    eq(r.status, status, JSON.stringify(body));
    ok(pattern.test(r.body.error.message), r.body.error.message);
  }
  eq((await post(RAG + '/v1/chat/completions', { ...chat, messages: [{ role: 'system', content: 'w5' }] })).status, 400,
     'retrieval without a user message');
  console.log(`retrieval API: ${checks} checks passed`);
})().catch((err) => { console.error('FAIL:', err.message); process.exit(1); });
