// The pause of the shown turn: the card in the conversation (answerable here, or a notice of
// where it is answered) and the live wait clock under it and in the outcome line.

import { renderInterruptCard, renderInterruptNotice, settleAnsweredElsewhere } from './interrupt-card.js';
import { browserResume } from './client-tools.js';
import { formatClock } from './format.js';
import { safePath } from './graphs.js';

/** `page` (app.js): {app, chat, renderOutcome, resumeTurn}. */
export function createPause(page) {
  const { app, chat } = page;

  /**
   * Can this page resume the paused turn? Its own turn, yes (the graph's route). A turn opened
   * from the list or by id only when its paused event names a path (null: the agent runs in
   * another process and is resumed there) and this server runs graphs (a relay-only server has
   * no route to resume anything). Else the card shows what is asked and where to answer it.
   */
  function resumeHere() {
    if (app.turnRoutes) return { ok: true, message: '' };
    const hint = app.model.resumeHint;
    const message = app.model.resumeMessage || '';
    const path = hint && typeof hint.path === 'string' ? safePath(hint.path, null) : null;
    return { ok: !!path && app.mode === 'chat', message };
  }

  function showInterrupts(interrupts) {
    const where = resumeHere();
    const ran = where.ok && app.turnRoutes ? browserResume(interrupts) : null;
    if (ran) {
      // tools this browser runs (the person's local time) for a turn this page started:
      // answered here, no card
      const names = ran.names.join(', ');
      chat.add('system', `Your browser ran ${names} for the agent.`, { variant: 'tool' });
      page.resumeTurn(ran.resume, `Your browser ran ${names}.`);
      return;
    }
    const handle = where.ok ? renderInterruptCard(interrupts, { onResume: page.resumeTurn }) : renderInterruptNotice(interrupts, { message: where.message });
    app.approvalCard = handle;
    chat.append(handle.card);
    handle.card.focus({ preventScroll: true });
    app.pausedAt = Date.now();
    clearInterval(app.waitTimer);
    const tick = () => {
      if (!app.pausedAt) return;
      handle.wait.textContent = `Waiting ${formatClock(Date.now() - app.pausedAt)}`;
      page.renderOutcome();
    };
    tick();
    app.waitTimer = setInterval(tick, 1000);
  }

  function stopWaitClock() {
    app.pausedAt = null;
    clearInterval(app.waitTimer);
    app.waitTimer = null;
  }

  /**
   * The turn's next run began while this page's card still waited (no resume sent from here:
   * the wait clock still runs): another client answered the pause (another tab, LangGraph's
   * own clients on the Agent Server API). The card says so and its clock stops.
   */
  function answeredElsewhere() {
    if (!app.approvalCard || !app.pausedAt) return;
    settleAnsweredElsewhere(app.approvalCard.card);
    app.approvalCard = null;
    stopWaitClock();
  }

  return { resumeHere, showInterrupts, stopWaitClock, answeredElsewhere };
}
