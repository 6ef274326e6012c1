// Every key the generation endpoints accept (the lists in tools/server/routes.h, read from the
// source so that a key added there without a case here fails) is honoured or refused: each
// case sends a request without the key and one with it, and the two answers must differ (text,
// scores, choices, shape), or the one with it must be a 4xx naming the key. Run by
// serve_test.sh:
//   node request_keys.js ROUTES_H MAIN_URL API_KEY S2S_URL EOS_URL
// MAIN: a decoder-only character model (API key); S2S: an encoder-decoder translator; EOS: a
// hub GPT-2 directory whose generation_config.json ends on the second token of its greedy
// continuation of EOS_PROMPT (serve_test.sh writes it).
'use strict';
const assert = require('assert/strict');
const fs = require('fs');

const [ROUTES_H, MAIN, KEY, S2S, EOS] = process.argv.slice(2);
const EOS_PROMPT = 'w3 w17 w5 w9 w30 w2 w11 w7';

// The C++ initializer list `name = { "a", "b", ... };` of routes.h.
function keyList(name) {
  const src = fs.readFileSync(ROUTES_H, 'utf8');
  const m = src.match(new RegExp(name + '\\s*=\\s*\\{([^}]*)\\}'));
  assert.ok(m, `${name} not found in ${ROUTES_H}`);
  return [...m[1].matchAll(/"([a-z_]+)"/g)].map((x) => x[1]);
}

async function post(url, path, body, auth) {
  const headers = { 'Content-Type': 'application/json' };
  if (auth) headers.Authorization = 'Bearer ' + auth;
  const r = await fetch(url + path, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* a stream */ }
  return { status: r.status, type: r.headers.get('content-type') || '', text, json };
}

// What two answers are compared on: everything but ids, timestamps and timings.
function essence(r) {
  if (!r.json) return r.type + '\n' + r.text.replace(/"(id|created|system_fingerprint)":("[^"]*"|\d+)/g, '').replace(/"timings":\{[^}]*\}/g, '');
  const j = JSON.parse(JSON.stringify(r.json));
  delete j.id; delete j.created; delete j.timings;
  return r.status + ' ' + JSON.stringify(j);
}

let checked = 0;
// case: { base, with } requests (with = base + the key), or with alone (base: the plain request);
// expect: 'differs' | [status, code?].
async function walk(label, url, path, auth, keys, plain, cases) {
  for (const key of keys) {
    const c = cases[key];
    assert.ok(c, `${label}: key '${key}' has no case in request_keys.js (honour it or refuse it, then add one)`);
    if (c.skip) continue;
    const base = c.base || plain;
    const b = await post(url, path, base, auth);
    assert.equal(b.status, 200, `${label} ${key}: the request without it: ${b.text.slice(0, 300)}`);
    // `with` may depend on the answer without the key (a stop string taken from its text).
    const withKey = { ...base, ...(typeof c.with === 'function' ? c.with(b) : c.with) };
    assert.ok(key in withKey, `${label} ${key}: the case must send the key`);
    const w = await post(url, path, withKey, auth);
    if (c.expect === 'differs') {
      assert.equal(w.status, 200, `${label} ${key}: ${w.text.slice(0, 300)}`);
      assert.notEqual(essence(w), essence(b), `${label} ${key}: accepted but the answer did not change: ${JSON.stringify(withKey)} -> ${w.text.slice(0, 400)}`);
      if (c.check) c.check(w, b);
    } else {
      const [status, code] = c.expect;
      assert.equal(w.status, status, `${label} ${key}: expected ${status}, got ${w.status}: ${w.text.slice(0, 300)}`);
      assert.equal(w.json.error.param, key, `${label} ${key}: the error names ${w.json.error.param}`);
      if (code) assert.equal(w.json.error.code, code, `${label} ${key}`);
    }
    ++checked;
  }
}

const TOOLS = [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { type: 'integer' } } } } }];
const text0 = (r) => (r.json.choices[0].text !== undefined ? r.json.choices[0].text : r.json.choices[0].message.content);

async function main() {
  const completionKeys = keyList('kCompletionKeys');
  const chatKeys = keyList('kChatKeys');
  const samplingOnly = keyList('kSamplingOnlyKeys');
  const prompt = { model: 'tiny', prompt: 'ROMEO:', max_tokens: 24 };
  const greedy = { ...prompt, temperature: 0 };
  const sampled = { ...prompt, seed: 5 };  // temperature: OpenAI's default 1
  const ignoreEos = { base: { model: 'gpt2', prompt: EOS_PROMPT, max_tokens: 6 }, with: { ignore_eos: true }, expect: 'differs' };

  // The cases a decoder model shares between /v1/completions and /v1/chat/completions.
  const shared = (g, s) => ({
    model: { with: { model: 'not-this-model' }, expect: [404, 'model_not_found'] },
    max_tokens: { base: g, with: { max_tokens: 3 }, expect: 'differs' },
    temperature: { base: s, with: { temperature: 0 }, expect: 'differs' },
    top_p: { base: s, with: { top_p: 0.01 }, expect: 'differs' },
    top_k: { base: s, with: { top_k: 1 }, expect: 'differs' },
    min_p: { base: s, with: { min_p: 1 }, expect: 'differs' },
    seed: { base: s, with: { seed: 6 }, expect: 'differs' },
    n: { base: g, with: { n: 2 }, expect: 'differs', check: (w) => assert.equal(w.json.choices.length, 2) },
    stream: { base: g, with: { stream: true }, expect: 'differs' },
    stream_options: { base: { ...g, stream: true }, with: { stream_options: { include_usage: true } }, expect: 'differs' },
    // the answer's first character as the stop string: the text ends before it
    stop: { base: g, with: (b) => ({ stop: text0(b).slice(0, 1) || 'e' }), expect: 'differs' },
    presence_penalty: { base: g, with: { presence_penalty: 2 }, expect: 'differs' },
    frequency_penalty: { base: g, with: { frequency_penalty: 2 }, expect: 'differs' },
    repeat_penalty: { base: g, with: { repeat_penalty: 5 }, expect: 'differs' },
    repeat_last_n: { base: { ...g, repeat_penalty: 5 }, with: { repeat_last_n: 0 }, expect: 'differs' },
    logit_bias: { base: g, with: { logit_bias: { 10: 5 } }, expect: [400, 'unsupported_value'] },
    // The end-user id goes to the access log (serve_test.sh greps it), not into the answer.
    user: { skip: true },
    // This server has no index (tests/server/retrieval.sh starts one with --retrieve).
    retrieve: { base: g, with: { retrieve: true }, expect: [400, 'unsupported_value'] },
    // This server drafts nothing (structured_output.sh starts one with --lookup, one with --draft-model).
    speculative: { base: g, with: { speculative: true }, expect: [400, 'unsupported_value'] },
  });

  // /v1/completions on a decoder model.
  const completions = {
    ...shared(greedy, sampled),
    prompt: { base: greedy, with: { prompt: 'JULIET:' }, expect: 'differs' },
    logprobs: { base: greedy, with: { logprobs: 2 }, expect: 'differs' },
    echo: { base: greedy, with: { echo: true }, expect: 'differs', check: (w) => assert.ok(text0(w).startsWith('ROMEO:')) },
    best_of: { base: greedy, with: { best_of: 2 }, expect: [400, 'unsupported_value'] },
    suffix: { base: greedy, with: { suffix: 'x' }, expect: [400, 'unsupported_value'] },
    num_beams: { base: greedy, with: { num_beams: 2 }, expect: [400, 'unsupported_value'] },
    length_penalty: { base: greedy, with: { length_penalty: 2 }, expect: [400, 'unsupported_value'] },
    ignore_eos: ignoreEos,
    // Constrained: this character model's vocabulary has no '{', so JSON ends at once (and
    // structured_output.sh tests JSON on a GPT-2 vocabulary); a grammar over its letters.
    response_format: { base: greedy, with: { response_format: { type: 'json_object' } }, expect: 'differs' },
    grammar: { base: sampled, with: { grammar: 'root ::= [A-Z]+ ":" " " [a-z]{2,8}' }, expect: 'differs',
               check: (w) => assert.match(text0(w), /^[A-Z]+: [a-z]{2,8}$/) },
  };
  // The cases that run on the EOS server go there; the rest on MAIN.
  const onEos = (cases) => Object.fromEntries(Object.entries(cases).map(([k, c]) => [k, k === 'ignore_eos' ? c : { skip: true }]));
  const notOnEos = (cases) => Object.fromEntries(Object.entries(cases).map(([k, c]) => [k, k === 'ignore_eos' ? { skip: true } : c]));
  await walk('completions', MAIN, '/v1/completions', KEY, completionKeys, greedy, notOnEos(completions));
  await walk('completions', EOS, '/v1/completions', null, completionKeys, ignoreEos.base, onEos(completions));

  // /v1/chat/completions on a decoder model.
  const hello = { model: 'tiny', messages: [{ role: 'user', content: 'Hello' }], max_tokens: 24 };
  const cg = { ...hello, temperature: 0 }, cs = { ...hello, seed: 5 };
  const chat = {
    ...shared(cg, cs),
    messages: { base: cg, with: { messages: [{ role: 'user', content: 'Goodbye, friend' }] }, expect: 'differs' },
    max_completion_tokens: { base: { ...cg, max_tokens: undefined }, with: { max_completion_tokens: 3 }, expect: 'differs' },
    logprobs: { base: cg, with: { logprobs: true }, expect: 'differs' },
    top_logprobs: { base: { ...cg, logprobs: true }, with: { top_logprobs: 3 }, expect: 'differs' },
    response_format: { base: cg, with: { response_format: { type: 'json_object' } }, expect: 'differs' },
    grammar: { base: cs, with: { grammar: 'root ::= [A-Z]+ ":" " " [a-z]{2,8}' }, expect: 'differs',
               check: (w) => assert.match(text0(w), /^[A-Z]+: [a-z]{2,8}$/) },
    // Tools reach the prompt (this template renders none: a system message describes them).
    tools: { base: cg, with: { tools: TOOLS }, expect: 'differs' },
    tool_choice: { base: { ...cg, tools: TOOLS }, with: { tool_choice: 'none' }, expect: 'differs' },
    // One call or several: this vocabulary cannot write a call ('<' and '{' are not in it);
    // structured_output.js checks it on a GPT-2 vocabulary.
    parallel_tool_calls: { skip: true },
    ignore_eos: { base: { model: 'gpt2', messages: [{ role: 'user', content: EOS_PROMPT }], max_tokens: 6 },
                  with: { ignore_eos: true }, expect: 'differs' },
  };
  await walk('chat', MAIN, '/v1/chat/completions', KEY, chatKeys, cg, notOnEos(chat));
  await walk('chat', EOS, '/v1/chat/completions', null, chatKeys, chat.ignore_eos.base, onEos(chat));

  // /v1/completions on a translation model: beam search; the sampling-only keys are refused.
  const src = { model: 's2s', prompt: 'I like tea.', max_tokens: 32 };
  const translate = {
    model: { with: { model: 'not-this-model' }, expect: [404, 'model_not_found'] },
    prompt: { with: { prompt: 'Where is the station?' }, expect: 'differs' },
    max_tokens: { with: { max_tokens: 2 }, expect: 'differs' },
    n: { base: { ...src, num_beams: 3 }, with: { n: 2 }, expect: 'differs', check: (w) => assert.equal(w.json.choices.length, 2) },
    // Beam search scores with the length penalty; greedy decoding does not.
    num_beams: { with: { num_beams: 3 }, expect: 'differs' },
    length_penalty: { base: { ...src, num_beams: 3 }, with: { length_penalty: 0 }, expect: 'differs' },
    stream: { with: { stream: true }, expect: [400, 'unsupported_value'] },
    user: { skip: true },
    retrieve: { with: { retrieve: 2 }, expect: [400, 'unsupported_value'] },
    speculative: { with: { speculative: false }, expect: [400, 'unsupported_value'] },
  };
  const sampleValue = { temperature: 0.5, top_p: 0.5, top_k: 2, min_p: 0.1, repeat_penalty: 2, repeat_last_n: 8,
                        presence_penalty: 1, frequency_penalty: 1, seed: 3, stop: 'x', logprobs: 2, echo: true,
                        stream_options: { include_usage: true }, ignore_eos: true, best_of: 2, logit_bias: { 1: 1 },
                        suffix: 'x', response_format: { type: 'json_object' }, grammar: 'root ::= "x"' };
  for (const k of samplingOnly) {
    assert.ok(k in sampleValue, `kSamplingOnlyKeys: '${k}' has no value in request_keys.js`);
    translate[k] = { with: { [k]: sampleValue[k] }, expect: [400, 'unsupported_value'] };
  }
  await walk('translate', S2S, '/v1/completions', null, completionKeys, src, translate);
  // "user": accepted by every endpoint and written to the access log (serve_test.sh checks).
  for (const [url, path, body, auth] of [[MAIN, '/v1/completions', greedy, KEY], [MAIN, '/v1/chat/completions', cg, KEY]]) {
    const r = await post(url, path, { ...body, user: 'key-walk-user' }, auth);
    assert.equal(r.status, 200, r.text.slice(0, 300));
    ++checked;
  }
  console.log(`request keys: ${checked} honoured or refused (completions ${completionKeys.length} keys, chat ${chatKeys.length}, translation ${completionKeys.length})`);
}

main().catch((e) => { console.error('FAIL:', e.message); process.exit(1); });
