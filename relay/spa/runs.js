// A run this page started (POST chat or resume), read as it streams: each event to
// `page.onEvent`; a stream cut before the turn ended is re-attached from its last event id
// (GET /turns/{id}/stream); a server or browser that cannot stream falls back on the JSON
// answer (degraded mode: the graph is drawn after the turn). A refusal is said in the chat.

import { ApiError, StreamUnavailable, streamRun, resumeStream, postJson, streamingSupported } from './api.js';
import { OUTCOME_TEXT } from './format.js';
import { pauseKindOf } from './outcome.js';

/**
 * `page` (app.js): {app, ui, chat, onEvent, render, setBusy, setActivity, announce, alertText,
 * headers, authHeaders, showTokenForm, showInterrupts}.
 */
export function createRuns(page) {
  const { app, ui, chat } = page;

  /** Run one POST (chat or resume) as a stream, with the JSON path as the fallback. */
  async function run(url, body, { resumed = false } = {}) {
    page.setBusy(true);
    page.setActivity('Working…');
    const controller = new AbortController();
    app.controller = controller;
    try {
      if (!streamingSupported()) throw new StreamUnavailable('This browser cannot read streamed responses.');
      const result = await streamRun(url, body, { headers: page.headers(), signal: controller.signal, onEvent: page.onEvent });
      if (!result.terminal) await reattach(result.lastEventId, result.retry, controller);
    } catch (e) {
      if (controller.signal.aborted) {
        finishWithError('cancelled', 'You stopped the turn before it started.');
      } else if (e instanceof ApiError) {
        showRequestError(e);
      } else if (e instanceof StreamUnavailable) {
        console.warn('span-relay: streaming unavailable, using the JSON path:', e.message, e.cause || '');
        await runJson(url, body, { resumed });
      } else if (app.model.turnId) {
        // The stream was cut after events arrived: re-attach from the last event id.
        await reattach(e.lastEventId || String(app.model.lastSeq), null, controller);
      } else {
        showRequestError(new ApiError(0, 'network', `The request failed: ${e.message}`));
      }
    } finally {
      endRun(controller, resumed);
    }
  }

  function endRun(controller, resumed = false) {
    if (app.controller === controller) app.controller = null;
    if (resumed && app.approvalCard && app.approvalCard.progress) {
      app.approvalCard.progress.remove();
      app.approvalCard = null;
    }
    page.setBusy(false);
    if (app.model.outcome !== 'running') page.setActivity(null);
    page.render();
    if (!app.model.terminal && app.model.outcome === 'paused') return;
    if (!ui.composer.hidden && (document.activeElement === document.body || !document.activeElement)) ui.input.focus();
  }

  async function reattach(lastEventId, retryMs, controller) {
    const turnId = app.model.turnId;
    const delay = Math.min(Math.max(retryMs || 1000, 250), 5000);
    for (let attempt = 1; attempt <= 3; attempt++) {
      page.announce('Connection interrupted: reconnecting…');
      await new Promise((r) => setTimeout(r, delay));
      if (controller.signal.aborted) return;
      const after = lastEventId || String(app.model.lastSeq);
      try {
        const seen = app.model.lastSeq;
        const res = await resumeStream(turnId, after, {
          headers: page.authHeaders(),
          signal: controller.signal,
          onEvent: (ev) => {
            if (typeof ev.seq === 'number' && ev.seq <= seen) return; // already applied
            page.onEvent(ev);
          },
        });
        if (res.terminal) return;
        lastEventId = res.lastEventId || lastEventId;
      } catch (e) {
        if (e instanceof ApiError) {
          finishWithError('stream_lost', `The connection was lost and the turn could not be re-attached: ${e.message}`);
          return;
        }
        lastEventId = e.lastEventId || lastEventId;
      }
    }
    finishWithError('stream_lost', 'The connection to the server was lost before the turn finished.');
  }

  function finishWithError(code, message) {
    page.onEvent({ type: 'error', code, message, node: null, retryable: true, ts: undefined });
  }

  async function runJson(url, body, { resumed }) {
    let resp;
    try {
      resp = await postJson(url, body, { headers: page.headers() });
    } catch (e) {
      if (e instanceof ApiError) showRequestError(e);
      else showRequestError(new ApiError(0, 'network', `The request failed: ${e.message}`));
      return;
    }
    app.model.applyChatResponse(resp, app.graph && app.graph.topology, { resumed });
    if (app.model.threadId) app.threadId = app.model.threadId;
    page.setActivity(null);
    if (app.model.outcome === 'paused') {
      if (typeof resp.answer === 'string' && resp.answer) chat.add('agent', resp.answer);
      app.pauseKind = pauseKindOf(app.model.interrupts);
      page.announce(app.pauseKind === 'input' ? 'Paused: the agent is waiting for your answer.' : 'Paused: the agent needs your approval.');
      page.showInterrupts(app.model.interrupts);
    } else if (app.model.outcome === 'error' || app.model.outcome === 'cancelled') {
      const msg = app.model.error ? app.model.error.message : 'The turn failed.';
      chat.add('system', msg, { variant: 'error' });
      page.alertText(`Error: ${msg}`);
    } else {
      chat.answer(resp);
      page.announce(`${OUTCOME_TEXT[app.model.outcome] || 'Done'} (degraded mode: drawn after the turn).`);
    }
    page.render();
  }

  function showRequestError(e) {
    page.setActivity(null);
    if (e.status === 401) page.showTokenForm(e.message);
    const text = e.message || 'The request failed.';
    chat.add('system', text, { variant: 'error' }).dataset.errorCode = e.code || '';
    if (!app.model.turnId || app.model.outcome === null || app.model.outcome === 'running') {
      app.model.outcome = 'error';
      app.model.error = { code: e.code, message: text, node: null, retryable: false };
    }
    page.alertText(`Error: ${text}`);
    page.render();
  }

  return { run, endRun, reattach, finishWithError, runJson, showRequestError };
}
