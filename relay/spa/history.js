// The list of turns, running and past (the records of GET /turns, newest first, kept live by
// turn-feed.js), drawn with DOM text only (never as HTML). A running or paused turn opens
// live, any other replays. The rows are kept across updates (a changed record updates its
// row in place), so the keyboard stays on the row it was on.

import { formatMs } from './format.js';
import { FEED_TEXT } from './turn-feed.js';

const OUTCOME_LABEL = {
  answered: 'Answered', refused: 'Refused', paused: 'Paused: waiting for a person', error: 'Error',
  cancelled: 'Cancelled', interrupted: 'Interrupted', running: 'Running',
};

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** When a turn started, for a person: "14:02:11" today, else "2 Dec 14:02". */
export function startedLabel(ms, now = Date.now()) {
  if (typeof ms !== 'number') return '';
  const d = new Date(ms);
  const sameDay = new Date(now).toDateString() === d.toDateString();
  return sameDay
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' })
    : d.toLocaleString([], { day: 'numeric', month: 'short', hour: '2-digit', minute: '2-digit' });
}

/** Is the turn still going (so that opening it follows it live)? */
export function isLive(turn) {
  return !!turn && (turn.status === 'running' || turn.status === 'paused' || !turn.status);
}

function shortId(id) {
  const s = String(id || '');
  return s.length > 14 ? `${s.slice(0, 8)}…` : s;
}

/**
 * The row's title: the turn's message; a turn received over OTLP may have none, then its
 * thread (or its own id) says which one it is, and the time (in the meta line) when.
 */
export function turnTitle(turn) {
  const message = typeof turn.message === 'string' ? turn.message.trim() : '';
  if (message) return { text: message, untitled: false };
  if (turn.thread_id) return { text: `Thread ${turn.thread_id}`, untitled: true };
  return { text: `Turn ${shortId(turn.turn_id)}`, untitled: true };
}

const picks = new WeakMap(); // row button -> {turn, onPick}

function fillRow(button, turn, now, showGraph) {
  const status = turn.status || 'running';
  button.dataset.turnId = turn.turn_id;
  button.dataset.status = status;
  button.title = `${isLive(turn) ? 'Follow this turn live' : 'Replay this turn from its stored spans'} (turn ${turn.turn_id}${turn.thread_id ? `, thread ${turn.thread_id}` : ''})`;
  const title = turnTitle(turn);
  const head = el('span', `history-message${title.untitled ? ' history-untitled' : ''}`, title.text);
  const meta = el('span', 'history-meta');
  const badge = el('span', 'history-status', OUTCOME_LABEL[status] || status);
  badge.dataset.outcome = status;
  meta.append(badge, el('span', 'history-time', startedLabel(turn.started_at, now)));
  if (isLive(turn)) meta.append(el('span', 'history-live', 'live'));
  if (typeof turn.duration_ms === 'number') meta.append(el('span', '', formatMs(turn.duration_ms)));
  if (title.untitled && turn.thread_id) meta.append(el('span', 'history-id', `turn ${shortId(turn.turn_id)}`));
  if (showGraph && turn.graph) meta.append(el('span', 'history-graph', turn.graph));
  button.replaceChildren(head, meta);
}

/**
 * Bring `list` up to date with `turns` (one button per turn, in order); `onPick(turn)` opens
 * the turn's latest record. Rows of turns no longer listed are removed. `showGraph`: name each
 * turn's graph (a list of every graph's turns).
 */
export function renderHistory(list, turns, onPick, { now = Date.now(), showGraph = false } = {}) {
  const rows = new Map();
  for (const li of [...list.children]) {
    const b = li.querySelector('button[data-turn-id]');
    if (b) rows.set(b.dataset.turnId, li);
    else li.remove();
  }
  const wanted = [];
  for (const turn of turns) {
    if (!turn || !turn.turn_id || wanted.some((li) => li.dataset.row === turn.turn_id)) continue;
    let li = rows.get(turn.turn_id);
    let button;
    if (li) {
      rows.delete(turn.turn_id);
      button = li.querySelector('button');
    } else {
      li = el('li', 'history-item');
      li.dataset.row = turn.turn_id;
      button = el('button', 'history-turn');
      button.type = 'button';
      button.addEventListener('click', () => {
        const p = picks.get(button);
        if (p) p.onPick(p.turn);
      });
      li.append(button);
    }
    const sig = JSON.stringify([turn.status, turn.message, turn.thread_id, turn.started_at, turn.duration_ms, showGraph && turn.graph]);
    if (button.dataset.sig !== sig) {
      button.dataset.sig = sig;
      fillRow(button, turn, now, showGraph);
    }
    picks.set(button, { turn, onPick });
    wanted.push(li);
  }
  for (const li of rows.values()) li.remove();
  // order: move only what is out of place (the focused row stays put unless it must move)
  wanted.forEach((li, i) => {
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
  });
}

/** Mark the row of the turn the page shows (aria-current), and only that one. */
export function markCurrent(list, turnId) {
  for (const b of list.querySelectorAll('button[data-turn-id]')) {
    if (turnId && b.dataset.turnId === turnId) {
      if (b.getAttribute('aria-current') !== 'true' && typeof b.scrollIntoView === 'function' && b.offsetParent) b.scrollIntoView({ block: 'nearest' });
      b.setAttribute('aria-current', 'true');
    } else b.removeAttribute('aria-current');
  }
}

/** The list's own line: live or not, and why (turn-feed.js state); `refresh` shows when it is not live. */
export function renderFeedState(badge, note, state, refresh = null) {
  if (refresh) refresh.hidden = state.status !== 'static' && state.status !== 'failed';
  if (badge) {
    badge.dataset.feed = state.status;
    badge.textContent = FEED_TEXT[state.status] || state.status;
    badge.title = state.status === 'live' ? 'The list follows the server: turns appear and change as they begin and end' : state.note || '';
  }
  if (note) {
    note.textContent = state.note || '';
    note.hidden = !state.note;
  }
}
