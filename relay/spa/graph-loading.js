// The graphs of the server: GET /graphs, then the chosen one (?graph=NAME, the picker, the
// back button), or an older server's one graph (GET /graph); what the page says about it
// (graph-settings.js), and the list of turns reopened for it.

import { ApiError, getJson } from './api.js';
import { loadCatalog, loadGraph, loadLegacyGraph, chooseGraph, searchWithGraph } from './graphs.js';
import { applyGraphSettings, fillPicker, showServerNote } from './graph-settings.js';

/**
 * `page` (app.js): {app, ui, chat, authHeaders, onExample, currentTopology, emptyGraphText,
 * stopFeed, startFeed, feedNeeded, newConversation, render, announce}.
 */
export function createGraphLoading(page) {
  const { app, ui, chat } = page;

  function applySettings() {
    chat.agentName = (app.graph && app.graph.title) || 'Agent';
    applyGraphSettings(ui.settings, app.graph, { onExample: page.onExample, mode: app.mode });
    fillPicker(ui.graphPick, ui.graphPicker, app.catalog, app.graph && app.graph.name);
    if (!page.currentTopology()) ui.graphEmpty.textContent = page.emptyGraphText();
    ui.newChat.textContent = app.mode === 'watch' ? 'Clear' : 'New chat';
    ui.newChat.title = app.mode === 'watch' ? 'Stop following the shown turn and clear the view' : 'Start a new conversation (a new thread)';
    // the list of turns is of the shown graph: (re)opened for it when a list shows it
    page.stopFeed();
    if (page.feedNeeded()) page.startFeed();
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
    const opts = { headers: page.authHeaders() };
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
    page.newConversation({ quiet: true });
    try {
      app.graph = await loadGraph(getJson, entry, { headers: page.authHeaders() });
      app.mode = 'chat';
      showServerNote(ui.serverNote, '');
    } catch (e) {
      loadFailed(e, `The graph “${name}”`);
    }
    applySettings();
    page.render();
    page.announce(`Showing ${app.graph ? app.graph.title : name}.`);
  }

  /** The back button: the graph the address names now. */
  function onPopState() {
    if (!app.catalog || app.catalog.legacy) return;
    const { name } = chooseGraph(app.catalog, location.search);
    if (name) switchGraph(name, { push: false });
  }

  return { applySettings, loadFailed, loadGraphs, switchGraph, onPopState };
}
