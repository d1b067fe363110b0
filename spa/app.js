// span-relay SPA: chat + live Agent Execution Graph + timeline. No framework, no build step.
// Every piece of data reaches the page through textContent and attributes, never parsed as HTML.

import { TurnModel } from './turn.js';
import { GraphView } from './graph-view.js';
import { renderTimeline } from './timeline-view.js';
import { ApiError, StreamUnavailable, streamRun, resumeStream, replayTurn, postJson, getJson, faultFromLocation, resumeBody, streamingSupported } from './api.js';
import { renderHistory } from './history.js';
import { formatMs, formatClock, LATENCY_BINS, OUTCOME_TEXT, STATE_TEXT, toolActivityText, argPairs, valueText } from './format.js';

const $ = (id) => document.getElementById(id);

function h(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

const ui = {
  messages: $('messages'),
  chatEmpty: $('chat-empty'),
  composer: $('composer'),
  input: $('message'),
  send: $('send'),
  stop: $('stop'),
  hint: $('composer-hint'),
  activity: $('activity'),
  activityText: $('activity-text'),
  activityIcon: $('activity-icon'),
  outcome: $('outcome'),
  outcomeText: $('outcome-text'),
  outcomeDetail: $('outcome-detail'),
  degradedNote: $('degraded-note'),
  modeBadge: $('mode-badge'),
  faultBadge: $('fault-badge'),
  graph: $('graph'),
  graphScroll: $('graph-scroll'),
  graphEmpty: $('graph-empty'),
  details: $('node-details'),
  timeline: $('timeline'),
  announcer: $('announcer'),
  alert: $('alert'),
  newChat: $('new-chat'),
  tokenForm: $('token-form'),
  tokenInput: $('token-input'),
  legend: $('latency-legend'),
  history: $('history'),
  historyOpen: $('history-open'),
  historyClose: $('history-close'),
  historyList: $('history-list'),
  historyEmpty: $('history-empty'),
};

const app = {
  model: new TurnModel(),
  threadId: null,
  graphTopology: null, // GET /graph, shown before the first turn and used by the JSON path
  traceUrl: null,
  fault: faultFromLocation(location.search),
  busy: false, // a run is streaming
  controller: null,
  selected: null,
  pausedAt: null, // client clock when the run paused (for the live wait clock)
  waitTimer: null,
  tickTimer: null,
  clockSkew: -Infinity, // server ts minus client clock, lower bound
  approvalCard: null,
  liveAnswer: null, // {item, run}: the agent's answer as it is written (text_delta)
  token: null, // API bearer token (kept for this tab only: sessionStorage)
  replaying: null, // {turnId, speed} while a past turn is replayed from its spans
  replayed: null, // {turnId} once a replay is over, while its turn is what is shown
};
try {
  app.token = sessionStorage.getItem('span-relay-token') || null;
} catch (_) {
  /* storage disabled */
}

// Exposed for tests and debugging (read-only use).
window.spanRelay = app;

const graphView = new GraphView(ui.graph, { onSelect: selectNode });

// ---------------------------------------------------------------- announcements

let lastAnnouncement = '';
function announce(text) {
  if (!text || text === lastAnnouncement) return;
  lastAnnouncement = text;
  // Clear then set, so that a repeated phrase is read again.
  ui.announcer.textContent = '';
  setTimeout(() => {
    ui.announcer.textContent = text;
  }, 30);
}

function alertText(text) {
  ui.alert.textContent = '';
  setTimeout(() => {
    ui.alert.textContent = text;
  }, 30);
}

// ---------------------------------------------------------------- rendering

function currentTopology() {
  return app.model.topology || app.graphTopology;
}

function serverNow() {
  return Date.now() + (Number.isFinite(app.clockSkew) ? app.clockSkew : 0);
}

/** Left to right when there is room for the pipeline; top to bottom on a narrow screen. */
function graphDirection() {
  const w = ui.graphScroll.clientWidth || window.innerWidth;
  return w < 640 ? 'TB' : 'LR';
}

function render() {
  const topo = currentTopology();
  graphView.setTopology(topo, graphDirection());
  ui.graphEmpty.hidden = !!(topo && topo.nodes && topo.nodes.length);
  graphView.update(app.model, app.selected);
  renderOutcome();
  renderTimeline(ui.timeline, app.model, { traceUrl: app.traceUrl, now: app.busy ? serverNow() : null });
  renderDetails();
  ui.degradedNote.hidden = !app.model.degraded;
  if (app.replaying) {
    ui.modeBadge.dataset.mode = 'replay';
    ui.modeBadge.textContent = `Replay ${app.replaying.speed === 0 ? '(instant)' : `${app.replaying.speed}×`}`;
  } else if (app.replayed) {
    ui.modeBadge.dataset.mode = 'replay';
    ui.modeBadge.textContent = 'Replayed';
  } else {
    ui.modeBadge.dataset.mode = app.model.degraded ? 'json' : 'stream';
    ui.modeBadge.textContent = app.model.degraded ? 'Degraded: JSON' : 'Live stream';
  }
}

function renderOutcome() {
  const m = app.model;
  const outcome = m.outcome || 'none';
  ui.outcome.dataset.outcome = outcome;
  let text = OUTCOME_TEXT[outcome] || outcome;
  let detail = '';
  if (outcome === 'running') {
    const running = m.instances.filter((i) => i.state === 'running').map((i) => i.node);
    const tools = m.runningTools();
    if (tools.length) detail = toolActivityText(tools[tools.length - 1]);
    else if (running.length) detail = `in ${[...new Set(running)].join(', ')}`;
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
    if (typeof m.humanWaitMs === 'number') parts.push(`waited ${formatMs(m.humanWaitMs)} for approval`);
    detail = parts.join(' · ');
  } else if (outcome === 'paused') {
    const it = m.interrupts[0];
    const v = it && it.value;
    if (v && typeof v === 'object' && v.tool) detail = `${v.tool} needs approval`;
    if (app.pausedAt) detail += `${detail ? ' · ' : ''}waiting ${formatClock(Date.now() - app.pausedAt)}`;
  } else if (outcome === 'error' || outcome === 'cancelled') {
    if (m.error) detail = m.error.node ? `in ${m.error.node}: ${m.error.message}` : m.error.message;
  }
  ui.outcomeText.textContent = text;
  ui.outcomeDetail.textContent = detail;
}

function renderDetails() {
  const id = app.selected;
  const box = ui.details;
  if (!id) {
    box.replaceChildren(h('span', 'muted', 'Select a node (click, or Tab to it) to see what it did.'));
    return;
  }
  const m = app.model;
  const topo = currentTopology();
  const node = topo && topo.nodes.find((n) => n.id === id);
  const state = m.nodeState(id);
  const frag = document.createDocumentFragment();
  const title = h('strong', 'details-title', node && node.label ? node.label : id);
  frag.appendChild(title);
  frag.appendChild(h('span', `state-pill state-${state}`, STATE_TEXT[state]));
  const inst = m.nodeInstances(id);
  inst.forEach((i, k) => {
    const facts = [];
    if (inst.length > 1) facts.push(`#${k + 1}`);
    facts.push(`${STATE_TEXT[i.state]}${typeof i.durationMs === 'number' ? ' in ' + formatMs(i.durationMs) : ''}`);
    const s = i.summary || {};
    if (s.model) facts.push(`model ${s.model}`);
    if (typeof s.input_tokens === 'number' || typeof s.output_tokens === 'number') facts.push(`${s.input_tokens ?? '?'} → ${s.output_tokens ?? '?'} tokens`);
    if (typeof s.documents === 'number') facts.push(`${s.documents} document${s.documents === 1 ? '' : 's'} retrieved`);
    else if (Array.isArray(s.documents)) facts.push(`${s.documents.length} documents retrieved`);
    if (s.guardrail && typeof s.guardrail === 'object') facts.push(`guardrail ${s.guardrail.name || ''} ${s.guardrail.decision || ''}${s.guardrail.reason ? ' (' + s.guardrail.reason + ')' : ''}`.replace(/\s+/g, ' '));
    if (Array.isArray(s.tools) && s.tools.length) facts.push(`tools: ${s.tools.join(', ')}`);
    frag.appendChild(h('span', 'details-fact', facts.join(' · ')));
  });
  if (!inst.length) frag.appendChild(h('span', 'details-fact muted', state === 'skipped' ? 'This turn never reached it.' : 'Not run yet in this turn.'));
  box.replaceChildren(frag);
}

function selectNode(id) {
  app.selected = id;
  graphView.update(app.model, app.selected);
  renderDetails();
}

function buildLegend() {
  const frag = document.createDocumentFragment();
  for (const b of LATENCY_BINS) {
    const li = h('li');
    li.appendChild(h('span', `swatch ${b.cls}`));
    li.appendChild(document.createTextNode(b.label));
    frag.appendChild(li);
  }
  ui.legend.replaceChildren(frag);
}

// ---------------------------------------------------------------- chat log

function scrollToEnd() {
  ui.messages.scrollTop = ui.messages.scrollHeight;
}

function addMessage(role, text, opts = {}) {
  ui.chatEmpty.hidden = true;
  const item = h('article', `msg msg-${role}${opts.variant ? ' msg-' + opts.variant : ''}`);
  const who = h('span', 'msg-who', role === 'user' ? 'You' : role === 'agent' ? 'Support agent' : opts.variant === 'error' ? 'Error' : opts.variant === 'cancelled' ? 'Cancelled' : opts.variant === 'paused' ? 'Paused' : 'Notice');
  item.appendChild(who);
  const body = h('div', 'msg-body', text);
  item.appendChild(body);
  if (opts.replace) opts.replace.replaceWith(item);
  else ui.messages.appendChild(item);
  scrollToEnd();
  return item;
}

/** The answer, final: in place of the streamed text when there is one (they may differ). */
function addAnswer(response, replace = null) {
  const status = response.status || 'answered';
  const variant = status === 'refused' ? 'refused' : status === 'error' ? 'error' : null;
  const text = typeof response.answer === 'string' && response.answer ? response.answer : status === 'refused' ? 'The request was refused.' : '(no answer)';
  const item = addMessage('agent', text, { variant, replace });
  item.dataset.status = status;
  if (replace) item.dataset.streamed = 'true'; // it was written live before this final text
  const cites = Array.isArray(response.citations) ? response.citations : [];
  markCitations(item.querySelector('.msg-body'), text, cites);
  if (status === 'refused') item.querySelector('.msg-who').textContent = 'Support agent · refused';
  if (cites.length) {
    const box = h('div', 'citations');
    box.appendChild(h('span', 'citations-title', 'Sources'));
    const list = h('ol', 'citation-list');
    for (const c of cites) {
      const li = h('li', 'citation');
      const title = typeof c === 'string' ? c : c.title || c.doc_id || 'document';
      li.appendChild(h('span', 'citation-title', title));
      if (c && typeof c === 'object' && c.doc_id && c.doc_id !== title) li.appendChild(h('span', 'citation-id', c.doc_id));
      li.title = c && c.doc_id ? `Knowledge base document ${c.doc_id}` : title;
      list.appendChild(li);
    }
    box.appendChild(list);
    item.appendChild(box);
  }
  scrollToEnd();
  return item;
}

/** Replace "[doc-id]" markers of cited documents by numbered references (text nodes only). */
function markCitations(body, text, cites) {
  const index = new Map();
  cites.forEach((c, i) => {
    if (c && typeof c === 'object' && c.doc_id) index.set(String(c.doc_id), { n: i + 1, title: c.title || c.doc_id });
  });
  if (!index.size) return;
  const parts = text.split(/\[([^\[\]\s]{1,80})\]/g);
  if (parts.length === 1) return;
  const frag = document.createDocumentFragment();
  parts.forEach((part, i) => {
    if (i % 2 === 0) {
      if (part) frag.appendChild(document.createTextNode(part));
      return;
    }
    const ref = index.get(part);
    if (!ref) {
      frag.appendChild(document.createTextNode(`[${part}]`));
      return;
    }
    const sup = h('span', 'cite-ref', String(ref.n));
    sup.title = `Source ${ref.n}: ${ref.title}`;
    sup.setAttribute('aria-label', `source ${ref.n}, ${ref.title}`);
    frag.appendChild(sup);
  });
  body.replaceChildren(frag);
}

/** The answer as it is written: one bubble per run, its text replaced (as text) on each delta. */
function showStreamedText() {
  const m = app.model.streamedMessage();
  if (!m) return;
  let live = app.liveAnswer;
  if (!live || live.run !== m.run || !live.item.isConnected) {
    const item = addMessage('agent', '');
    item.classList.add('msg-streaming');
    item.dataset.streaming = 'true';
    live = app.liveAnswer = { item, run: m.run };
    ui.messages.setAttribute('aria-busy', 'true'); // read the answer once, when it is whole
  }
  live.item.dataset.messageId = m.id;
  live.item.querySelector('.msg-body').textContent = m.text;
  scrollToEnd();
}

/** The streamed text stops growing: it stays (a pause, an error) or is replaced (the answer). */
function endStreamedText(partial) {
  const live = app.liveAnswer;
  app.liveAnswer = null;
  ui.messages.removeAttribute('aria-busy');
  if (!live) return null;
  live.item.dataset.streaming = 'false';
  live.item.classList.remove('msg-streaming');
  if (partial) live.item.classList.add('msg-partial');
  return live.item;
}

function setActivity(text, kind = 'typing') {
  if (!text) {
    ui.activity.hidden = true;
    return;
  }
  ui.activity.hidden = false;
  ui.activity.dataset.kind = kind;
  ui.activityIcon.className = kind === 'tool' ? 'spinner' : 'typing';
  ui.activityText.textContent = text;
}

function setBusy(busy) {
  app.busy = busy;
  const paused = app.model.outcome === 'paused';
  ui.send.disabled = busy || paused;
  ui.input.disabled = busy || paused;
  ui.stop.hidden = !busy;
  ui.hint.textContent = paused ? 'Approve or reject the pending action to continue' : busy ? 'The agent is working…' : 'Enter to send · Shift+Enter for a new line';
  if (busy) {
    if (!app.tickTimer)
      app.tickTimer = setInterval(() => {
        renderTimeline(ui.timeline, app.model, { traceUrl: app.traceUrl, now: serverNow() });
      }, 250);
  } else {
    clearInterval(app.tickTimer);
    app.tickTimer = null;
  }
}

// ---------------------------------------------------------------- approval card

function showApproval(interrupts) {
  const list = Array.isArray(interrupts) ? interrupts : [];
  const card = h('article', 'msg msg-agent approval-card');
  card.setAttribute('aria-labelledby', 'approval-title');
  card.tabIndex = -1;
  const heading = h('h3', 'approval-title', 'Approval needed');
  heading.id = 'approval-title';
  card.appendChild(heading);
  for (const it of list) {
    const v = it && typeof it === 'object' && 'value' in it ? it.value : it;
    const block = h('div', 'approval-action');
    if (v && typeof v === 'object' && v.tool) {
      const p = h('p', 'approval-lead');
      p.appendChild(document.createTextNode('The agent wants to run '));
      p.appendChild(h('code', 'tool-name', String(v.tool)));
      p.appendChild(document.createTextNode(v.type === 'approval' ? ' and needs your approval first.' : '.'));
      block.appendChild(p);
      const dl = h('dl', 'approval-args');
      for (const [k, val] of argPairs(v.args)) {
        dl.appendChild(h('dt', null, k));
        dl.appendChild(h('dd', null, val));
      }
      if (dl.childNodes.length) block.appendChild(dl);
    } else {
      block.appendChild(h('p', 'approval-lead', 'The agent is waiting for your decision on:'));
      block.appendChild(h('pre', 'approval-raw', valueText(v)));
    }
    card.appendChild(block);
  }
  const label = h('label', 'approval-comment-label', 'Comment (optional, sent with your decision)');
  const comment = h('textarea', 'approval-comment');
  comment.rows = 2;
  comment.id = 'approval-comment';
  label.htmlFor = comment.id;
  card.appendChild(label);
  card.appendChild(comment);
  const row = h('div', 'approval-buttons');
  const approve = h('button', 'btn btn-primary', 'Approve');
  approve.type = 'button';
  approve.dataset.action = 'approve';
  const reject = h('button', 'btn btn-danger', 'Reject');
  reject.type = 'button';
  reject.dataset.action = 'reject';
  row.appendChild(approve);
  row.appendChild(reject);
  const wait = h('span', 'approval-wait');
  wait.setAttribute('aria-hidden', 'true');
  row.appendChild(wait);
  card.appendChild(row);
  const decide = (approved) => {
    const text = comment.value.trim();
    approve.disabled = true;
    reject.disabled = true;
    comment.disabled = true;
    card.classList.add('decided');
    card.dataset.decision = approved ? 'approved' : 'rejected';
    heading.textContent = approved ? 'Approved' : 'Rejected';
    // The decision replaces the form: what was decided, and the comment if any.
    label.remove();
    comment.remove();
    row.remove();
    const decision = h('p', 'approval-decision', approved ? 'You approved this action.' : 'You rejected this action.');
    const progress = h('span', 'approval-progress', ' Resuming…');
    decision.appendChild(progress);
    card.appendChild(decision);
    if (text) card.appendChild(h('p', 'approval-note', `Comment: ${text}`));
    app.approvalCard = { card, progress };
    const value = { approved };
    if (text) value.comment = text;
    else if (!approved) value.comment = 'Rejected by the operator.';
    resumeTurn(list, value);
  };
  approve.addEventListener('click', () => decide(true));
  reject.addEventListener('click', () => decide(false));
  ui.chatEmpty.hidden = true;
  ui.messages.appendChild(card);
  app.approvalCard = { card, wait };
  scrollToEnd();
  card.focus({ preventScroll: true });
  app.pausedAt = Date.now();
  clearInterval(app.waitTimer);
  const tick = () => {
    if (!app.pausedAt) return;
    wait.textContent = `Waiting ${formatClock(Date.now() - app.pausedAt)}`;
    renderOutcome();
  };
  tick();
  app.waitTimer = setInterval(tick, 1000);
}

function stopWaitClock() {
  app.pausedAt = null;
  clearInterval(app.waitTimer);
  app.waitTimer = null;
}

// ---------------------------------------------------------------- events

function onEvent(ev) {
  if (typeof ev.ts === 'number') app.clockSkew = Math.max(app.clockSkew, ev.ts - Date.now());
  app.model.apply(ev);
  if (app.model.threadId) app.threadId = app.model.threadId;
  switch (ev.type) {
    case 'graph_topology':
      setActivity('Working…');
      break;
    case 'tool_started': {
      const tools = app.model.runningTools();
      const text = toolActivityText(tools[tools.length - 1]);
      setActivity(text, 'tool');
      announce(text);
      break;
    }
    case 'tool_completed':
      if (!app.model.runningTools().length) setActivity('Working…');
      break;
    case 'text_delta':
      showStreamedText();
      break;
    case 'paused':
      endStreamedText(false);
      setActivity(null);
      if (app.replaying) {
        addMessage('system', 'The turn paused here for a person’s approval.', { variant: 'paused' });
        break;
      }
      announce('Paused: the agent needs your approval.');
      showApproval(app.model.interrupts);
      break;
    case 'turn_completed': {
      setActivity(null);
      const r = app.model.response || {};
      if (r.status === 'paused') {
        endStreamedText(false);
        showApproval(app.model.interrupts);
        break;
      }
      addAnswer(r, endStreamedText(false));
      const extra = typeof app.model.humanWaitMs === 'number' && ev.human_wait_ms !== undefined ? ` after waiting ${formatMs(app.model.humanWaitMs)} for approval` : '';
      announce(`${OUTCOME_TEXT[app.model.outcome] || 'Done'}${extra}.`);
      break;
    }
    case 'error': {
      endStreamedText(true);
      setActivity(null);
      const msg = app.model.error ? app.model.error.message : 'The turn failed.';
      if (app.model.outcome === 'cancelled') addMessage('system', msg, { variant: 'cancelled' });
      else addMessage('system', msg, { variant: 'error' });
      alertText(app.model.outcome === 'cancelled' ? 'The turn was cancelled.' : `Error: ${msg}`);
      break;
    }
    default:
      break;
  }
  render();
}

// ---------------------------------------------------------------- runs

/** Authorization, when the server requires a token (GET /config says so). */
function authHeaders() {
  return app.token ? { Authorization: `Bearer ${app.token}` } : {};
}

function headers() {
  return { ...authHeaders(), ...(app.fault ? { 'X-Relay-Fault': app.fault } : {}) };
}

function showTokenForm(message) {
  ui.tokenForm.hidden = false;
  if (message) ui.tokenInput.setAttribute('aria-describedby', 'alert');
  ui.tokenInput.focus();
}

async function ensureGraphTopology() {
  if (app.graphTopology) return app.graphTopology;
  try {
    app.graphTopology = await getJson('/graph', { headers: authHeaders() });
  } catch (_) {
    app.graphTopology = null;
  }
  return app.graphTopology;
}

/** Run one POST (chat or resume) as a stream, with the JSON path as the fallback. */
async function run(url, body, { resumed = false } = {}) {
  setBusy(true);
  setActivity('Working…');
  const controller = new AbortController();
  app.controller = controller;
  try {
    if (!streamingSupported()) throw new StreamUnavailable('This browser cannot read streamed responses.');
    const result = await streamRun(url, body, { headers: headers(), signal: controller.signal, onEvent });
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
    if (app.controller === controller) app.controller = null;
    if (resumed && app.approvalCard && app.approvalCard.progress) {
      app.approvalCard.progress.remove();
      app.approvalCard = null;
    }
    setBusy(false);
    if (app.model.outcome !== 'running') setActivity(null);
    render();
    if (!app.model.terminal && app.model.outcome === 'paused') return;
    if (document.activeElement === document.body || !document.activeElement) ui.input.focus();
  }
}

async function reattach(lastEventId, retryMs, controller) {
  const turnId = app.model.turnId;
  const delay = Math.min(Math.max(retryMs || 1000, 250), 5000);
  for (let attempt = 1; attempt <= 3; attempt++) {
    announce('Connection interrupted: reconnecting…');
    await new Promise((r) => setTimeout(r, delay));
    if (controller.signal.aborted) return;
    const after = lastEventId || String(app.model.lastSeq);
    try {
      const seen = app.model.lastSeq;
      const res = await resumeStream(turnId, after, {
        headers: authHeaders(),
        signal: controller.signal,
        onEvent: (ev) => {
          if (typeof ev.seq === 'number' && ev.seq <= seen) return; // already applied
          onEvent(ev);
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
  onEvent({ type: 'error', code, message, node: null, retryable: true, ts: undefined });
}

async function runJson(url, body, { resumed }) {
  const topo = await ensureGraphTopology();
  let resp;
  try {
    resp = await postJson(url, body, { headers: headers() });
  } catch (e) {
    if (e instanceof ApiError) showRequestError(e);
    else showRequestError(new ApiError(0, 'network', `The request failed: ${e.message}`));
    return;
  }
  app.model.applyChatResponse(resp, topo, { resumed });
  if (app.model.threadId) app.threadId = app.model.threadId;
  setActivity(null);
  if (app.model.outcome === 'paused') {
    if (typeof resp.answer === 'string' && resp.answer) addMessage('agent', resp.answer);
    announce('Paused: the agent needs your approval.');
    showApproval(app.model.interrupts);
  } else if (app.model.outcome === 'error' || app.model.outcome === 'cancelled') {
    const msg = app.model.error ? app.model.error.message : 'The turn failed.';
    addMessage('system', msg, { variant: 'error' });
    alertText(`Error: ${msg}`);
  } else {
    addAnswer(resp);
    announce(`${OUTCOME_TEXT[app.model.outcome] || 'Done'} (degraded mode: drawn after the turn).`);
  }
  render();
}

function showRequestError(e) {
  setActivity(null);
  if (e.status === 401) showTokenForm(e.message);
  const text = e.message || 'The request failed.';
  addMessage('system', text, { variant: 'error' }).dataset.errorCode = e.code || '';
  if (!app.model.turnId || app.model.outcome === null || app.model.outcome === 'running') {
    app.model.outcome = 'error';
    app.model.error = { code: e.code, message: text, node: null, retryable: false };
  }
  alertText(`Error: ${text}`);
  render();
}

async function sendMessage(text) {
  text = text.trim();
  if (!text || app.busy) return;
  app.replayed = null; // a new turn, live
  stopWaitClock();
  if (app.approvalCard) app.approvalCard = null;
  endStreamedText(true);
  app.model.reset();
  app.selected = null;
  app.clockSkew = -Infinity;
  addMessage('user', text);
  ui.input.value = '';
  app.model.outcome = 'running';
  render();
  announce('Sent. The agent is working.');
  const body = { message: text };
  if (app.threadId) body.thread_id = app.threadId;
  await run('/chat', body);
}

function resumePath() {
  const hint = app.model.resumeHint;
  const p = hint && typeof hint.path === 'string' ? hint.path : null;
  return p && p.startsWith('/') && !p.startsWith('//') ? p : '/chat/resume';
}

async function resumeTurn(interrupts, value) {
  stopWaitClock();
  const m = app.model;
  const body = resumeBody(m.threadId || app.threadId, m.turnId, interrupts, value);
  announce(value.approved ? 'Approved. Resuming.' : 'Rejected. Resuming.');
  m.outcome = 'running';
  render();
  await run(resumePath(), body, { resumed: true });
}

async function stopTurn() {
  const m = app.model;
  if (m.turnId && !m.terminal) {
    ui.stop.disabled = true;
    try {
      const res = await fetch(`/turns/${encodeURIComponent(m.turnId)}/cancel`, { method: 'POST', headers: { Accept: 'application/json', ...authHeaders() } });
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

// ---------------------------------------------------------------- past turns

function selectedSpeed() {
  const checked = ui.history.querySelector('input[name="replay-speed"]:checked');
  return checked ? Number(checked.value) : 1;
}

async function openHistory() {
  ui.history.hidden = false;
  ui.historyOpen.setAttribute('aria-expanded', 'true');
  ui.historyList.replaceChildren();
  ui.historyEmpty.hidden = true;
  try {
    const data = await getJson('/turns?limit=50', { headers: authHeaders() });
    const turns = (data && Array.isArray(data.turns) ? data.turns : []).filter((t) => t.status !== 'running');
    renderHistory(ui.historyList, turns, (turn) => replayPastTurn(turn));
    ui.historyEmpty.hidden = turns.length > 0;
  } catch (e) {
    ui.historyEmpty.hidden = false;
    ui.historyEmpty.textContent = `The past turns could not be loaded: ${e.message}`;
  }
  const first = ui.historyList.querySelector('button');
  (first || ui.historyClose).focus();
}

function closeHistory() {
  ui.history.hidden = true;
  ui.historyOpen.setAttribute('aria-expanded', 'false');
  ui.historyOpen.focus();
}

/** Replay a past turn into the same graph, timeline and chat, from its stored spans. */
async function replayPastTurn(turn) {
  if (app.busy) return;
  const speed = selectedSpeed();
  newConversation({ quiet: true });
  ui.history.hidden = true;
  ui.historyOpen.setAttribute('aria-expanded', 'false');
  app.replaying = { turnId: turn.turn_id, speed };
  if (turn.message) addMessage('user', turn.message);
  setBusy(true);
  setActivity('Replaying…');
  announce(`Replaying a past turn${speed === 0 ? '' : ` at ${speed}×`}.`);
  const controller = new AbortController();
  app.controller = controller;
  try {
    const { count } = await replayTurn(turn.turn_id, speed, { headers: authHeaders(), signal: controller.signal, onEvent });
    if (!count) alertText('That turn has no stored events to replay.');
  } catch (e) {
    if (!controller.signal.aborted) alertText(`The replay failed: ${e.message}`);
  } finally {
    if (app.controller === controller) app.controller = null;
    setBusy(false);
    setActivity(null);
    // still this replay's turn on screen (not a new conversation started meanwhile)
    if (app.replaying && app.replaying.turnId === turn.turn_id) app.replayed = { turnId: turn.turn_id };
    app.replaying = null;
    render();
  }
}

function newConversation({ quiet = false } = {}) {
  if (app.controller) app.controller.abort();
  stopWaitClock();
  endStreamedText(true);
  app.threadId = null;
  app.model.reset();
  app.selected = null;
  for (const n of [...ui.messages.children]) if (n !== ui.chatEmpty) n.remove();
  ui.chatEmpty.hidden = false;
  setActivity(null);
  setBusy(false);
  app.replaying = null;
  app.replayed = null;
  render();
  if (quiet) return;
  announce('New conversation.');
  ui.input.focus();
}

// ---------------------------------------------------------------- start

function bind() {
  ui.composer.addEventListener('submit', (ev) => {
    ev.preventDefault();
    sendMessage(ui.input.value);
  });
  ui.input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      sendMessage(ui.input.value);
    }
  });
  for (const chip of document.querySelectorAll('[data-suggest]')) {
    chip.addEventListener('click', () => {
      if (app.busy || app.model.outcome === 'paused') {
        ui.input.value = chip.dataset.suggest;
        ui.input.focus();
        return;
      }
      sendMessage(chip.dataset.suggest);
    });
  }
  ui.stop.addEventListener('click', stopTurn);
  ui.tokenForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    app.token = ui.tokenInput.value.trim() || null;
    try {
      if (app.token) sessionStorage.setItem('span-relay-token', app.token);
      else sessionStorage.removeItem('span-relay-token');
    } catch (_) {
      /* storage disabled */
    }
    ui.tokenInput.value = '';
    app.graphTopology = null;
    await ensureGraphTopology();
    if (app.graphTopology) {
      ui.tokenForm.hidden = true;
      announce('Token accepted.');
      ui.input.focus();
    } else {
      alertText('That token was not accepted.');
      ui.tokenInput.focus();
    }
    render();
  });
  ui.newChat.addEventListener('click', () => newConversation());
  ui.historyOpen.addEventListener('click', () => (ui.history.hidden ? openHistory() : closeHistory()));
  ui.historyClose.addEventListener('click', closeHistory);
  ui.history.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') closeHistory();
  });
}

async function init() {
  buildLegend();
  bind();
  if (typeof ResizeObserver === 'function') {
    let lastDir = null;
    new ResizeObserver(() => {
      const dir = graphDirection();
      if (dir !== lastDir) {
        lastDir = dir;
        render();
      }
    }).observe(ui.graphScroll);
  }
  if (app.fault) {
    ui.faultBadge.hidden = false;
    ui.faultBadge.textContent = `Fault injection: ${app.fault}`;
    ui.faultBadge.title = 'Sent as the X-Relay-Fault header (honoured only when the server runs with RELAY_FAULTS=1)';
  }
  render();
  ui.graphEmpty.hidden = false;
  const [config] = await Promise.allSettled([getJson('/config'), ensureGraphTopology()]);
  const cfg = config.status === 'fulfilled' && config.value && typeof config.value === 'object' ? config.value : {};
  if (typeof cfg.trace_url === 'string' && cfg.trace_url) app.traceUrl = cfg.trace_url;
  if (cfg.auth_required && !app.graphTopology) showTokenForm();
  if (!app.graphTopology) ui.graphEmpty.textContent = 'The graph appears with the first turn.';
  render();
  document.body.dataset.ready = 'true';
}

init();
