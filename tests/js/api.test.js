import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { streamRun, postJson, ApiError, StreamUnavailable, resumeBody, faultFromLocation, resumeStream } from '../../relay/spa/api.js';

const paused = readFileSync(new URL('fixtures/recorded_paused.sse', import.meta.url), 'utf8');

function sseResponse(chunks, { status = 200, type = 'text/event-stream', error = null } = {}) {
  const enc = new TextEncoder();
  let i = 0;
  const body = new ReadableStream({
    pull(c) {
      // one chunk per read, so that an error comes after the chunks were delivered
      if (i < chunks.length) c.enqueue(enc.encode(chunks[i++]));
      else if (error) c.error(error);
      else c.close();
    },
  });
  return new Response(body, { status, headers: { 'content-type': type } });
}

test('streamRun posts with the SSE Accept and stops at the terminal event', async () => {
  let seen;
  const fetchImpl = async (url, init) => {
    seen = { url, init };
    return sseResponse([paused.slice(0, 777), paused.slice(777), 'id: 99\nevent: x\ndata: {"type":"after"}\n\n']);
  };
  const events = [];
  const r = await streamRun('/chat', { message: 'hi' }, { fetchImpl, headers: { 'X-Relay-Fault': 'generate=error' }, onEvent: (e) => events.push(e) });
  assert.equal(seen.init.method, 'POST');
  assert.equal(seen.init.headers.Accept, 'text/event-stream');
  // the relay takes JSON bodies only as application/json (anything else is a 415)
  assert.equal(seen.init.headers['Content-Type'], 'application/json');
  assert.equal(seen.init.headers['X-Relay-Fault'], 'generate=error');
  assert.deepEqual(JSON.parse(seen.init.body), { message: 'hi' });
  assert.equal(r.terminal.type, 'paused');
  assert.equal(events.at(-1).type, 'paused');
  assert.ok(!events.some((e) => e.type === 'after'), 'nothing read past the terminal event');
  assert.equal(r.retry, 2000);
});

test('postJson sends its body as application/json', async () => {
  let seen;
  const fetchImpl = async (url, init) => {
    seen = init;
    return new Response('{"status":"answered"}', { headers: { 'content-type': 'application/json' } });
  };
  assert.deepEqual(await postJson('/chat/resume', { resume: true }, { fetchImpl }), { status: 'answered' });
  assert.equal(seen.method, 'POST');
  assert.equal(seen.headers['Content-Type'], 'application/json');
  assert.deepEqual(JSON.parse(seen.body), { resume: true });
});

test('a 4xx JSON error before the stream becomes an ApiError with its message', async () => {
  const fetchImpl = async () =>
    new Response(JSON.stringify({ error: { code: 'invalid_message', message: "'message' must be a non-empty string." } }), { status: 422, headers: { 'content-type': 'application/json' } });
  await assert.rejects(streamRun('/chat', { message: '' }, { fetchImpl }), (e) => e instanceof ApiError && e.status === 422 && e.code === 'invalid_message' && /non-empty/.test(e.message));
  await assert.rejects(postJson('/chat', {}, { fetchImpl }), ApiError);
});

test('failures before the first event are StreamUnavailable (the JSON fallback applies)', async () => {
  await assert.rejects(streamRun('/chat', {}, { fetchImpl: async () => { throw new TypeError('Failed to fetch'); } }), StreamUnavailable);
  await assert.rejects(streamRun('/chat', {}, { fetchImpl: async () => new Response('{}', { headers: { 'content-type': 'application/json' } }) }), StreamUnavailable);
  await assert.rejects(streamRun('/chat', {}, { fetchImpl: async () => sseResponse(['retry: 2000\n\n: hb\n\n']) }), StreamUnavailable);
  await assert.rejects(streamRun('/chat', {}, { fetchImpl: async () => sseResponse(['retry: 2000\n\n'], { error: new TypeError('network') }) }), StreamUnavailable);
});

test('a cut after events is not a fallback: it reports the last event id', async () => {
  const cut = paused.slice(0, paused.indexOf('id: 4\n'));
  const events = [];
  const r = await streamRun('/chat', {}, { fetchImpl: async () => sseResponse([cut]), onEvent: (e) => events.push(e) });
  assert.equal(r.terminal, null);
  assert.equal(r.lastEventId, '3');
  await assert.rejects(
    streamRun('/chat', {}, { fetchImpl: async () => sseResponse([cut], { error: new TypeError('reset') }) }),
    (e) => !(e instanceof StreamUnavailable) && e.lastEventId === '3',
  );
});

test('resumeStream sends Last-Event-ID to the turn events endpoint', async () => {
  let seen;
  const rest = paused.slice(paused.indexOf('id: 4\n'));
  await resumeStream('t/1', '3', { fetchImpl: async (url, init) => ((seen = { url, init }), sseResponse([rest])) });
  assert.equal(seen.url, '/turns/t%2F1/events');
  assert.equal(seen.init.headers['Last-Event-ID'], '3');
});

test('resume body and fault parameter', () => {
  assert.deepEqual(resumeBody('th', 'tu', [{ id: 'a' }], { approved: true }), { thread_id: 'th', turn_id: 'tu', resume: { approved: true } });
  assert.deepEqual(resumeBody('th', 'tu', [{ id: 'a' }, { id: 'b' }], { approved: false }).resume, { a: { approved: false }, b: { approved: false } });
  assert.equal(faultFromLocation('?fault=generate=error'), 'generate=error');
  assert.equal(faultFromLocation('?fault=generate%3Ddelay%3A2'), 'generate=delay:2');
  assert.equal(faultFromLocation(''), null);
});
