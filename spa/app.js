// span-relay SPA: chat + live Agent Execution Graph + timeline, for any graph the server serves
// (GET /graphs). No framework, no build step. Every piece of data reaches the page through
// textContent and attributes, never parsed as HTML.

import { TurnModel } from './turn.js';
import { GraphView } from './graph-view.js';
import { renderTimeline } from './timeline-view.js';
import { ApiError, StreamUnavailable, streamRun, resumeStream, replayTurn, postJson, getJson, faultFromLocation, streamingSupported } from './api.js';
import { renderHistory, isLive } from './history.js';
import { formatMs, formatClock, LATENCY_BINS, OUTCOME_TEXT, toolActivityText } from './format.js';
import { ChatLog } from './chat-log.js';
import { renderInterruptCard } from './interrupt-card.js';
import { drawnGraph } from './subgraphs.js';
import { outcomeLine, waitedFor, pauseKindOf } from './outcome.js';
import { renderDetails } from './details.js';
import { LEGACY_ROUTES, loadCatalog, loadGraph, loadLegacyGraph, chooseGraph, searchWithGraph, turnsListUrl } from './graphs.js';
import { applyGraphSettings, fillPicker, showServerNote } from './graph-settings.js';

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
  openTurn: $('open-turn'),
  openTurnId: $('open-turn-id'),
  openTurnNote: $('open-turn-note'),
  serverNote: $('server-note'),
  graphPick: $('graph-pick'),
  graphPicker: $('graph-picker'),
  settings: {
    subtitle: $('subtitle'),
    description: $('graph-description'),
    emptyText: $('chat-empty-text'),
    suggestions: $('suggestions'),
    composer: $('composer'),
    input: $('message'),
    inputLabel: $('message-label'),
  },
};

const app = {
  model: new TurnModel(),
  threadId: null,
  catalog: null, // GET /graphs, normalised (graphs.js); {legacy: true} for an older server
  graph: null, // GET /graphs/{name}, normalised: title, examples, topology, routes
  mode: 'chat', // 'chat' | 'watch' (relay-only: no graph) | 'auth' | 'none' (not loaded)
  drawn: null, // what the graph draws: topology + nodes seen in events + subgraph groups
  traceUrl: null,
  fault: faultFromLocation(location.search),
  busy: false, // a run is streaming
  controller: null,
  selected: null, // the selected node's key (subgraphs.js nodeKey)
  pausedAt: null, // client clock when the run paused (for the live wait clock)
  pauseKind: 'approval', // what the latest pause asked for: 'approval' or 'input'
  waitTimer: null,
  tickTimer: null,
  clockSkew: -Infinity, // server ts minus client clock, lower bound
  approvalCard: null, // {card, wait, progress}: the card of the current pause
  turnRoutes: null, // the routes of the graph this page started the shown turn with
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
const chat = new ChatLog(ui.messages, ui.chatEmpty);

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
  return app.model.topology || (app.graph && app.graph.topology) || null;
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
  app.drawn = drawnGraph(currentTopology(), app.model.instances);
  graphView.setTopology(app.drawn.topology, graphDirection(), app.drawn.groups);
  ui.graphEmpty.hidden = app.drawn.topology.nodes.length > 0;
  graphView.update(app.model, app.selected);
  renderOutcome();
  renderTimeline(ui.timeline, app.model, { traceUrl: app.traceUrl, now: app.busy ? serverNow() : null });
  renderDetails(ui.details, app.model, app.drawn, app.selected);
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
  const line = outcomeLine(app.model, { pausedAt: app.pausedAt, pauseKind: app.pauseKind });
  ui.outcome.dataset.outcome = line.outcome;
  ui.outcomeText.textContent = line.text;
  ui.outcomeDetail.textContent = line.detail;
}

function selectNode(key) {
  app.selected = key;
  graphView.update(app.model, app.selected);
  renderDetails(ui.details, app.model, app.drawn, app.selected);
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
  const pausedHint = app.pauseKind === 'input' ? 'Answer the pending request to continue' : 'Approve or reject the pending action to continue';
  ui.hint.textContent = paused ? pausedHint : busy ? 'The agent is working…' : 'Enter to send · Shift+Enter for a new line';
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

// ---------------------------------------------------------------- the pause card

function showInterrupts(interrupts) {
  const handle = renderInterruptCard(interrupts, { onResume: resumeTurn });
  app.approvalCard = handle;
  chat.append(handle.card);
  handle.card.focus({ preventScroll: true });
  app.pausedAt = Date.now();
  clearInterval(app.waitTimer);
  const tick = () => {
    if (!app.pausedAt) return;
    handle.wait.textContent = `Waiting ${formatClock(Date.now() - app.pausedAt)}`;
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
      chat.streamed(app.model.streamedMessage());
      break;
    case 'paused':
      chat.endStreamed(false);
      setActivity(null);
      app.pauseKind = pauseKindOf(app.model.interrupts);
      if (app.replaying) {
        chat.add('system', `The turn paused here for a person’s ${app.pauseKind === 'input' ? 'answer' : 'approval'}.`, { variant: 'paused' });
        break;
      }
      announce(app.pauseKind === 'input' ? 'Paused: the agent is waiting for your answer.' : 'Paused: the agent needs your approval.');
      showInterrupts(app.model.interrupts);
      break;
    case 'turn_completed': {
      setActivity(null);
      const r = app.model.response || {};
      if (r.status === 'paused') {
        chat.endStreamed(false);
        showInterrupts(app.model.interrupts);
        break;
      }
      chat.answer(r, chat.endStreamed(false));
      const extra = typeof app.model.humanWaitMs === 'number' && ev.human_wait_ms !== undefined ? ` after waiting ${formatMs(app.model.humanWaitMs)} for ${waitedFor(app.pauseKind)}` : '';
      announce(`${OUTCOME_TEXT[app.model.outcome] || 'Done'}${extra}.`);
      break;
    }
    case 'error': {
      chat.endStreamed(true);
      setActivity(null);
      const msg = app.model.error ? app.model.error.message : 'The turn failed.';
      chat.add('system', msg, { variant: app.model.outcome === 'cancelled' ? 'cancelled' : 'error' });
      alertText(app.model.outcome === 'cancelled' ? 'The turn was cancelled.' : `Error: ${msg}`);
      break;
    }
    default:
      break;
  }
  render();
}

// ---------------------------------------------------------------- the graphs of the server

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

function applySettings() {
  chat.agentName = (app.graph && app.graph.title) || 'Agent';
  applyGraphSettings(ui.settings, app.graph, { onExample, mode: app.mode });
  fillPicker(ui.graphPick, ui.graphPicker, app.catalog, app.graph && app.graph.name);
  if (!currentTopology()) ui.graphEmpty.textContent = app.mode === 'chat' ? 'The graph appears with the first turn.' : 'The graph appears when a turn is opened.';
}

/** A failed load: 'auth' (a token is needed), else the note says what failed. */
function loadFailed(e, what) {
  app.graph = null;
  if (e instanceof ApiError && e.status === 401) {
    app.mode = 'auth';
    return 'auth';
  }
  app.mode = 'none';
  showServerNote(ui.serverNote, `${what} could not be loaded: ${e.message}`, 'error');
  return 'error';
}

/**
 * GET /graphs, then the chosen graph (?graph=NAME, else the server's default). An older server
 * (404 on /graphs) is said to be one, and its one graph (GET /graph, POST /chat) is used.
 * Resolves to 'ok', 'auth' or 'error'.
 */
async function loadGraphs() {
  const opts = { headers: authHeaders() };
  let status = 'ok';
  try {
    app.catalog = await loadCatalog(getJson, opts);
    if (app.catalog.legacy) {
      const e = app.catalog.error;
      showServerNote(ui.serverNote, `This server does not list its graphs (GET /graphs answered ${e.status}: ${e.message}): it is older than this page. The page uses its one graph (GET /graph, POST /chat), without a title or example messages.`, 'error');
      app.graph = await loadLegacyGraph(getJson, opts);
      app.mode = app.graph.watchOnly ? 'watch' : 'chat';
    } else {
      const { name, unknown } = chooseGraph(app.catalog, location.search);
      const entry = app.catalog.graphs.find((g) => g.name === name);
      app.graph = entry ? await loadGraph(getJson, entry, opts) : null;
      app.mode = entry ? 'chat' : 'watch';
      if (unknown) showServerNote(ui.serverNote, entry ? `This server serves no graph named “${unknown}”: showing ${app.graph.title}.` : `This server serves no graph named “${unknown}”.`, 'warn');
      else showServerNote(ui.serverNote, '');
      if (entry && app.catalog.graphs.length > 1) history.replaceState(history.state, '', location.pathname + searchWithGraph(location.search, name) + location.hash);
    }
  } catch (e) {
    status = loadFailed(e, 'The graphs of this server');
  }
  applySettings();
  return status;
}

/** The picker (or the back button) chose another graph: its settings, topology and routes. */
async function switchGraph(name, { push = true } = {}) {
  const entry = app.catalog && !app.catalog.legacy ? app.catalog.graphs.find((g) => g.name === name) : null;
  if (!entry || (app.graph && app.graph.name === name)) return;
  if (push) history.pushState(null, '', location.pathname + searchWithGraph(location.search, name) + location.hash);
  newConversation({ quiet: true });
  try {
    app.graph = await loadGraph(getJson, entry, { headers: authHeaders() });
    app.mode = 'chat';
    showServerNote(ui.serverNote, '');
  } catch (e) {
    loadFailed(e, `The graph “${name}”`);
  }
  applySettings();
  render();
  announce(`Showing ${app.graph ? app.graph.title : name}.`);
}

// ---------------------------------------------------------------- runs

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
    endRun(controller, resumed);
  }
}

function endRun(controller, resumed = false) {
  if (app.controller === controller) app.controller = null;
  if (resumed && app.approvalCard && app.approvalCard.progress) {
    app.approvalCard.progress.remove();
    app.approvalCard = null;
  }
  setBusy(false);
  if (app.model.outcome !== 'running') setActivity(null);
  render();
  if (!app.model.terminal && app.model.outcome === 'paused') return;
  if (!ui.composer.hidden && (document.activeElement === document.body || !document.activeElement)) ui.input.focus();
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
  let resp;
  try {
    resp = await postJson(url, body, { headers: headers() });
  } catch (e) {
    if (e instanceof ApiError) showRequestError(e);
    else showRequestError(new ApiError(0, 'network', `The request failed: ${e.message}`));
    return;
  }
  app.model.applyChatResponse(resp, app.graph && app.graph.topology, { resumed });
  if (app.model.threadId) app.threadId = app.model.threadId;
  setActivity(null);
  if (app.model.outcome === 'paused') {
    if (typeof resp.answer === 'string' && resp.answer) chat.add('agent', resp.answer);
    app.pauseKind = pauseKindOf(app.model.interrupts);
    announce(app.pauseKind === 'input' ? 'Paused: the agent is waiting for your answer.' : 'Paused: the agent needs your approval.');
    showInterrupts(app.model.interrupts);
  } else if (app.model.outcome === 'error' || app.model.outcome === 'cancelled') {
    const msg = app.model.error ? app.model.error.message : 'The turn failed.';
    chat.add('system', msg, { variant: 'error' });
    alertText(`Error: ${msg}`);
  } else {
    chat.answer(resp);
    announce(`${OUTCOME_TEXT[app.model.outcome] || 'Done'} (degraded mode: drawn after the turn).`);
  }
  render();
}

function showRequestError(e) {
  setActivity(null);
  if (e.status === 401) showTokenForm(e.message);
  const text = e.message || 'The request failed.';
  chat.add('system', text, { variant: 'error' }).dataset.errorCode = e.code || '';
  if (!app.model.turnId || app.model.outcome === null || app.model.outcome === 'running') {
    app.model.outcome = 'error';
    app.model.error = { code: e.code, message: text, node: null, retryable: false };
  }
  alertText(`Error: ${text}`);
  render();
}

function startTurnView() {
  app.replayed = null; // a new turn, live
  stopWaitClock();
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
  render();
  announce('Sent. The agent is working.');
  const body = { message: text };
  if (app.threadId) body.thread_id = app.threadId;
  app.turnRoutes = routes();
  await run(app.turnRoutes.chat, body);
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
  stopWaitClock();
  const m = app.model;
  announce(announcement);
  m.outcome = 'running';
  render();
  await run(resumePath(), { thread_id: m.threadId || app.threadId, turn_id: m.turnId, resume }, { resumed: true });
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

// ---------------------------------------------------------------- past turns, any turn

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
    const data = await getJson(turnsListUrl(app.graph && app.graph.name), { headers: authHeaders() });
    const turns = data && Array.isArray(data.turns) ? data.turns : [];
    renderHistory(ui.historyList, turns, openTurn);
    ui.historyEmpty.textContent = 'No turns yet.';
    ui.historyEmpty.hidden = turns.length > 0;
  } catch (e) {
    ui.historyEmpty.hidden = false;
    ui.historyEmpty.textContent = `The past turns could not be loaded: ${e.message}`;
  }
  const first = ui.historyList.querySelector('button');
  (first || ui.openTurnId).focus();
}

function hideHistory() {
  ui.history.hidden = true;
  ui.historyOpen.setAttribute('aria-expanded', 'false');
}

function closeHistory() {
  hideHistory();
  ui.historyOpen.focus();
}

/** A turn record (GET /turns item): a running or paused one is followed live, any other replayed. */
function openTurn(turn) {
  if (isLive(turn)) return followTurn(turn);
  return replayPastTurn(turn);
}

/** The id box of the history panel: GET /turns/{id}, then open it. */
async function openTurnById(ev) {
  ev.preventDefault();
  const id = ui.openTurnId.value.trim();
  if (!id || app.busy) return;
  ui.openTurnNote.textContent = 'Looking it up…';
  let record;
  try {
    record = await getJson(`/turns/${encodeURIComponent(id)}`, { headers: authHeaders() });
  } catch (e) {
    ui.openTurnNote.textContent = e instanceof ApiError && e.status === 404 ? `There is no turn with the id “${id}”.` : `That turn could not be opened: ${e.message}`;
    ui.openTurnId.focus();
    return;
  }
  ui.openTurnNote.textContent = '';
  ui.openTurnId.value = '';
  await openTurn({ ...record, turn_id: record.turn_id || id });
}

/** Follow a running (or paused) turn live: GET /turns/{id}/events from its start, resumed on a cut. */
async function followTurn(turn) {
  if (app.busy) return;
  newConversation({ quiet: true });
  hideHistory();
  if (turn.message) chat.add('user', turn.message);
  app.model.outcome = 'running';
  setBusy(true);
  setActivity('Following the turn…');
  announce(turn.status === 'paused' ? 'Opening a paused turn.' : 'Following a running turn live.');
  const controller = new AbortController();
  app.controller = controller;
  let replayInstead = false;
  try {
    const result = await resumeStream(turn.turn_id, '', { headers: authHeaders(), signal: controller.signal, onEvent });
    if (!result.terminal) await reattach(result.lastEventId, result.retry, controller);
  } catch (e) {
    if (controller.signal.aborted) {
      /* a new conversation took over */
    } else if ((e instanceof ApiError && (e.status === 409 || e.status === 410)) || (e instanceof StreamUnavailable && !app.model.lastSeq)) {
      replayInstead = true; // its live log is gone (or it just ended): its stored spans tell it
    } else if (e instanceof ApiError) {
      showRequestError(e);
    } else if (app.model.turnId) {
      await reattach(e.lastEventId || String(app.model.lastSeq), null, controller);
    } else {
      showRequestError(new ApiError(0, 'network', `The turn could not be followed: ${e.message}`));
    }
  } finally {
    endRun(controller);
  }
  if (replayInstead) await replayPastTurn(turn);
}

/** Replay a past turn into the same graph, timeline and chat, from its stored spans. */
async function replayPastTurn(turn) {
  if (app.busy) return;
  const speed = selectedSpeed();
  newConversation({ quiet: true });
  hideHistory();
  app.replaying = { turnId: turn.turn_id, speed };
  if (turn.message) chat.add('user', turn.message);
  setBusy(true);
  setActivity('Replaying…');
  announce(`Replaying a past turn${speed === 0 ? '' : ` at ${speed}×`}.`);
  const controller = new AbortController();
  app.controller = controller;
  try {
    const { count } = await replayTurn(turn.turn_id, speed, { headers: authHeaders(), signal: controller.signal, onEvent });
    if (!count) alertText('That turn has no stored events to replay.');
  } catch (e) {
    if (!controller.signal.aborted) {
      alertText(`The replay failed: ${e.message}`);
      chat.add('system', `The replay failed: ${e.message}`, { variant: 'error' });
    }
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
  app.threadId = null;
  app.turnRoutes = null;
  app.model.reset();
  app.selected = null;
  app.approvalCard = null;
  chat.clear();
  setActivity(null);
  setBusy(false);
  app.replaying = null;
  app.replayed = null;
  render();
  if (quiet) return;
  announce('New conversation.');
  if (!ui.composer.hidden) ui.input.focus();
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
    const status = await loadGraphs();
    if (status !== 'auth') {
      ui.tokenForm.hidden = true;
      announce('Token accepted.');
      if (!ui.composer.hidden) ui.input.focus();
    } else {
      alertText('That token was not accepted.');
      ui.tokenInput.focus();
    }
    render();
  });
  ui.newChat.addEventListener('click', () => newConversation());
  ui.graphPicker.addEventListener('change', () => switchGraph(ui.graphPicker.value));
  window.addEventListener('popstate', () => {
    if (!app.catalog || app.catalog.legacy) return;
    const { name } = chooseGraph(app.catalog, location.search);
    if (name) switchGraph(name, { push: false });
  });
  ui.historyOpen.addEventListener('click', () => (ui.history.hidden ? openHistory() : closeHistory()));
  ui.historyClose.addEventListener('click', closeHistory);
  ui.history.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') closeHistory();
  });
  ui.openTurn.addEventListener('submit', openTurnById);
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
  const [config, loaded] = await Promise.allSettled([getJson('/config'), loadGraphs()]);
  const cfg = config.status === 'fulfilled' && config.value && typeof config.value === 'object' ? config.value : {};
  if (typeof cfg.trace_url === 'string' && cfg.trace_url) app.traceUrl = cfg.trace_url;
  if (loaded.status === 'fulfilled' && loaded.value === 'auth') showTokenForm();
  render();
  document.body.dataset.ready = 'true';
}

init();
