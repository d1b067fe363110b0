// The conversation this page drives: send a message (POST the graph's chat route), answer a
// pause from its card (POST the resume route: the graph's own, or the one the paused event
// names), stop the running turn (POST /turns/{id}/cancel), and the example chips.

import { LEGACY_ROUTES } from './graphs.js';

/**
 * `page` (app.js): {app, ui, chat, run, render, announce, stopWaitClock, authHeaders}.
 */
export function createChatSend(page) {
  const { app, ui, chat } = page;

  /** The routes of the shown graph (an older server's: POST /chat, /chat/resume). */
  function routes() {
    return (app.graph && app.graph.routes) || LEGACY_ROUTES;
  }

  function onExample(text) {
    if (app.busy || app.model.outcome === 'paused') {
      ui.input.value = text;
      ui.input.focus();
      return;
    }
    sendMessage(text);
  }

  function startTurnView() {
    app.replayed = null; // a new turn, live
    page.stopWaitClock();
    app.approvalCard = null;
    chat.endStreamed(true);
    app.model.reset();
    app.selected = null;
    app.clockSkew = -Infinity;
  }

  async function sendMessage(text) {
    text = text.trim();
    if (!text || app.busy || app.mode !== 'chat') return;
    startTurnView();
    chat.add('user', text);
    ui.input.value = '';
    app.model.outcome = 'running';
    page.render();
    page.announce('Sent. The agent is working.');
    const body = { message: text };
    if (app.threadId) body.thread_id = app.threadId;
    app.turnRoutes = routes();
    await page.run(app.turnRoutes.chat, body);
  }

  /** Where a resume goes: the graph's own route for a turn this page started; for a turn opened
   * from the list or by id, the paused event's hint (it may belong to another graph). */
  function resumePath() {
    if (app.turnRoutes) return app.turnRoutes.resume;
    const hint = app.model.resumeHint;
    const p = hint && typeof hint.path === 'string' ? hint.path : null;
    return p && p.startsWith('/') && !p.startsWith('//') ? p : routes().resume;
  }

  /** The card was answered: POST the resume (its value from interrupts.js) and stream the run. */
  async function resumeTurn(resume, announcement) {
    page.stopWaitClock();
    if (app.following) {
      // a followed turn: the resume run streams on its POST, not on the followed stream
      const { controller } = app.following;
      app.following = null;
      controller.abort();
    }
    const m = app.model;
    page.announce(announcement);
    m.outcome = 'running';
    page.render();
    await page.run(resumePath(), { thread_id: m.threadId || app.threadId, turn_id: m.turnId, resume }, { resumed: true });
  }

  async function stopTurn() {
    const m = app.model;
    if (m.turnId && !m.terminal) {
      ui.stop.disabled = true;
      try {
        const res = await fetch(`/turns/${encodeURIComponent(m.turnId)}/cancel`, { method: 'POST', headers: { Accept: 'application/json', ...page.authHeaders() } });
        if (!res.ok && app.controller) app.controller.abort();
      } catch (_) {
        if (app.controller) app.controller.abort();
      } finally {
        ui.stop.disabled = false;
      }
    } else if (app.controller) {
      app.controller.abort();
    }
  }

  return { routes, onExample, startTurnView, sendMessage, resumePath, resumeTurn, stopTurn };
}
