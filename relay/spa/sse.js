// A spec-correct, incremental Server-Sent Events parser (HTML Living Standard,
// "Parsing an event stream"), plus a reader that feeds it from a fetch body.
//
// EventSource cannot POST, so the SPA reads `fetch(...).body` itself. The parser is
// independent of the transport: feed() it text in chunks of any size, split anywhere
// (even between the CR and LF of a CRLF), and it returns the events completed so far.

const BOM = '\uFEFF';

export class SSEParser {
  constructor() {
    this.lastEventId = ''; // the "last event ID" buffer; survives across events
    this.retry = null; // reconnection time in ms, when the stream set one
    this._idBuffer = '';
    this._data = '';
    this._hasData = false;
    this._eventType = '';
    this._pending = ''; // text of a line not yet terminated
    this._skipLF = false; // the previous chunk ended with CR: an LF that follows belongs to it
    this._started = false;
  }

  /** Feed decoded text; returns the events dispatched by it, in order. */
  feed(text) {
    const out = [];
    if (!text) return out;
    if (!this._started) {
      this._started = true;
      if (text.startsWith(BOM)) text = text.slice(1);
    }
    let start = 0;
    let i = 0;
    if (this._skipLF) {
      this._skipLF = false;
      if (text.charCodeAt(0) === 10) {
        start = 1;
        i = 1;
      }
    }
    const n = text.length;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this._pending + text.slice(start, i);
      this._pending = '';
      if (c === 13) {
        if (i + 1 < n) {
          if (text.charCodeAt(i + 1) === 10) i++;
        } else {
          this._skipLF = true;
        }
      }
      start = i + 1;
      this._line(line, out);
    }
    if (start < n) this._pending += text.slice(start);
    return out;
  }

  /**
   * The stream ended. Per the spec an event not terminated by a blank line is
   * discarded, so this returns nothing; it resets the per-event buffers.
   */
  end() {
    this._pending = '';
    this._data = '';
    this._hasData = false;
    this._eventType = '';
    this._skipLF = false;
    return [];
  }

  _line(line, out) {
    if (line === '') {
      this._dispatch(out);
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return; // comment (heartbeats)
    const colon = line.indexOf(':');
    let field;
    let value;
    if (colon === -1) {
      field = line;
      value = '';
    } else {
      field = line.slice(0, colon);
      value = line.slice(colon + 1);
      if (value.charCodeAt(0) === 32 /* space */) value = value.slice(1);
    }
    switch (field) {
      case 'event':
        this._eventType = value;
        break;
      case 'data':
        this._data += value + '\n';
        this._hasData = true;
        break;
      case 'id':
        if (!value.includes('\u0000')) this._idBuffer = value;
        break;
      case 'retry':
        if (/^[0-9]+$/.test(value)) this.retry = parseInt(value, 10);
        break;
      default:
        break; // unknown fields are ignored
    }
  }

  _dispatch(out) {
    this.lastEventId = this._idBuffer;
    if (!this._hasData) {
      this._data = '';
      this._eventType = '';
      return;
    }
    let data = this._data;
    if (data.endsWith('\n')) data = data.slice(0, -1);
    out.push({ type: this._eventType || 'message', data, lastEventId: this.lastEventId });
    this._data = '';
    this._hasData = false;
    this._eventType = '';
  }
}

/**
 * Read an SSE body (a ReadableStream of bytes) and yield parsed SSE events.
 * Decoding is streaming UTF-8, so a multi-byte character split across chunks is whole.
 * Returns when the body ends; the parser is exposed through `opts.parser` if given.
 */
export async function* readEventStream(body, opts = {}) {
  const parser = opts.parser || new SSEParser();
  const reader = body.getReader();
  const decoder = new TextDecoder('utf-8');
  let done = false;
  try {
    while (true) {
      const r = await reader.read();
      if (r.done) break;
      const events = parser.feed(decoder.decode(r.value, { stream: true }));
      for (const ev of events) yield ev;
    }
    for (const ev of parser.feed(decoder.decode())) yield ev;
    parser.end();
    done = true;
  } finally {
    if (!done) {
      // The consumer stopped early (a terminal event) or an error occurred: release the socket.
      try {
        await reader.cancel();
      } catch (_) {
        /* already errored */
      }
    }
    try {
      reader.releaseLock();
    } catch (_) {
      /* ignore */
    }
  }
}

/** Parse a whole SSE text at once (tests, recorded streams). */
export function parseAll(text) {
  const p = new SSEParser();
  return p.feed(text).concat(p.end());
}
