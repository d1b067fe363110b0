// "Past turns": the list of GET /turns (newest first, running ones included), drawn with DOM
// text only (never as HTML). A running or paused turn opens live, any other replays.

import { formatMs } from './format.js';

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

/** Fill `list` with one button per turn; `onPick(turn)` opens it. */
export function renderHistory(list, turns, onPick) {
  list.replaceChildren();
  for (const turn of turns) {
    const item = el('li', 'history-item');
    const button = el('button', 'history-turn');
    button.type = 'button';
    button.dataset.turnId = turn.turn_id;
    button.dataset.status = turn.status || 'running';
    button.title = isLive(turn) ? 'Follow this turn live' : 'Replay this turn from its stored spans';
    button.append(el('span', 'history-message', turn.message || '(no message)'));
    const meta = el('span', 'history-meta');
    const status = turn.status || 'running';
    const badge = el('span', 'history-status', OUTCOME_LABEL[status] || status);
    badge.dataset.outcome = status;
    meta.append(badge, el('span', '', startedLabel(turn.started_at)));
    if (isLive(turn)) meta.append(el('span', 'history-live', 'live'));
    if (typeof turn.duration_ms === 'number') meta.append(el('span', '', formatMs(turn.duration_ms)));
    button.append(meta);
    button.addEventListener('click', () => onPick(turn));
    item.append(button);
    list.append(item);
  }
}
