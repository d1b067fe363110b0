// The outcome line above the graph: what the turn is doing or how it ended, in words.
// Pure (model in, text out): the Node tests check it.

import { formatMs, formatClock, OUTCOME_TEXT, toolActivityText } from './format.js';
import { describeInterrupts, asksApproval, pauseDetail } from './interrupts.js';

/**
 * @param model a TurnModel
 * @param opts {pausedAt (client ms when the pause began, or null), pauseKind ('approval' | 'input'), now,
 *   status: what the page is doing about a turn it opens, or why it could not: {kind: 'waiting' | 'failed',
 *   text, detail} (or null). It is the line while the turn has shown nothing, and while it is unfinished.}
 * @returns {outcome, text, detail}
 */
export function outcomeLine(model, { pausedAt = null, pauseKind = 'approval', now = Date.now(), status = null } = {}) {
  const m = model;
  if (status && status.text && (!m.runs.length || m.outcome === null || (m.outcome === 'running' && status.kind === 'failed'))) {
    return { outcome: status.kind === 'waiting' ? 'waiting' : 'error', text: status.text, detail: status.detail || '' };
  }
  const outcome = m.outcome || 'none';
  let text = OUTCOME_TEXT[outcome] || outcome;
  let detail = '';
  if (outcome === 'running') {
    const running = m.instances.filter((i) => i.state === 'running' && !(i.namespace && i.namespace.length)).map((i) => i.node);
    const tools = m.runningTools();
    if (tools.length) detail = toolActivityText(tools[tools.length - 1]);
    else if (running.length) detail = `in ${[...new Set(running)].join(', ')}`;
    const run = m.currentRun();
    if (run && run.kind === 'recover') detail += `${detail ? ' · ' : ''}taken up again after its server stopped`;
  } else if (outcome === 'answered' || outcome === 'refused') {
    const parts = [];
    if (outcome === 'refused') {
      const g = m.instances.map((i) => i.summary && i.summary.guardrail).filter(Boolean).find((x) => x.decision === 'block');
      if (g) parts.push(`by ${g.name || 'guardrail'}${g.reason ? ': ' + g.reason : ''}`);
    }
    const active = m.activeMs();
    if (active > 0) parts.push(`${formatMs(active)} of agent time`);
    else if (m.degraded) {
      const inNodes = m.instances.reduce((a, i) => a + (typeof i.durationMs === 'number' ? i.durationMs : 0), 0);
      if (inNodes > 0) parts.push(`${formatMs(inNodes)} in nodes`);
    }
    if (typeof m.humanWaitMs === 'number') parts.push(`waited ${formatMs(m.humanWaitMs)} for ${waitedFor(pauseKind)}`);
    detail = parts.join(' · ');
  } else if (outcome === 'paused') {
    const descs = describeInterrupts(m.interrupts);
    if (descs.length && !asksApproval(descs)) text = 'Paused: waiting for an answer';
    detail = pauseDetail(descs);
    if (pausedAt) detail += `${detail ? ' · ' : ''}waiting ${formatClock(now - pausedAt)}`;
  } else if (outcome === 'error' || outcome === 'cancelled') {
    if (m.error) detail = m.error.node ? `in ${m.error.node}: ${m.error.message}` : m.error.message;
  }
  return { outcome, text, detail };
}

/**
 * The conversation's note on turn_recovered: the server running the turn stopped and another
 * took it up again. `recovery`: the run's {attempt, reason, resumedFrom} (TurnModel.lastRecovery()).
 */
export function recoveryNotice(recovery) {
  const r = recovery || {};
  const why = r.reason === 'handed_over' ? 'was stopped and handed this turn over' : 'stopped responding';
  const from = r.resumedFrom ? ' from its last checkpoint: the steps that had finished are not run again' : '';
  const count = Number.isInteger(r.attempt) && r.attempt > 1 ? ` (recovery ${r.attempt})` : '';
  return `The server running this turn ${why}; another server took it up again${from}${count}.`;
}

/** What a person was waited for: "approval" or "an answer". */
export function waitedFor(pauseKind) {
  return pauseKind === 'input' ? 'an answer' : 'approval';
}

/** 'approval' when every interrupt asks about an action, else 'input'. */
export function pauseKindOf(interrupts) {
  return asksApproval(describeInterrupts(interrupts)) ? 'approval' : 'input';
}
