// The live list of turns, running and past: GET /turns as an event stream (the browser's
// EventSource sends `Accept: text/event-stream` by itself). The first frame, `turns`, is the
// list (newest first, the records of the JSON GET /turns); each `turn` frame one record that
// changed (a turn began, paused, resumed or ended: it replaces that turn's row); `reset` says
// "read the list again" (the feed reopens). Heartbeats are comments: EventSource skips them.
//
// When the stream cannot be used (an older server answers the JSON instead, a token the
// EventSource cannot send, an error) one JSON GET /turns stands in and the state says the
// list is not live. No DOM here: history.js draws the list, the page wires them.

export const FEED_LIMIT = 50;

/** The list newest first, each turn once (the latest record of it), at most `limit`. */
export function mergeTurn(turns, record, limit = FEED_LIMIT) {
  if (!record || typeof record !== 'object' || !record.turn_id) return turns;
  const out = turns.filter((t) => t.turn_id !== record.turn_id);
  out.push(record);
  return sortTurns(out).slice(0, limit);
}

export function sortTurns(turns) {
  const at = (t) => (typeof t.started_at === 'number' ? t.started_at : Infinity); // not started yet: on top
  return turns.slice().sort((a, b) => at(b) - at(a));
}

function listOf(data) {
  return data && Array.isArray(data.turns) ? data.turns.filter((t) => t && typeof t === 'object' && t.turn_id) : [];
}

/** What the list says about itself: 'connecting', 'live', 'reconnecting', 'static' (one JSON read) or 'failed'. */
export const FEED_TEXT = {
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  static: 'Not live',
  failed: 'Not loaded',
};

export class TurnFeed {
  /**
   * @param url GET /turns with its filters (graphs.js turnsListUrl)
   * @param opts {onChange(state), getJson (api.js), headers () => {...}, EventSourceImpl,
   *   live: false to read the JSON once without trying the stream (a token is needed: EventSource
   *   cannot send it), liveReason: why not live then}
   * state: {turns, status (a FEED_TEXT key), note (a sentence, or '')}
   */
  constructor(url, { onChange, getJson, headers = () => ({}), EventSourceImpl = globalThis.EventSource, live = true, liveReason = '' } = {}) {
    this.url = url;
    this.onChange = onChange || (() => {});
    this.getJson = getJson;
    this.headers = headers;
    this.EventSourceImpl = EventSourceImpl;
    this.live = live && typeof EventSourceImpl === 'function';
    this.liveReason = liveReason || (typeof EventSourceImpl === 'function' ? '' : 'this browser has no EventSource');
    this.source = null;
    this.state = { turns: [], status: 'connecting', note: '' };
    this.gotList = false; // the stream sent its `turns` frame
    this.stopped = true;
    this.serial = 0; // the JSON read of a stopped or reopened feed is ignored
  }

  get running() {
    return !this.stopped;
  }

  start() {
    if (!this.stopped) return this;
    this.stopped = false;
    if (this.live) this._open();
    else this._readOnce(this.liveReason);
    return this;
  }

  stop() {
    this.stopped = true;
    this.serial++;
    this._close();
  }

  _set(patch) {
    this.state = { ...this.state, ...patch };
    this.onChange(this.state);
  }

  _close() {
    if (this.source) {
      this.source.close();
      this.source = null;
    }
  }

  _open() {
    this._close();
    this.gotList = false;
    this._set({ status: this.state.turns.length ? 'reconnecting' : 'connecting', note: '' });
    let source;
    try {
      source = new this.EventSourceImpl(this.url);
    } catch (e) {
      this._readOnce(`the stream could not be opened (${e.message})`);
      return;
    }
    this.source = source;
    const mine = () => this.source === source && !this.stopped;
    source.addEventListener('turns', (e) => {
      if (!mine()) return;
      let data;
      try {
        data = JSON.parse(e.data);
      } catch (_) {
        return;
      }
      this.gotList = true;
      this._set({ turns: sortTurns(listOf(data)).slice(0, FEED_LIMIT), status: 'live', note: '' });
    });
    source.addEventListener('turn', (e) => {
      if (!mine()) return;
      let record;
      try {
        record = JSON.parse(e.data);
      } catch (_) {
        return;
      }
      this._set({ turns: mergeTurn(this.state.turns, record), status: 'live' });
    });
    source.addEventListener('reset', () => {
      if (mine()) this._open(); // the server lost track of this reader: read the list again
    });
    source.addEventListener('open', () => {
      if (mine() && this.gotList) this._set({ status: 'live' });
    });
    source.addEventListener('error', () => {
      if (!mine()) return;
      if (source.readyState === 2 /* CLOSED */) {
        // refused (an error status), or not an event stream (an older server's JSON)
        this._close();
        this._readOnce(this.gotList ? 'the stream of turns closed' : 'the server does not stream the list of turns');
      } else {
        this._set({ status: 'reconnecting' }); // EventSource reconnects by itself
      }
    });
  }

  async _readOnce(why) {
    const serial = ++this.serial;
    try {
      const data = await this.getJson(this.url, { headers: this.headers() });
      if (serial !== this.serial || this.stopped) return;
      this._set({ turns: sortTurns(listOf(data)).slice(0, FEED_LIMIT), status: 'static', note: `This list is not live (${why}): it shows the turns as they were when it was read.` });
    } catch (e) {
      if (serial !== this.serial || this.stopped) return;
      this._set({ status: 'failed', note: `The turns could not be loaded: ${e.message}` });
    }
  }
}
