// Follow one turn's events with the browser's EventSource: GET /turns/{id}/events. It reads
// the turn from its first event (the server replays its log: a finished turn is drawn too),
// stays open through a pause (a resume run of the same turn goes on on the same stream),
// resumes after a cut with Last-Event-ID by itself, and closes once the server answers 204
// (the reader has the end: docs/events.md, "The end of a turn's stream").
//
// EventSource cannot read an error answer (a 404/410 with a JSON {error:{code,message}}), so
// when it fails before any event the URL is fetched once with fetch(): its JSON error is what
// the caller gets (an ApiError); and when that fetch is answered with the stream itself (a
// server that needs the Authorization header EventSource cannot send), that stream is read.
//
// The event types are those of the contract; a type not listed here is never dispatched to
// the page (unknown types are ignored, as the contract says).

import { ApiError, errorFromResponse, readTurnEvents } from './api.js';
import { isTerminalEvent } from './turn.js';

export const TURN_EVENT_TYPES = [
  'graph_topology', 'graph_discovered', 'node_started', 'node_completed', 'tool_started', 'tool_completed',
  'text_delta', 'paused', 'error', 'turn_completed', 'message_saved', 'custom',
];

/** GET /turns/{id}/events[?wait=S]: `wait` seconds for a turn that has not arrived yet (0: none). */
export function turnEventsUrl(turnId, { wait = 0 } = {}) {
  const base = `/turns/${encodeURIComponent(turnId)}/events`;
  const w = Number(wait);
  return Number.isFinite(w) && w > 0 ? `${base}?wait=${encodeURIComponent(String(Math.round(w)))}` : base;
}

/** The URL without ?wait=: the check after a failed wait asks once more, at once. */
export function withoutWait(url) {
  const [path, query = ''] = url.split('?');
  const p = new URLSearchParams(query);
  p.delete('wait');
  const s = p.toString();
  return s ? `${path}?${s}` : path;
}

/**
 * Follow a turn. onEvent(ev) for each event (parsed JSON, `type` set), onState(state) with
 * 'live' (connected), 'reconnecting' (cut: EventSource reconnects by itself).
 * Resolves to {count, terminal, ended}: `ended` is 'closed' (the server ended it: 204, or a
 * refusal after events), 'aborted' (the signal), 'reset' (the server no longer holds the
 * events after our cursor: replay the turn from its spans instead), 'stream' (read with fetch).
 * Rejects with the ApiError of a refusal before any event.
 */
export function followTurnEvents(url, { onEvent, onState, headers = {}, signal, fetchImpl, EventSourceImpl = globalThis.EventSource } = {}) {
  return new Promise((resolve, reject) => {
    let count = 0;
    let terminal = null;
    let done = false;
    let source = null;
    const finish = (result, error) => {
      if (done) return;
      done = true;
      if (source) source.close();
      if (signal) signal.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve({ count, terminal, ...result });
    };
    const onAbort = () => finish({ ended: 'aborted' });
    if (signal) {
      if (signal.aborted) return finish({ ended: 'aborted' });
      signal.addEventListener('abort', onAbort);
    }
    const deliver = (ev) => {
      count++;
      if (isTerminalEvent(ev)) terminal = ev;
      if (onEvent) onEvent(ev);
    };
    const readWithFetch = async () => {
      const f = fetchImpl || globalThis.fetch;
      try {
        const res = await f(withoutWait(url), { headers: { Accept: 'text/event-stream', ...headers }, signal, cache: 'no-store' });
        if (done) return;
        if (res.status === 204) return finish({ ended: 'closed' });
        if (!res.ok) return finish(null, await errorFromResponse(res));
        const type = (res.headers.get('content-type') || '').toLowerCase();
        if (!type.startsWith('text/event-stream')) return finish(null, new ApiError(res.status, 'not_a_stream', `The server answered ${type || 'no content type'} instead of the turn's events.`));
        await readTurnEvents(res, { onEvent: (ev) => !done && ev.type !== 'reset' && deliver(ev) });
        finish({ ended: 'stream' });
      } catch (e) {
        if (done) return;
        if (signal && signal.aborted) return finish({ ended: 'aborted' });
        finish(null, e instanceof ApiError ? e : new ApiError(0, 'network', `The turn could not be read: ${e.message}`));
      }
    };
    if (typeof EventSourceImpl !== 'function') {
      readWithFetch();
      return;
    }
    try {
      source = new EventSourceImpl(url);
    } catch (_) {
      readWithFetch();
      return;
    }
    const handle = (e) => {
      if (done) return;
      let ev;
      try {
        ev = JSON.parse(e.data);
      } catch (_) {
        return; // not JSON: not ours
      }
      if (!ev || typeof ev !== 'object') return;
      if (!ev.type) ev.type = e.type;
      deliver(ev);
    };
    for (const type of TURN_EVENT_TYPES) if (type !== 'error') source.addEventListener(type, handle);
    source.addEventListener('reset', (e) => {
      let note = null;
      try {
        note = JSON.parse(e.data);
      } catch (_) {
        note = null;
      }
      if (note && note.code === 'bus_lost') return; // a note: the stream goes on, no gap
      finish({ ended: 'reset' });
    });
    source.addEventListener('open', () => !done && onState && onState('live'));
    source.addEventListener('error', (e) => {
      if (done) return;
      if (typeof MessageEvent === 'function' && e instanceof MessageEvent && e.data) {
        handle(e); // ours: the turn failed (an `error` event of the contract)
        return;
      }
      // the browser's: a connection closed (CONNECTING: it reconnects) or failed (CLOSED)
      if (source.readyState === 2 /* CLOSED */) {
        if (count) finish({ ended: 'closed' });
        else {
          source.close();
          readWithFetch(); // why it was refused: EventSource cannot say
        }
      } else if (onState && !(terminal && terminal.type !== 'paused')) {
        onState('reconnecting');
      }
    });
  });
}

/** How long following by id waits for a turn that has not arrived: the page's ?wait=S (0-60), else 30 s. */
export function waitFromLocation(search, fallback = 30) {
  try {
    const raw = new URLSearchParams(search || '').get('wait');
    if (raw === null || raw.trim() === '') return fallback;
    const v = Number(raw);
    return Number.isFinite(v) ? Math.min(Math.max(Math.round(v), 0), 60) : fallback;
  } catch (_) {
    return fallback;
  }
}
