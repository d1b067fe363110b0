// The shown turn on the page: the graph (its topology plus the nodes its events reached),
// the line above it (the outcome), the timeline, the node details, the mode badge, the
// activity line and the composer's busy state. It draws what `app` (app.js) holds; DOM text
// and attributes only.

import { renderTimeline } from './timeline-view.js';
import { markCurrent } from './history.js';
import { LATENCY_BINS } from './format.js';
import { drawnGraph } from './subgraphs.js';
import { outcomeLine } from './outcome.js';
import { renderDetails } from './details.js';
import { h } from './dom.js';

/** The turn the page shows (or is opening), for its row in the lists. */
export function shownTurnId(app) {
  return (app.following && app.following.turnId) || (app.replaying && app.replaying.turnId) || app.model.turnId || null;
}

/** `page` (app.js): {app, ui, graphView}. */
export function createTurnView(page) {
  const { app, ui, graphView } = page;

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
    const shown = shownTurnId(app);
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

  return { currentTopology, serverNow, graphDirection, emptyGraphText, render, renderOutcome, selectNode, buildLegend, setActivity, setBusy };
}
