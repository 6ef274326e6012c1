// Structured output through the official `openai` client: every answer under a JSON Schema
// parses and passes ajv (with ajv-formats), streamed or not, for every seed; json_object and
// GBNF grammars hold too; schemas and grammars that cannot be compiled are 400s naming the
// parameter and the server keeps serving. Run by structured_output.sh:
//   node structured_output.js URL OPENAI_PACKAGE_DIR
'use strict';
const assert = require('assert/strict');
const path = require('path');

const [URL, PKG] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const Ajv = require(path.join(PKG, 'node_modules', 'ajv', 'dist', '2020')).default;  // JSON Schema 2020-12
const addFormats = require(path.join(PKG, 'node_modules', 'ajv-formats')).default;
const client = new OpenAI({ baseURL: URL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
const ajv = new Ajv({ strict: false });
addFormats(ajv);
let checks = 0;
const ok = (cond, msg) => { assert.ok(cond, msg); ++checks; };
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };

const SCHEMAS = {
  person: {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 20 },
      age: { type: 'integer' },
      email: { type: 'string', format: 'email' },
      tags: { type: 'array', items: { enum: ['red', 'green blue', 'say "hi"'] }, maxItems: 3 },
      born: { type: 'string', format: 'date' },
      code: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}$' },
    },
    required: ['name', 'age', 'code'],
    additionalProperties: false,
  },
  tree: {
    $defs: {
      node: {
        type: 'object',
        properties: { value: { type: 'number' }, children: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } },
        required: ['value', 'children'],
        additionalProperties: false,
      },
    },
    $ref: '#/$defs/node',
  },
  choice: {
    type: 'object',
    properties: {
      any: { anyOf: [{ type: 'string', minLength: 2, maxLength: 4 }, { type: 'number' }, { type: 'null' }] },
      one: { oneOf: [{ type: 'boolean' }, { type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 2 }] },
      kind: { const: 'fixed' },
      level: { enum: [1, 2.5, 'three', null, true] },
      maybe: { type: ['string', 'null'] },
    },
    required: ['any', 'one', 'kind', 'level', 'maybe'],
  },
  formats: {
    type: 'object',
    properties: {
      at: { type: 'string', format: 'date-time' },
      t: { type: 'string', format: 'time' },
      id: { type: 'string', format: 'uuid' },
      ip: { type: 'string', format: 'ipv4' },
    },
    required: ['at', 't', 'id', 'ip'],
  },
  counts: { type: 'object', additionalProperties: { type: 'integer' } },
  pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'integer' }], items: false, minItems: 2 },
  flags: { type: 'array', items: { type: 'boolean' }, minItems: 2, maxItems: 4 },
  patterns: {
    type: 'object',
    properties: {
      word: { type: 'string', pattern: '^(foo|ba[rz])-\\w{2,4}$' },
      inside: { type: 'string', pattern: '[0-9]x' },
      quoted: { type: 'string', pattern: '^"[^"\\\\]+"$' },
    },
    required: ['word', 'inside', 'quoted'],
    additionalProperties: false,
  },
};
const SEEDS = [1, 2, 3, 4, 5, 6];

function check(name, text, finish) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    assert.fail(`${name}: not JSON (${e.message}): ${JSON.stringify(text)}`);
  }
  const validate = ajv.compile(SCHEMAS[name]);
  ok(validate(value), `${name}: ${JSON.stringify(text)} fails the schema: ${ajv.errorsText(validate.errors)}`);
  ok(finish === 'stop' || finish === 'length', `${name}: finish_reason ${finish}`);
}

async function schemas() {
  for (const [name, schema] of Object.entries(SCHEMAS)) {
    for (const seed of SEEDS) {
      const body = {
        model: MODEL, messages: [{ role: 'user', content: `Give me ${name} as JSON.` }], seed, max_tokens: 160, temperature: 1,
        response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
      };
      const r = await client.chat.completions.create(body);
      const text = r.choices[0].message.content;
      check(name, text, r.choices[0].finish_reason);
      if (seed === 1) {  // streamed: the same text, assembled from deltas
        let streamed = '', finish = null;
        for await (const c of await client.chat.completions.create({ ...body, stream: true }))
          for (const ch of c.choices) {
            streamed += ch.delta.content || '';
            if (ch.finish_reason) finish = ch.finish_reason;
          }
        eq(streamed, text, `${name}: streamed == whole`);
        eq(finish, r.choices[0].finish_reason, `${name}: streamed finish_reason`);
      }
    }
  }
  // A small budget still ends in a document that parses (the matcher steers to a finish).
  for (const seed of SEEDS) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'tree' }], seed, max_tokens: 40, temperature: 1,
      response_format: { type: 'json_schema', json_schema: { name: 'tree', schema: SCHEMAS.tree } },
    });
    check('tree', r.choices[0].message.content, r.choices[0].finish_reason);
  }
}

async function json_object_and_grammar() {
  for (const seed of SEEDS) {
    const r = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'JSON please' }], seed, max_tokens: 120, temperature: 1,
      response_format: { type: 'json_object' },
    });
    const v = JSON.parse(r.choices[0].message.content);
    ok(v !== null && typeof v === 'object' && !Array.isArray(v), `json_object: ${r.choices[0].message.content}`);
    // llama.cpp's "grammar" (GBNF) on completions; the client passes unknown keys through.
    const c = await client.completions.create({
      model: MODEL, prompt: 'Answer:', seed, max_tokens: 8, temperature: 1,
      grammar: 'root ::= ("yes" | "no" | "maybe" [0-9]{2}) "."',
    });
    ok(/^(yes|no|maybe[0-9]{2})\.$/.test(c.choices[0].text), `grammar: ${JSON.stringify(c.choices[0].text)}`);
    eq(c.choices[0].finish_reason, 'stop', 'a complete grammar ends with stop');
  }
}

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather', description: 'The weather at a place.',
      parameters: { type: 'object', properties: { location: { type: 'string', maxLength: 30 }, unit: { enum: ['c', 'f'] } },
                    required: ['location', 'unit'], additionalProperties: false },
    },
  },
  {
    type: 'function',
    function: {
      name: 'add', parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
                                 required: ['a', 'b'], additionalProperties: false },
    },
  },
];
const TOOL_CHECKS = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCalls(what, message, finish, only) {
  eq(finish, 'tool_calls', `${what}: finish_reason of ${JSON.stringify(message)}`);
  eq(message.content, null, `${what}: no content beside the calls`);
  ok(Array.isArray(message.tool_calls) && message.tool_calls.length >= 1, `${what}: tool_calls`);
  for (const c of message.tool_calls) {
    eq(c.type, 'function', `${what}: type`);
    ok(typeof c.id === 'string' && c.id.length > 0, `${what}: id`);
    ok(only ? c.function.name === only : c.function.name in TOOL_CHECKS, `${what}: name ${c.function.name}`);
    const validate = TOOL_CHECKS[c.function.name];
    ok(validate(JSON.parse(c.function.arguments)), `${what}: arguments ${c.function.arguments}: ${ajv.errorsText(validate.errors)}`);
  }
}

async function tool_calls() {
  const ask = { model: MODEL, messages: [{ role: 'user', content: 'Weather in Paris, and 2 + 3?' }], tools: TOOLS, max_tokens: 200, temperature: 1 };
  for (const seed of SEEDS) {
    const r = await client.chat.completions.create({ ...ask, seed, tool_choice: 'required' });
    checkCalls(`required seed ${seed}`, r.choices[0].message, r.choices[0].finish_reason);
    const one = await client.chat.completions.create({ ...ask, seed, tool_choice: 'required', parallel_tool_calls: false });
    checkCalls(`one call seed ${seed}`, one.choices[0].message, one.choices[0].finish_reason);
    eq(one.choices[0].message.tool_calls.length, 1, 'parallel_tool_calls false: one call');
    const named = await client.chat.completions.create({ ...ask, seed, tool_choice: { type: 'function', function: { name: 'add' } } });
    checkCalls(`named seed ${seed}`, named.choices[0].message, named.choices[0].finish_reason, 'add');
    // streamed: the official client's helper assembles the deltas into the same message
    const stream = client.beta.chat.completions.stream({ ...ask, seed, tool_choice: 'required' });
    const final = await stream.finalChatCompletion();
    const calls = (m) => m.tool_calls.map((c) => [c.type, c.function.name, c.function.arguments]);
    eq(calls(final.choices[0].message), calls(r.choices[0].message), `streamed tool calls seed ${seed}`);
    ok(final.choices[0].message.tool_calls.every((c) => c.id.startsWith('call_')), 'streamed ids');
    eq(final.choices[0].finish_reason, 'tool_calls', 'streamed finish_reason');
    // auto: free to answer in words (this model never opens a call); a valid reply either way
    const auto = await client.chat.completions.create({ ...ask, seed, max_tokens: 20 });
    const m = auto.choices[0].message;
    ok(auto.choices[0].finish_reason === 'tool_calls' ? m.tool_calls.length > 0 : typeof m.content === 'string', 'auto reply');
  }
  // The round trip: the call and its result go back as messages, and the template renders them.
  const r = await client.chat.completions.create({ ...ask, seed: 1, tool_choice: 'required' });
  const c = r.choices[0].message.tool_calls[0];
  const back = await client.chat.completions.create({
    model: MODEL, seed: 1, max_tokens: 5, tools: TOOLS,
    messages: [ask.messages[0], r.choices[0].message, { role: 'tool', tool_call_id: c.id, content: '{"result": 21}' }],
  });
  ok(typeof back.choices[0].message.content === 'string', 'a reply after the tool result');
}

async function expect400(body, param, words, chat = true) {
  const res = await fetch(URL + (chat ? '/v1/chat/completions' : '/v1/completions'), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  const j = await res.json();
  eq(res.status, 400, `${JSON.stringify(body).slice(0, 120)}: status`);
  eq(j.error.param, param, `param of ${j.error.message}`);
  ok(j.error.message.includes(words), `'${j.error.message}' names '${words}'`);
}

async function errors() {
  const chat = (response_format) => ({ model: MODEL, messages: [{ role: 'user', content: 'x' }], response_format });
  const js = (schema) => chat({ type: 'json_schema', json_schema: { name: 's', schema } });
  const P = 'response_format.json_schema.schema';
  await expect400(js({ type: 'integer', minimum: 0 }), P, "unsupported keyword 'minimum'");
  await expect400(js({ type: 'object', properties: { a: { type: 'string', format: 'hostname' } } }), P, "format 'hostname'");
  await expect400(js({ type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }), P, 'points to nothing');
  await expect400(js({ type: 'string', pattern: '(?=a)b' }), P, 'lookarounds');
  await expect400(js({ type: 'strng' }), P, "unknown type 'strng'");
  await expect400(js(5), P, 'must be an object');
  await expect400(chat({ type: 'xml' }), 'response_format.type', 'json_schema');
  await expect400(chat({ type: 'json_schema' }), 'response_format.json_schema', 'must be an object');
  const t = { model: MODEL, messages: [{ role: 'user', content: 'x' }], tools: TOOLS };
  await expect400({ ...t, tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice', "'nope'");
  await expect400({ ...t, tool_choice: 'always' }, 'tool_choice', 'required');
  await expect400({ model: MODEL, messages: t.messages, tool_choice: 'required' }, 'tool_choice', 'needs tools');
  await expect400({ ...t, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'number', maximum: 3 } } } } }],
                    tool_choice: 'required' }, 'tools', "unsupported keyword 'maximum'");
  await expect400({ ...t, tool_choice: 'required', response_format: { type: 'json_object' } }, 'response_format', 'tools');
  await expect400({ model: MODEL, prompt: 'x', grammar: 'root ::= "a" | b' }, 'grammar', "rule 'b' is used but not defined", false);
  await expect400({ model: MODEL, prompt: 'x', grammar: 'root ::= root "a" | "b"' }, 'grammar', 'left recursion', false);
  await expect400({ model: MODEL, prompt: 'x', grammar: 'root ::= "a"{99999}' }, 'grammar', 'repetition count', false);
  // still serving
  const r = await client.completions.create({ model: MODEL, prompt: 'x', max_tokens: 3, seed: 1 });
  ok(typeof r.choices[0].text === 'string', 'serves after the errors');
}

let MODEL = '';
(async () => {
  MODEL = (await client.models.list()).data[0].id;
  await schemas();
  await json_object_and_grammar();
  await tool_calls();
  await errors();
  console.log(`structured output: ${checks} checks passed (${Object.keys(SCHEMAS).length} schemas x ${SEEDS.length} seeds)`);
})().catch((e) => {
  console.error('FAIL:', e.message || e);
  process.exit(1);
});
