// The turns of the server, running and past: one live list (turn-feed.js, GET /turns) drawn
// in the panel of Turns and, on a relay-only server (no graph: mode 'watch'), in the box that
// replaces the chat; the panel itself; and the id boxes (open or follow a turn by its id).

import { ApiError, getJson } from './api.js';
import { renderHistory, renderFeedState, markCurrent } from './history.js';
import { TurnFeed } from './turn-feed.js';
import { turnsListUrl } from './graphs.js';
import { shownTurnId } from './turn-view.js';

/** `page` (app.js): {app, ui, authHeaders, openTurn, followTurn, ownRunBusy}. */
export function createTurnLists(page) {
  const { app, ui } = page;

  /** Draw the feed's state in every list that shows it: the panel of Turns, and the relay-only box. */
  function renderTurnLists(state) {
    const lists = [[ui.historyList, ui.historyEmpty, ui.historyFeed, ui.historyFeedNote, ui.historyRefresh]];
    if (app.mode === 'watch') lists.push([ui.watchList, ui.watchEmpty, ui.watchFeed, ui.watchFeedNote, ui.watchRefresh]);
    for (const [list, empty, badge, note, refresh] of lists) {
      renderHistory(list, state.turns, page.openTurn, { showGraph: !app.graph });
      markCurrent(list, shownTurnId(app));
      renderFeedState(badge, note, state, refresh);
      empty.hidden = state.turns.length > 0 || state.status === 'connecting' || state.status === 'failed';
    }
  }

  /** Read the list again (a list that is not live: the stream is tried first, again). */
  function refreshFeed() {
    stopFeed();
    startFeed();
  }

  /** The live list of the server's turns (of the shown graph): GET /turns as an event stream. */
  function startFeed() {
    if (app.feed && app.feed.running) return;
    if (app.feed) app.feed.stop();
    const url = turnsListUrl(app.graph && app.graph.name);
    app.feed = new TurnFeed(url, {
      onChange: renderTurnLists,
      getJson,
      headers: page.authHeaders,
      // EventSource cannot send the Authorization header: with a token, one JSON read
      live: !app.token,
      liveReason: 'this server needs a token, which a browser’s EventSource cannot send',
    }).start();
  }

  function stopFeed() {
    if (app.feed) app.feed.stop();
    app.feed = null;
  }

  /** The list is needed while the panel of Turns is open, and always on a relay-only server. */
  function feedNeeded() {
    return app.mode === 'watch' || !ui.history.hidden;
  }

  function openHistory() {
    ui.history.hidden = false;
    ui.historyOpen.setAttribute('aria-expanded', 'true');
    if (app.feed && !app.feed.live) stopFeed(); // a list that is not live is read again
    startFeed();
    const first = ui.historyList.querySelector('button');
    (first || ui.openTurnId).focus();
  }

  function hideHistory() {
    ui.history.hidden = true;
    ui.historyOpen.setAttribute('aria-expanded', 'false');
    if (!feedNeeded()) stopFeed();
  }

  function closeHistory() {
    hideHistory();
    ui.historyOpen.focus();
  }

  /**
   * The id boxes (the panel of Turns, and the relay-only box): GET /turns/{id}, then open it. On a
   * relay-only server a turn not known yet may still arrive (its agent has not sent its first spans):
   * then it is followed with ?wait=, and the server says, after the wait, if it never came.
   */
  async function openTurnById(input, noteEl) {
    const id = input.value.trim();
    if (!id || page.ownRunBusy()) return;
    noteEl.textContent = 'Looking it up…';
    let record = null;
    try {
      record = await getJson(`/turns/${encodeURIComponent(id)}`, { headers: page.authHeaders() });
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) {
        noteEl.textContent = `That turn could not be opened: ${e.message}`;
        input.focus();
        return;
      }
      if (app.mode !== 'watch' || !app.followWait) {
        noteEl.textContent = `There is no turn with the id “${id}”.`;
        input.focus();
        return;
      }
    }
    if (record) {
      input.value = '';
      noteEl.textContent = '';
      await page.openTurn({ ...record, turn_id: record.turn_id || id });
      return;
    }
    noteEl.textContent = `Not here yet: waiting up to ${app.followWait} s for turn “${id}” to arrive…`;
    await page.followTurn({ turn_id: id, status: 'running', message: '' }, { wait: app.followWait, noteEl, input, byId: true });
  }

  return { renderTurnLists, refreshFeed, startFeed, stopFeed, feedNeeded, openHistory, hideHistory, closeHistory, openTurnById };
}
