// The audio API through the official `openai` client (run by audio.sh): a FLAC upload
// transcribed in json, text, srt, vtt and verbose_json, each equal to `tfm transcribe`'s
// output for the file (the CLI's files in DIR); translations refused on an English-only model;
// word timestamps equal the CLI's; a file that is not audio, an unknown field, a granularity
// without verbose_json or unknown, an upload past
// --max-upload-bytes and a text request are 4xx naming the problem, and the server keeps
// serving.
//   node audio.js URL OPENAI_PACKAGE_DIR DIR
'use strict';
const assert = require('assert/strict');
const fs = require('fs');
const path = require('path');

const [URL, PKG, DIR] = process.argv.slice(2);
const OpenAI = require(path.join(PKG, 'node_modules', 'openai'));
const { toFile } = OpenAI;
const client = new OpenAI({ baseURL: URL + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 120000 });
let checks = 0;
const eq = (a, b, msg) => { assert.deepEqual(a, b, msg); ++checks; };
const ok = (c, msg) => { assert.ok(c, msg); ++checks; };
const cli = (ext) => fs.readFileSync(path.join(DIR, 'cli.' + ext), 'utf8');
const speech = () => fs.createReadStream(path.join(DIR, 'speech.flac'));

async function expectError(promise, status, pattern, what) {
  try {
    await promise;
  } catch (e) {
    eq(e.status, status, `${what}: status ${e.status} (${e.message})`);
    ok(pattern.test(e.message), `${what}: message ${e.message}`);
    return;
  }
  assert.fail(`${what}: no error`);
}

(async () => {
  const cliJson = JSON.parse(cli('json'));
  const one = { model: 'whisper', temperature: 0 };
  const plain = await client.audio.transcriptions.create({ ...one, file: speech() });
  eq(plain.text, cliJson.text, 'json: the CLI text');
  const text = await client.audio.transcriptions.create({ ...one, file: speech(), response_format: 'text' });
  eq(text.trim(), cliJson.text, 'text');
  eq(await client.audio.transcriptions.create({ ...one, file: speech(), response_format: 'srt' }), cli('srt'), 'srt');
  eq(await client.audio.transcriptions.create({ ...one, file: speech(), response_format: 'vtt' }), cli('vtt'), 'vtt');
  const verbose = await client.audio.transcriptions.create({
    ...one, file: speech(), response_format: 'verbose_json', language: 'en', timestamp_granularities: ['segment'],
  });
  eq(verbose.language, 'english', 'verbose_json language');
  eq(verbose.segments.map((s) => [s.start, s.end, s.text]), cliJson.segments.map((s) => [s.start, s.end, s.text]),
     'verbose_json segments');
  ok(Math.abs(verbose.duration - cliJson.duration) < 1e-9, 'duration');
  // A Buffer upload with a file name (toFile). (temperature 0 is the API's fallback ladder, as the CLI's default.)
  const buf = await toFile(fs.readFileSync(path.join(DIR, 'speech.flac')), 'speech.flac');
  ok(typeof (await client.audio.transcriptions.create({ model: 'whisper', file: buf })).text === 'string', 'toFile upload');

  await expectError(client.audio.translations.create({ model: 'whisper', file: speech() }), 400,
                    /English-only model cannot translate/, 'translation on an English-only model');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: fs.createReadStream(path.join(DIR, 'noise.mp3')) }),
                    400, /noise\.mp3.*not a readable audio file/, 'random bytes');
  // Word timestamps (verbose_json only): OpenAI's words list, equal to `tfm transcribe --word-timestamps`'s.
  const cliWords = JSON.parse(cli('words.json'));
  const worded = await client.audio.transcriptions.create({
    ...one, file: speech(), response_format: 'verbose_json', timestamp_granularities: ['word', 'segment'],
  });
  eq(worded.words, cliWords.words, 'verbose_json words');
  ok(worded.words.length > 0 && worded.words.every((w) => w.start <= w.end), 'words in order');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: speech(), timestamp_granularities: ['word'] }),
                    400, /word timestamps come with response_format verbose_json/, 'word timestamps without verbose_json');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: speech(), response_format: 'verbose_json',
                                                         timestamp_granularities: ['letter'] }),
                    400, /each is 'segment' or 'word'/, 'an unknown granularity');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: speech(), temperature: 3 }), 400,
                    /temperature must be a number in \[0, 1\]/, 'temperature out of range');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: speech(), bogus: 'x' }), 400,
                    /unknown form field 'bogus'/, 'unknown field');
  const big = await toFile(Buffer.alloc(500000, 1), 'big.wav');
  await expectError(client.audio.transcriptions.create({ model: 'whisper', file: big }), 413, /larger than --max-upload-bytes/, 'upload too large');
  await expectError(client.completions.create({ model: 'whisper', prompt: 'hi' }), 400, /speech model/, 'text on a speech model');
  const r = await fetch(URL + '/v1/audio/transcriptions', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  eq(r.status, 400, 'a JSON body');
  eq((await fetch(URL + '/health')).status, 200, 'still serving');
  eq((await client.audio.transcriptions.create({ ...one, file: speech() })).text, cliJson.text, 'still transcribing');
  console.log(`audio API: ${checks} checks passed`);
})().catch((e) => { console.error('FAIL:', e); process.exit(1); });
