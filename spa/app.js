// span-relay SPA: chat + live Agent Execution Graph + timeline, for any graph the server serves
// (GET /graphs); on a server with no graph (a relay-only one) no chat: the turns its agents send
// it over OTLP, listed live and followed live. No framework, no build step. Every piece of data
// reaches the page through textContent and attributes, never parsed as HTML.

import { TurnModel } from './turn.js';
import { GraphView } from './graph-view.js';
import { renderTimeline } from './timeline-view.js';
import { ApiError, StreamUnavailable, streamRun, resumeStream, replayTurn, postJson, getJson, faultFromLocation, streamingSupported } from './api.js';
import { renderHistory, renderFeedState, markCurrent, isLive, turnTitle } from './history.js';
import { TurnFeed } from './turn-feed.js';
import { followTurnEvents, turnEventsUrl, waitFromLocation } from './follow.js';
import { formatMs, formatClock, LATENCY_BINS, OUTCOME_TEXT, toolActivityText } from './format.js';
import { ChatLog } from './chat-log.js';
import { renderInterruptCard, renderInterruptNotice } from './interrupt-card.js';
import { drawnGraph } from './subgraphs.js';
import { outcomeLine, waitedFor, pauseKindOf } from './outcome.js';
import { renderDetails } from './details.js';
import { LEGACY_ROUTES, loadCatalog, loadGraph, loadLegacyGraph, chooseGraph, searchWithGraph, turnsListUrl, safePath } from './graphs.js';
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
  graphCaption: $('graph-caption'),
  legendDiscovered: $('legend-discovered'),
  historyFeed: $('history-feed'),
  historyFeedNote: $('history-feed-note'),
  watch: $('watch'),
  followTurn: $('follow-turn'),
  followTurnId: $('follow-turn-id'),
  followTurnNote: $('follow-turn-note'),
  watchList: $('watch-list'),
  watchEmpty: $('watch-empty'),
  watchFeed: $('watch-feed'),
  watchFeedNote: $('watch-feed-note'),
  watchRefresh: $('watch-refresh'),
  historyRefresh: $('history-refresh'),
  settings: {
    subtitle: $('subtitle'),
    description: $('graph-description'),
    emptyText: $('chat-empty-text'),
    suggestions: $('suggestions'),
    composer: $('composer'),
    input: $('message'),
    inputLabel: $('message-label'),
    watch: $('watch'),
    chatTitle: $('chat-title'),
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
  following: null, // {turnId, controller} while a turn is followed (GET /turns/{id}/events, EventSource)
  status: null, // {kind: 'waiting' | 'failed', text, detail}: a turn being opened, or why it could not be
  feed: null, // the live list of turns (turn-feed.js), while a list shows it
  markedTurn: null, // the turn whose row the lists mark as shown
  followWait: waitFromLocation(location.search), // s to wait for a turn followed by id that has not arrived
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

/** What the graph area says while it draws nothing: why, or what it waits for. */
function emptyGraphText() {
  if (app.status && app.status.kind === 'failed') return `${app.status.text}: ${app.status.detail}`;
  if (app.status) return `${app.status.text}${app.status.detail ? ` (${app.status.detail})` : ''}…`;
  if (app.model.discovered) return 'This agent sends no topology: its graph is discovered from the spans, and its nodes appear as the turn reaches them.';
  if (app.model.outcome) return 'This turn shows no node.';
  return app.mode === 'chat' ? 'The graph appears with the first turn.' : 'The graph appears when a turn is opened.';
}

function render() {
  app.drawn = drawnGraph(currentTopology(), app.model.instances);
  graphView.setTopology(app.drawn.topology, graphDirection(), app.drawn.groups);
  const drawnNothing = app.drawn.topology.nodes.length === 0;
  ui.graphEmpty.hidden = !drawnNothing;
  if (drawnNothing && document.body.dataset.ready === 'true') ui.graphEmpty.textContent = emptyGraphText();
  ui.graphEmpty.dataset.kind = app.status ? app.status.kind : '';
  ui.graphCaption.hidden = !app.model.discovered;
  ui.legendDiscovered.hidden = !app.model.discovered;
  graphView.update(app.model, app.selected);
  renderOutcome();
  renderTimeline(ui.timeline, app.model, { traceUrl: app.traceUrl, now: app.busy ? serverNow() : null });
  renderDetails(ui.details, app.model, app.drawn, app.selected);
  ui.degradedNote.hidden = !app.model.degraded;
  const shown = shownTurnId();
  ui.watch.dataset.compact = shown || app.status ? 'true' : 'false'; // a turn is shown: room for it
  if (shown !== app.markedTurn) {
    app.markedTurn = shown;
    markCurrent(ui.historyList, shown);
    markCurrent(ui.watchList, shown);
  }
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
  const line = outcomeLine(app.model, { pausedAt: app.pausedAt, pauseKind: app.pauseKind, status: app.status });
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
  const handle = where.ok ? renderInterruptCard(interrupts, { onResume: resumeTurn }) : renderInterruptNotice(interrupts, { message: where.message });
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
      showInterrupts(app.model.interrupts);
      if (app.approvalCard && app.approvalCard.card.dataset.resumable === 'false') announce('Paused: the agent waits for a person, who answers it where the agent runs.');
      else announce(app.pauseKind === 'input' ? 'Paused: the agent is waiting for your answer.' : 'Paused: the agent needs your approval.');
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
  if (!currentTopology()) ui.graphEmpty.textContent = emptyGraphText();
  ui.newChat.textContent = app.mode === 'watch' ? 'Clear' : 'New chat';
  ui.newChat.title = app.mode === 'watch' ? 'Stop following the shown turn and clear the view' : 'Start a new conversation (a new thread)';
  // the list of turns is of the shown graph: (re)opened for it when a list shows it
  stopFeed();
  if (feedNeeded()) startFeed();
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
      app.graph = await loadLegacyGraph(getJson, opts);
      app.mode = app.graph.watchOnly ? 'watch' : 'chat';
      if (app.graph.watchOnly) showServerNote(ui.serverNote, `This server does not list its graphs (GET /graphs answered ${e.status}: ${e.message}) and serves none (GET /graph answered 404): it is older than this page, and it watches turns only.`, 'warn');
      else showServerNote(ui.serverNote, `This server does not list its graphs (GET /graphs answered ${e.status}: ${e.message}): it is older than this page. The page uses its one graph (GET /graph, POST /chat), without a title or example messages.`, 'error');
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
  if (app.following) {
    // a followed turn: the resume run streams on its POST, not on the followed stream
    const { controller } = app.following;
    app.following = null;
    controller.abort();
  }
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

// ---------------------------------------------------------------- the turns: a live list, any turn

function selectedSpeed() {
  const checked = ui.history.querySelector('input[name="replay-speed"]:checked');
  return checked ? Number(checked.value) : 1;
}

/** A run this page started is streaming (a followed or replayed turn gives way to another). */
function ownRunBusy() {
  return app.busy && !app.following && !app.replaying;
}

/** Draw the feed's state in every list that shows it: the panel of Turns, and the relay-only box. */
function renderTurnLists(state) {
  const lists = [[ui.historyList, ui.historyEmpty, ui.historyFeed, ui.historyFeedNote, ui.historyRefresh]];
  if (app.mode === 'watch') lists.push([ui.watchList, ui.watchEmpty, ui.watchFeed, ui.watchFeedNote, ui.watchRefresh]);
  for (const [list, empty, badge, note, refresh] of lists) {
    renderHistory(list, state.turns, openTurn, { showGraph: !app.graph });
    markCurrent(list, shownTurnId());
    renderFeedState(badge, note, state, refresh);
    empty.hidden = state.turns.length > 0 || state.status === 'connecting' || state.status === 'failed';
  }
}

/** The turn the page shows (or is opening), for its row in the lists. */
function shownTurnId() {
  return (app.following && app.following.turnId) || (app.replaying && app.replaying.turnId) || app.model.turnId || null;
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
    headers: authHeaders,
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
  setActivity(null);
  if (noteEl) noteEl.textContent = `${text}: ${message}`;
  if (e instanceof ApiError && e.status === 401) showTokenForm(message);
  alertText(`${text}: ${message}`);
  render();
}

/**
 * The id boxes (the panel of Turns, and the relay-only box): GET /turns/{id}, then open it. On a
 * relay-only server a turn not known yet may still arrive (its agent has not sent its first spans):
 * then it is followed with ?wait=, and the server says, after the wait, if it never came.
 */
async function openTurnById(input, noteEl) {
  const id = input.value.trim();
  if (!id || ownRunBusy()) return;
  noteEl.textContent = 'Looking it up…';
  let record = null;
  try {
    record = await getJson(`/turns/${encodeURIComponent(id)}`, { headers: authHeaders() });
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
    await openTurn({ ...record, turn_id: record.turn_id || id });
    return;
  }
  noteEl.textContent = `Not here yet: waiting up to ${app.followWait} s for turn “${id}” to arrive…`;
  await followTurn({ turn_id: id, status: 'running', message: '' }, { wait: app.followWait, noteEl, input, byId: true });
}

/**
 * Follow a turn with EventSource: GET /turns/{id}/events from its first event. A running turn
 * draws node by node; a finished one is drawn from its log; a paused one waits on (resumed
 * elsewhere, its next run comes on the same stream). `wait`: seconds for a turn not arrived yet.
 */
async function followTurn(turn, { wait = 0, noteEl = null, input = null, byId = false, instead = null } = {}) {
  if (ownRunBusy()) return;
  newConversation({ quiet: true });
  hideHistory();
  const id = turn.turn_id;
  if (!byId) introduce(turn);
  if (instead) chat.add('system', instead, { variant: 'info' });
  app.status = wait ? { kind: 'waiting', text: 'Waiting for the turn to arrive', detail: `up to ${wait} s for the first spans of ${id}` } : { kind: 'waiting', text: 'Opening the turn', detail: id };
  setBusy(true);
  setActivity(wait ? 'Waiting for the turn…' : 'Following the turn…');
  announce(wait ? 'Waiting for the turn to arrive.' : turn.status === 'paused' ? 'Opening a paused turn.' : 'Following the turn live.');
  const controller = new AbortController();
  app.controller = controller;
  app.following = { turnId: id, controller };
  render();
  let replayInstead = false;
  const mine = () => app.following && app.following.controller === controller;
  try {
    const result = await followTurnEvents(turnEventsUrl(id, { wait }), {
      headers: authHeaders(),
      signal: controller.signal,
      onEvent: (ev) => {
        if (!mine()) return;
        if (app.status) {
          app.status = null;
          if (noteEl) noteEl.textContent = '';
          if (input && input.value.trim() === id) input.value = ''; // it came: the box is free again
          if (byId) setActivity('Following the turn…');
        }
        onEvent(ev);
        followedState();
      },
      onState: (state) => {
        if (!mine() || app.model.outcome !== 'running') return;
        if (state === 'reconnecting') {
          announce('Connection interrupted: reconnecting…');
          setActivity('Connection interrupted: reconnecting…');
        } else {
          setActivity('Following the turn…');
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
      endRun(controller);
    }
  }
  if (replayInstead) await replayPastTurn(turn, { instead: 'The turn’s live log no longer holds its events: it is replayed from its stored spans.' });
}

/** While a followed turn is paused (or over) nothing runs: the page is not busy until it resumes. */
function followedState() {
  if (app.model.outcome !== 'running') {
    if (app.busy) setBusy(false);
    setActivity(null);
  } else if (!app.busy) {
    setBusy(true); // resumed (elsewhere): it runs again
    setActivity('Following the turn…');
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
  newConversation({ quiet: true });
  hideHistory();
  const controller = new AbortController();
  app.replaying = { turnId: turn.turn_id, speed, controller };
  introduce(turn);
  if (instead) chat.add('system', instead, { variant: 'info' });
  app.status = { kind: 'waiting', text: 'Opening the turn', detail: `replaying ${turn.turn_id} from its stored spans` };
  setBusy(true);
  setActivity('Replaying…');
  announce(`Replaying a past turn${speed === 0 ? '' : ` at ${speed}×`}.`);
  app.controller = controller;
  render();
  let count = 0;
  let followInstead = null;
  try {
    const result = await replayTurn(turn.turn_id, speed, {
      headers: authHeaders(),
      signal: controller.signal,
      onEvent: (ev) => {
        count++;
        app.status = null;
        onEvent(ev);
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
      setBusy(false);
      setActivity(null);
    }
    // still this replay's turn on screen (not a new conversation started meanwhile)
    if (app.replaying && app.replaying.controller === controller) {
      if (!followInstead) app.replayed = { turnId: turn.turn_id };
      app.replaying = null;
      render();
    }
  }
  if (followInstead) await followTurn(turn, { instead: followInstead });
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
  app.following = null;
  app.status = null;
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
  ui.openTurn.addEventListener('submit', (ev) => {
    ev.preventDefault();
    openTurnById(ui.openTurnId, ui.openTurnNote);
  });
  ui.watchRefresh.addEventListener('click', refreshFeed);
  ui.historyRefresh.addEventListener('click', refreshFeed);
  ui.followTurn.addEventListener('submit', (ev) => {
    ev.preventDefault();
    openTurnById(ui.followTurnId, ui.followTurnNote);
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
  const [config, loaded] = await Promise.allSettled([getJson('/config'), loadGraphs()]);
  const cfg = config.status === 'fulfilled' && config.value && typeof config.value === 'object' ? config.value : {};
  if (typeof cfg.trace_url === 'string' && cfg.trace_url) app.traceUrl = cfg.trace_url;
  if (loaded.status === 'fulfilled' && loaded.value === 'auth') showTokenForm();
  render();
  document.body.dataset.ready = 'true';
}

init();
