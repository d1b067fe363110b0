// span-relay SPA: chat + live Agent Execution Graph + timeline, for any graph the server serves
// (GET /graphs); on a server with no graph (a relay-only one) no chat: the turns its agents send
// it over OTLP, listed live and followed live. No framework, no build step. Every piece of data
// reaches the page through textContent and attributes, never parsed as HTML.
//
// This module is the entry point: it holds the page's state (`app`, window.spanRelay), wires
// the modules that do the work into one `page` object (each module gets from it what it calls
// of the others, at call time, so the imports stay one-way), turns each event of the shown turn
// into the page (onEvent), and binds the controls. The modules it wires:
//   page-ui.js (the elements, by id), dom.js (DOM helpers, announcements), token.js (the API
//   token), turn-view.js (draws the shown turn), pause.js (the pause card and its wait clock),
//   runs.js (a run's stream, or its JSON, read), chat-send.js (send, resume, stop),
//   graph-loading.js (the server's graphs), turn-lists.js (the lists of turns, a turn by id),
//   replay.js (follow or replay a turn opened from a list or by id).

import { TurnModel } from './turn.js';
import { GraphView } from './graph-view.js';
import { faultFromLocation, getJson } from './api.js';
import { waitFromLocation } from './follow.js';
import { formatMs, OUTCOME_TEXT, toolActivityText } from './format.js';
import { ChatLog } from './chat-log.js';
import { waitedFor, pauseKindOf, recoveryNotice } from './outcome.js';
import { findUi } from './page-ui.js';
import { createAnnouncer, createAlerter } from './dom.js';
import { loadToken, authHeaders, requestHeaders, createTokenForm } from './token.js';
import { createTurnView } from './turn-view.js';
import { createPause } from './pause.js';
import { createRuns } from './runs.js';
import { createChatSend } from './chat-send.js';
import { createGraphLoading } from './graph-loading.js';
import { createTurnLists } from './turn-lists.js';
import { createReplay } from './replay.js';

const ui = findUi();

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
app.token = loadToken();

// Exposed for tests and debugging (read-only use).
window.spanRelay = app;

// ---------------------------------------------------------------- wiring

const page = { app, ui };
page.graphView = new GraphView(ui.graph, { onSelect: (key) => page.selectNode(key) });
page.chat = new ChatLog(ui.messages, ui.chatEmpty);
page.announce = createAnnouncer(ui.announcer);
page.alertText = createAlerter(ui.alert);
page.authHeaders = () => authHeaders(app.token);
page.headers = () => requestHeaders(app.token, app.fault);
page.onEvent = onEvent;
page.newConversation = newConversation;
for (const create of [createTokenForm, createTurnView, createPause, createRuns, createChatSend, createGraphLoading, createTurnLists, createReplay]) {
  for (const [name, fn] of Object.entries(create(page))) {
    if (name in page) throw new Error(`span-relay: two modules define page.${name}`);
    page[name] = fn;
  }
}

const { chat, announce, alertText, render, setActivity, setBusy, showInterrupts, stopWaitClock, answeredElsewhere } = page;

// ---------------------------------------------------------------- events

// Each event of the shown turn (streamed, re-attached, followed or replayed) into the page. It
// stays here: tests/js/text-delta.test.js reads how app.js hands streamed text to the chat log.

function onEvent(ev) {
  if (typeof ev.ts === 'number') app.clockSkew = Math.max(app.clockSkew, ev.ts - Date.now());
  app.model.apply(ev);
  if (app.model.threadId) app.threadId = app.model.threadId;
  switch (ev.type) {
    case 'graph_topology':
      if (!app.replaying) answeredElsewhere(); // a run began while this page's card waited
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
    case 'turn_recovered': {
      // its server stopped mid-run: what it wrote stays, cut; the recovered run writes anew
      chat.endStreamed(true);
      const notice = recoveryNotice(app.model.lastRecovery());
      chat.add('system', notice, { variant: 'info' });
      setActivity('Working…');
      announce(notice);
      break;
    }
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
    page.sendMessage(ui.input.value);
  });
  ui.input.addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      page.sendMessage(ui.input.value);
    }
  });
  ui.stop.addEventListener('click', page.stopTurn);
  ui.tokenForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    page.submitToken();
  });
  ui.newChat.addEventListener('click', () => newConversation());
  ui.graphPicker.addEventListener('change', () => page.switchGraph(ui.graphPicker.value));
  window.addEventListener('popstate', page.onPopState);
  ui.historyOpen.addEventListener('click', () => (ui.history.hidden ? page.openHistory() : page.closeHistory()));
  ui.historyClose.addEventListener('click', page.closeHistory);
  ui.history.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') page.closeHistory();
  });
  ui.openTurn.addEventListener('submit', (ev) => {
    ev.preventDefault();
    page.openTurnById(ui.openTurnId, ui.openTurnNote);
  });
  ui.watchRefresh.addEventListener('click', page.refreshFeed);
  ui.historyRefresh.addEventListener('click', page.refreshFeed);
  ui.followTurn.addEventListener('submit', (ev) => {
    ev.preventDefault();
    page.openTurnById(ui.followTurnId, ui.followTurnNote);
  });
}

async function init() {
  page.buildLegend();
  bind();
  if (typeof ResizeObserver === 'function') {
    let lastDir = null;
    new ResizeObserver(() => {
      const dir = page.graphDirection();
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
  const [config, loaded] = await Promise.allSettled([getJson('/config'), page.loadGraphs()]);
  const cfg = config.status === 'fulfilled' && config.value && typeof config.value === 'object' ? config.value : {};
  if (typeof cfg.trace_url === 'string' && cfg.trace_url) app.traceUrl = cfg.trace_url;
  if (loaded.status === 'fulfilled' && loaded.value === 'auth') page.showTokenForm();
  render();
  document.body.dataset.ready = 'true';
}

init();
