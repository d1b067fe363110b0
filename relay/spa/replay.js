// Opening a turn this page did not start (from a list, or by its id): a running or paused one
// is followed live (GET /turns/{id}/events, follow.js), any other replayed from its stored
// spans (replayTurn, at the panel's speed); each falls back on the other when refused, and
// the line above the graph says why a turn could not be shown.

import { ApiError, replayTurn } from './api.js';
import { isLive, turnTitle } from './history.js';
import { followTurnEvents, turnEventsUrl } from './follow.js';

/**
 * `page` (app.js): {app, ui, chat, onEvent, render, setBusy, setActivity, announce, alertText,
 * authHeaders, showTokenForm, newConversation, hideHistory, endRun}.
 */
export function createReplay(page) {
  const { app, ui, chat } = page;

  function selectedSpeed() {
    const checked = ui.history.querySelector('input[name="replay-speed"]:checked');
    return checked ? Number(checked.value) : 1;
  }

  /** A run this page started is streaming (a followed or replayed turn gives way to another). */
  function ownRunBusy() {
    return app.busy && !app.following && !app.replaying;
  }

  /** A turn record (GET /turns item): a running or paused one is followed live, any other replayed. */
  function openTurn(turn) {
    if (isLive(turn)) return followTurn(turn);
    return replayPastTurn(turn);
  }

  /** What the conversation shows of an opened turn: its message, else which turn it is. */
  function introduce(turn) {
    const title = turnTitle(turn);
    if (!title.untitled) chat.add('user', title.text);
    else chat.add('system', `Turn ${turn.turn_id}${turn.thread_id ? ` on thread ${turn.thread_id}` : ''} (it sent no message)`, { variant: 'info' });
  }

  /** The line above the graph (and the graph area) says why a turn could not be shown. */
  function showOpenFailure(text, e, noteEl = null) {
    const message = e && e.message ? e.message : String(e || 'unknown error');
    app.status = { kind: 'failed', text, detail: message };
    page.setActivity(null);
    if (noteEl) noteEl.textContent = `${text}: ${message}`;
    if (e instanceof ApiError && e.status === 401) page.showTokenForm(message);
    page.alertText(`${text}: ${message}`);
    page.render();
  }

  /**
   * Follow a turn with EventSource: GET /turns/{id}/events from its first event. A running turn
   * draws node by node; a finished one is drawn from its log; a paused one waits on (resumed
   * elsewhere, its next run comes on the same stream). `wait`: seconds for a turn not arrived yet.
   */
  async function followTurn(turn, { wait = 0, noteEl = null, input = null, byId = false, instead = null } = {}) {
    if (ownRunBusy()) return;
    page.newConversation({ quiet: true });
    page.hideHistory();
    const id = turn.turn_id;
    if (!byId) introduce(turn);
    if (instead) chat.add('system', instead, { variant: 'info' });
    app.status = wait ? { kind: 'waiting', text: 'Waiting for the turn to arrive', detail: `up to ${wait} s for the first spans of ${id}` } : { kind: 'waiting', text: 'Opening the turn', detail: id };
    page.setBusy(true);
    page.setActivity(wait ? 'Waiting for the turn…' : 'Following the turn…');
    page.announce(wait ? 'Waiting for the turn to arrive.' : turn.status === 'paused' ? 'Opening a paused turn.' : 'Following the turn live.');
    const controller = new AbortController();
    app.controller = controller;
    app.following = { turnId: id, controller };
    page.render();
    let replayInstead = false;
    const mine = () => app.following && app.following.controller === controller;
    try {
      const result = await followTurnEvents(turnEventsUrl(id, { wait }), {
        headers: page.authHeaders(),
        signal: controller.signal,
        onEvent: (ev) => {
          if (!mine()) return;
          if (app.status) {
            app.status = null;
            if (noteEl) noteEl.textContent = '';
            if (input && input.value.trim() === id) input.value = ''; // it came: the box is free again
            if (byId) page.setActivity('Following the turn…');
          }
          page.onEvent(ev);
          followedState();
        },
        onState: (state) => {
          if (!mine() || app.model.outcome !== 'running') return;
          if (state === 'reconnecting') {
            page.announce('Connection interrupted: reconnecting…');
            page.setActivity('Connection interrupted: reconnecting…');
          } else {
            page.setActivity('Following the turn…');
          }
        },
      });
      if (result.ended === 'aborted' || !mine()) return;
      if (result.ended === 'reset') replayInstead = true; // the log no longer has what we lack
      else if (!result.count) showOpenFailure('Nothing to show', new Error('the server sent no event of this turn'), noteEl);
      else if (app.model.outcome === 'running') showOpenFailure('The stream closed', new Error('the turn’s events stopped before it ended; open it again to read on'));
    } catch (e) {
      if (controller.signal.aborted || !mine()) return;
      if (e instanceof ApiError && (e.status === 409 || e.status === 410) && !instead) replayInstead = true; // its live log is gone: its spans tell it
      else showOpenFailure(wait ? 'The turn did not arrive' : 'The turn could not be followed', e, noteEl);
    } finally {
      if (mine()) {
        app.following = null;
        page.endRun(controller);
      }
    }
    if (replayInstead) await replayPastTurn(turn, { instead: 'The turn’s live log no longer holds its events: it is replayed from its stored spans.' });
  }

  /** While a followed turn is paused (or over) nothing runs: the page is not busy until it resumes. */
  function followedState() {
    if (app.model.outcome !== 'running') {
      if (app.busy) page.setBusy(false);
      page.setActivity(null);
    } else if (!app.busy) {
      page.setBusy(true); // resumed (elsewhere): it runs again
      page.setActivity('Following the turn…');
    }
  }

  /**
   * Replay a past turn into the same graph, timeline and chat, from its stored spans. When the
   * replay is refused before any event (no stored spans, an unknown turn) the turn is followed
   * from its event log instead, and if that fails too the line above the graph says why.
   */
  async function replayPastTurn(turn, { instead = null } = {}) {
    if (ownRunBusy()) return;
    const speed = selectedSpeed();
    page.newConversation({ quiet: true });
    page.hideHistory();
    const controller = new AbortController();
    app.replaying = { turnId: turn.turn_id, speed, controller };
    introduce(turn);
    if (instead) chat.add('system', instead, { variant: 'info' });
    app.status = { kind: 'waiting', text: 'Opening the turn', detail: `replaying ${turn.turn_id} from its stored spans` };
    page.setBusy(true);
    page.setActivity('Replaying…');
    page.announce(`Replaying a past turn${speed === 0 ? '' : ` at ${speed}×`}.`);
    app.controller = controller;
    page.render();
    let count = 0;
    let followInstead = null;
    try {
      const result = await replayTurn(turn.turn_id, speed, {
        headers: page.authHeaders(),
        signal: controller.signal,
        onEvent: (ev) => {
          count++;
          app.status = null;
          page.onEvent(ev);
        },
      });
      if (!controller.signal.aborted && !result.count) showOpenFailure('Nothing to replay', new Error('that turn has no stored events to replay'));
    } catch (e) {
      if (!controller.signal.aborted) {
        if (!count && !instead && e instanceof ApiError && e.status !== 401) followInstead = `The replay from stored spans failed (${e.message}): reading the turn’s event log instead.`;
        else showOpenFailure(count ? 'The replay stopped' : 'The replay failed', e);
      }
    } finally {
      if (app.controller === controller) {
        app.controller = null;
        page.setBusy(false);
        page.setActivity(null);
      }
      // still this replay's turn on screen (not a new conversation started meanwhile)
      if (app.replaying && app.replaying.controller === controller) {
        if (!followInstead) app.replayed = { turnId: turn.turn_id };
        app.replaying = null;
        page.render();
      }
    }
    if (followInstead) await followTurn(turn, { instead: followInstead });
  }

  return { selectedSpeed, ownRunBusy, openTurn, introduce, showOpenFailure, followTurn, followedState, replayPastTurn };
}
