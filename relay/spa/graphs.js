// The graphs a server serves (GET /graphs, GET /graphs/{name}) and what the page shows for
// each: title, description, example messages, topology, and the routes its turns use.
// Pure data and URLs; the HTTP call goes through the getJson it is given (api.js in the page,
// a stub in the Node tests). Nothing here knows any particular graph.

import { ApiError } from './api.js';

/** The routes of a server older than GET /graphs: its one graph (DESIGN §5: /chat is the first). */
export const LEGACY_ROUTES = Object.freeze({ chat: '/chat', resume: '/chat/resume', agui: '/agui' });

const MAX_EXAMPLES = 8;

/** A same-origin absolute path, or the fallback (a route from the server never leaves it). */
export function safePath(path, fallback) {
  return typeof path === 'string' && path.startsWith('/') && !path.startsWith('//') && !path.includes('\\') ? path : fallback;
}

function text(v) {
  return typeof v === 'string' && v.trim() ? v.trim() : null;
}

export function routesOf(name, routes) {
  const base = `/graphs/${encodeURIComponent(name)}`;
  const r = routes && typeof routes === 'object' ? routes : {};
  return {
    chat: safePath(r.chat, `${base}/chat`),
    resume: safePath(r.resume, `${base}/chat/resume`),
    agui: safePath(r.agui, `${base}/agui`),
  };
}

/** GET /graphs's body -> {graphs: [{name, title, graphId, routes}], default, legacy: false}. */
export function normalizeCatalog(body) {
  const list = body && Array.isArray(body.graphs) ? body.graphs : [];
  const graphs = [];
  const seen = new Set();
  for (const g of list) {
    const name = g && text(g.name);
    if (!name || seen.has(name)) continue;
    seen.add(name);
    graphs.push({ name, title: text(g.title) || name, graphId: g.graph_id ?? name, routes: routesOf(name, g.routes) });
  }
  const wanted = body && typeof body.default === 'string' ? body.default : null;
  const def = graphs.some((g) => g.name === wanted) ? wanted : graphs.length ? graphs[0].name : null;
  return { graphs, default: def, legacy: false };
}

/** A topology object as the layout takes it, or null when there is none. */
function topologyOf(t, graphId) {
  if (!t || typeof t !== 'object') return null;
  const nodes = Array.isArray(t.nodes) ? t.nodes : [];
  const edges = Array.isArray(t.edges) ? t.edges : [];
  if (!nodes.length && !edges.length) return null;
  return { graph_id: t.graph_id ?? graphId ?? null, nodes, edges };
}

/** GET /graphs/{name}'s body (with its catalog entry) -> what the page shows for that graph. */
export function normalizeGraph(body, entry = null) {
  const b = body && typeof body === 'object' ? body : {};
  const name = text(b.name) || (entry && entry.name) || null;
  const examples = [];
  for (const e of Array.isArray(b.examples) ? b.examples : []) {
    const t = text(e);
    if (t && !examples.includes(t) && examples.length < MAX_EXAMPLES) examples.push(t);
  }
  const graphId = b.graph_id ?? (entry && entry.graphId) ?? name;
  return {
    name,
    title: text(b.title) || (entry && entry.title) || name,
    description: text(b.description),
    examples,
    graphId,
    topology: topologyOf(b.topology, graphId),
    routes: routesOf(name || '', b.routes || (entry && entry.routes)),
  };
}

/** The legacy server's one graph: its topology (GET /graph, or null) and the /chat routes. */
export function legacyGraph(topology) {
  return { name: null, title: null, description: null, examples: [], graphId: (topology && topology.graph_id) || null, topology: topologyOf(topology), routes: { ...LEGACY_ROUTES } };
}

/**
 * The graph to show: ?graph=NAME when the server serves it, else the server's default.
 * Returns {name, unknown}: `unknown` is the asked-for name the server does not serve (or null).
 */
export function chooseGraph(catalog, search) {
  let wanted = null;
  try {
    wanted = new URLSearchParams(search || '').get('graph');
  } catch (_) {
    wanted = null;
  }
  const served = catalog && Array.isArray(catalog.graphs) ? catalog.graphs : [];
  if (wanted && served.some((g) => g.name === wanted)) return { name: wanted, unknown: null };
  return { name: (catalog && catalog.default) || (served[0] && served[0].name) || null, unknown: wanted || null };
}

/** The page's query string with ?graph=NAME set (or removed), other parameters kept. */
export function searchWithGraph(search, name) {
  const p = new URLSearchParams(search || '');
  if (name) p.set('graph', name);
  else p.delete('graph');
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** GET /turns for the history panel: newest first, running ones included, of one graph. */
export function turnsListUrl(name, limit = 50) {
  const p = new URLSearchParams({ limit: String(limit) });
  if (name) p.set('graph', name);
  return `/turns?${p}`;
}

export function graphUrl(name) {
  return `/graphs/${encodeURIComponent(name)}`;
}

/**
 * GET /graphs. An older server (no such route) answers 404: then {legacy: true, error},
 * and the page uses that server's one graph (GET /graph, POST /chat) and says so.
 * Other failures (401, 5xx, network) are thrown.
 */
export async function loadCatalog(getJson, opts = {}) {
  try {
    return normalizeCatalog(await getJson('/graphs', opts));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { graphs: [], default: null, legacy: true, error: e };
    throw e;
  }
}

/** GET /graphs/{name}, normalised. */
export async function loadGraph(getJson, entry, opts = {}) {
  return normalizeGraph(await getJson(graphUrl(entry.name), opts), entry);
}

/** GET /graph of a legacy server: its topology, or a legacy graph without one (a 404). */
export async function loadLegacyGraph(getJson, opts = {}) {
  try {
    return legacyGraph(await getJson('/graph', opts));
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { ...legacyGraph(null), watchOnly: true };
    throw e;
  }
}
