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
  await errors();
  console.log(`structured output: ${checks} checks passed (${Object.keys(SCHEMAS).length} schemas x ${SEEDS.length} seeds)`);
})().catch((e) => {
  console.error('FAIL:', e.message || e);
  process.exit(1);
});
