// HTTP client of the relay: streamed runs (SSE over fetch), the JSON fallback, errors.

import { SSEParser, readEventStream } from './sse.js';
import { isTerminalEvent } from './turn.js';

/** A 4xx/5xx answered before any stream started: {error:{code,message}}. */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** Streaming could not be used (no readable body, not an event stream, cut before any event). */
export class StreamUnavailable extends Error {
  constructor(message, cause) {
    super(message);
    this.name = 'StreamUnavailable';
    this.cause = cause;
  }
}

export function streamingSupported(g = globalThis) {
  return (
    typeof g.fetch === 'function' &&
    typeof g.TextDecoder === 'function' &&
    typeof g.ReadableStream === 'function' &&
    typeof g.ReadableStream.prototype.getReader === 'function'
  );
}

/** Turn a non-OK response into an ApiError, reading the JSON error body when there is one. */
export async function errorFromResponse(res) {
  let code = `http_${res.status}`;
  let message = `The server answered ${res.status}${res.statusText ? ' ' + res.statusText : ''}.`;
  try {
    const text = await res.text();
    const body = JSON.parse(text);
    if (body && body.error && typeof body.error === 'object') {
      if (body.error.code) code = String(body.error.code);
      if (body.error.message) message = String(body.error.message);
    } else if (body && typeof body.detail === 'string') {
      message = body.detail;
    }
  } catch (_) {
    /* not JSON: keep the generic message */
  }
  return new ApiError(res.status, code, message);
}

/**
 * POST a run (a chat or a resume) and read its SSE stream, calling onEvent(event) for each
 * relay event (parsed JSON). Resolves to {terminal, count, lastEventId, retry} when the stream
 * ends or a terminal event arrives. Throws ApiError (4xx/5xx before the stream),
 * StreamUnavailable (no stream; nothing was received), or the network error if events were
 * already received (so the caller can resume from lastEventId).
 */
export async function streamRun(url, body, { headers = {}, signal, onEvent, fetchImpl } = {}) {
  const f = fetchImpl || globalThis.fetch;
  if (!streamingSupported() && !fetchImpl) throw new StreamUnavailable('This browser cannot read a streamed response.');
  let res;
  try {
    res = await f(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', ...headers },
      body: JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (e) {
    if (signal && signal.aborted) throw e;
    throw new StreamUnavailable('The streaming request failed before any event.', e);
  }
  if (!res.ok) throw await errorFromResponse(res);
  return readRun(res, { onEvent, signal });
}

/** GET a turn's events from a cursor (after a cut stream). Same result as streamRun. */
export async function resumeStream(turnId, lastEventId, { headers = {}, signal, onEvent, fetchImpl } = {}) {
  const f = fetchImpl || globalThis.fetch;
  const h = { Accept: 'text/event-stream', ...headers };
  if (lastEventId) h['Last-Event-ID'] = String(lastEventId);
  const res = await f(`/turns/${encodeURIComponent(turnId)}/events`, { headers: h, signal, cache: 'no-store' });
  if (!res.ok) throw await errorFromResponse(res);
  return readRun(res, { onEvent, signal });
}

async function readRun(res, { onEvent, signal }) {
  const type = (res.headers.get('content-type') || '').toLowerCase();
  if (!type.startsWith('text/event-stream')) throw new StreamUnavailable(`Expected an event stream, got "${type || 'no content type'}".`);
  if (!res.body || typeof res.body.getReader !== 'function') throw new StreamUnavailable('The response body cannot be read as a stream.');
  const parser = new SSEParser();
  let count = 0;
  let terminal = null;
  try {
    for await (const sse of readEventStream(res.body, { parser })) {
      let ev;
      try {
        ev = JSON.parse(sse.data);
      } catch (_) {
        continue; // not JSON: not ours
      }
      if (!ev || typeof ev !== 'object') continue;
      if (!ev.type) ev.type = sse.type;
      count++;
      if (onEvent) onEvent(ev, sse);
      if (isTerminalEvent(ev)) {
        terminal = ev;
        break; // the run is over: stop reading (the generator releases the body)
      }
    }
  } catch (e) {
    if (signal && signal.aborted) throw e;
    if (count === 0) throw new StreamUnavailable('The stream failed before any event.', e);
    e.lastEventId = parser.lastEventId;
    e.count = count;
    throw e;
  }
  if (count === 0 && !terminal) throw new StreamUnavailable('The stream ended before any event.');
  return { terminal, count, lastEventId: parser.lastEventId, retry: parser.retry };
}

/** The JSON path: POST without the SSE Accept; resolves to the ChatResponse. */
export async function postJson(url, body, { headers = {}, signal, fetchImpl } = {}) {
  const f = fetchImpl || globalThis.fetch;
  const res = await f(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...headers },
    body: JSON.stringify(body),
    signal,
    cache: 'no-store',
  });
  if (!res.ok) throw await errorFromResponse(res);
  return res.json();
}

export async function getJson(url, { fetchImpl, signal, headers = {} } = {}) {
  const f = fetchImpl || globalThis.fetch;
  const res = await f(url, { headers: { Accept: 'application/json', ...headers }, signal, cache: 'no-store' });
  if (!res.ok) throw await errorFromResponse(res);
  return res.json();
}

/** The fault header from the page URL (?fault=generate=error), or null. */
export function faultFromLocation(search) {
  try {
    const v = new URLSearchParams(search).get('fault');
    return v ? v : null;
  } catch (_) {
    return null;
  }
}

/**
 * The resume body for a choice. One interrupt: its value directly; several: {interrupt_id: value}.
 */
export function resumeBody(threadId, turnId, interrupts, value) {
  let resume = value;
  if (Array.isArray(interrupts) && interrupts.length > 1) {
    resume = {};
    for (const it of interrupts) resume[it.id] = value;
  }
  return { thread_id: threadId, turn_id: turnId, resume };
}

/**
 * Read a turn's event stream (a fetch response) to its end, calling onEvent(ev) for each event;
 * `reconnect`/`reset` frames are not events of the turn and are skipped. Resolves to {count}.
 */
export async function readTurnEvents(res, { onEvent } = {}) {
  if (!res.body || typeof res.body.getReader !== 'function') throw new StreamUnavailable('The response cannot be read as a stream.');
  let count = 0;
  for await (const sse of readEventStream(res.body, { parser: new SSEParser() })) {
    let ev;
    try {
      ev = JSON.parse(sse.data);
    } catch (_) {
      continue;
    }
    if (!ev || typeof ev !== 'object') continue;
    if (!ev.type) ev.type = sse.type;
    if (ev.type === 'reconnect' || ev.type === 'reset') continue;
    count++;
    if (onEvent) onEvent(ev, sse);
  }
  return { count };
}

/**
 * Replay a past turn from its stored spans: GET /turns/{id}/events?source=spans&speed=S.
 * Unlike a run, a replay reads on through a pause into the resumed run, to the end of the
 * body. A refusal (404, 410...) is an ApiError with the server's message.
 */
export async function replayTurn(turnId, speed, { headers = {}, signal, onEvent, fetchImpl } = {}) {
  const f = fetchImpl || globalThis.fetch;
  const url = `/turns/${encodeURIComponent(turnId)}/events?source=spans&speed=${encodeURIComponent(speed)}`;
  const res = await f(url, { headers: { Accept: 'text/event-stream', ...headers }, signal, cache: 'no-store' });
  if (!res.ok) throw await errorFromResponse(res);
  if (!res.body || typeof res.body.getReader !== 'function') throw new StreamUnavailable('The replay cannot be read as a stream.');
  return readTurnEvents(res, { onEvent });
}
