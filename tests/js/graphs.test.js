import test from 'node:test';
import assert from 'node:assert/strict';
import { ApiError, getJson } from '../../relay/spa/api.js';
import {
  normalizeCatalog, normalizeGraph, chooseGraph, searchWithGraph, turnsListUrl, safePath, loadCatalog, loadGraph,
  loadLegacyGraph, LEGACY_ROUTES, graphUrl,
} from '../../relay/spa/graphs.js';

// GET /graphs and GET /graphs/{name} as DESIGN §5 gives them (the demo server's answers).
const CATALOG = {
  graphs: [
    { name: 'support_agent', title: 'Support agent', graph_id: 'support_agent', routes: { chat: '/graphs/support_agent/chat', resume: '/graphs/support_agent/chat/resume', agui: '/graphs/support_agent/agui' } },
  ],
  default: 'support_agent',
};
const DETAIL = {
  name: 'support_agent', title: 'Support agent', description: null,
  examples: ['How do refunds work?', '  ', 'How do refunds work?', 42, 'Second'],
  graph_id: 'support_agent',
  topology: { graph_id: 'support_agent', nodes: [{ id: '__start__', label: '__start__' }, { id: 'a', label: 'a' }], edges: [{ source: '__start__', target: 'a', conditional: false }] },
  routes: CATALOG.graphs[0].routes,
};

function jsonFetch(routes) {
  const seen = [];
  const fetchImpl = async (url, init) => {
    seen.push({ url, init });
    const r = routes[url];
    if (!r) return new Response(JSON.stringify({ detail: 'Not Found' }), { status: 404, statusText: 'Not Found', headers: { 'content-type': 'application/json' } });
    return new Response(JSON.stringify(r.body), { status: r.status || 200, headers: { 'content-type': 'application/json' } });
  };
  const get = (url, opts = {}) => getJson(url, { ...opts, fetchImpl });
  return { get, seen };
}

test('the catalog: graphs with titles and same-origin routes, the default', () => {
  const c = normalizeCatalog(CATALOG);
  assert.equal(c.legacy, false);
  assert.equal(c.default, 'support_agent');
  assert.deepEqual(c.graphs, [{ name: 'support_agent', title: 'Support agent', graphId: 'support_agent', routes: CATALOG.graphs[0].routes }]);
  // a relay-only server serves none
  assert.deepEqual(normalizeCatalog({ graphs: [], default: null }), { graphs: [], default: null, legacy: false });
  // no title: the name; routes missing or off-origin: the graph's own paths; junk skipped
  const odd = normalizeCatalog({ graphs: [{ name: 'r b', routes: { chat: 'https://evil.example/chat', resume: '//evil/x' } }, { title: 'no name' }, null, { name: 'r b' }], default: 'nope' });
  assert.equal(odd.graphs.length, 1);
  assert.equal(odd.graphs[0].title, 'r b');
  assert.deepEqual(odd.graphs[0].routes, { chat: '/graphs/r%20b/chat', resume: '/graphs/r%20b/chat/resume', agui: '/graphs/r%20b/agui' });
  assert.equal(odd.default, 'r b', 'an unknown default falls back to the first graph');
  assert.equal(safePath('/x', '/y'), '/x');
  assert.equal(safePath('/\\evil', '/y'), '/y');
  assert.equal(safePath(null, '/y'), '/y');
});

test('a graph: title, description, examples (text, unique), topology, routes', () => {
  const g = normalizeGraph(DETAIL, normalizeCatalog(CATALOG).graphs[0]);
  assert.equal(g.title, 'Support agent');
  assert.equal(g.description, null);
  assert.deepEqual(g.examples, ['How do refunds work?', 'Second']);
  assert.deepEqual(g.topology.nodes.map((n) => n.id), ['__start__', 'a']);
  assert.equal(g.routes.chat, '/graphs/support_agent/chat');
  assert.equal(g.routes.resume, '/graphs/support_agent/chat/resume');
  // no topology (a graph the server cannot draw): null, the turn's own topology event draws it
  assert.equal(normalizeGraph({ name: 'x', topology: { nodes: [], edges: [] } }).topology, null);
  assert.equal(normalizeGraph({ name: 'x', description: '  An agent. ' }).description, 'An agent.');
  assert.equal(normalizeGraph({ name: 'x' }).title, 'x');
  assert.ok(normalizeGraph({ name: 'x', examples: Array.from({ length: 20 }, (_, i) => `e${i}`) }).examples.length <= 8);
});

test('?graph=NAME picks the graph when it is served, else the default (and says which was unknown)', () => {
  const c = normalizeCatalog({ graphs: [{ name: 'a' }, { name: 'b' }], default: 'b' });
  assert.deepEqual(chooseGraph(c, '?graph=a'), { name: 'a', unknown: null });
  assert.deepEqual(chooseGraph(c, ''), { name: 'b', unknown: null });
  assert.deepEqual(chooseGraph(c, '?graph=zzz&fault=x'), { name: 'b', unknown: 'zzz' });
  assert.deepEqual(chooseGraph(normalizeCatalog({ graphs: [], default: null }), '?graph=a'), { name: null, unknown: 'a' });
  assert.equal(searchWithGraph('?fault=generate%3Derror', 'b'), '?fault=generate%3Derror&graph=b');
  assert.equal(searchWithGraph('?graph=a', 'b'), '?graph=b');
  assert.equal(searchWithGraph('?graph=a', null), '');
  assert.equal(turnsListUrl('support_agent'), '/turns?limit=50&graph=support_agent');
  assert.equal(turnsListUrl(null, 10), '/turns?limit=10');
  assert.equal(graphUrl('a/b'), '/graphs/a%2Fb');
});

test('the client: GET /graphs then GET /graphs/{name}, with the auth headers', async () => {
  const { get, seen } = jsonFetch({ '/graphs': { body: CATALOG }, '/graphs/support_agent': { body: DETAIL } });
  const opts = { headers: { Authorization: 'Bearer t' } };
  const catalog = await loadCatalog(get, opts);
  assert.equal(catalog.legacy, false);
  const g = await loadGraph(get, catalog.graphs[0], opts);
  assert.equal(g.name, 'support_agent');
  assert.deepEqual(seen.map((s) => s.url), ['/graphs', '/graphs/support_agent']);
  assert.equal(seen[0].init.headers.Authorization, 'Bearer t');
  assert.equal(seen[0].init.headers.Accept, 'application/json');
});

test('an older server (404 on /graphs) is legacy: its one graph from GET /graph and the /chat routes', async () => {
  const topo = { graph_id: 'g', nodes: [{ id: 'a' }], edges: [] };
  const { get } = jsonFetch({ '/graph': { body: topo } });
  const catalog = await loadCatalog(get);
  assert.equal(catalog.legacy, true);
  assert.ok(catalog.error instanceof ApiError && catalog.error.status === 404);
  const g = await loadLegacyGraph(get);
  assert.deepEqual(g.routes, LEGACY_ROUTES);
  assert.equal(g.title, null);
  assert.deepEqual(g.examples, []);
  assert.deepEqual(g.topology.nodes, [{ id: 'a' }]);
  // an old relay-only server has no /graph either: nothing to talk to
  const none = await loadLegacyGraph(jsonFetch({}).get);
  assert.equal(none.watchOnly, true);
});

test('other failures are thrown (a token is needed, the server is down)', async () => {
  const { get } = jsonFetch({ '/graphs': { status: 401, body: { error: { code: 'unauthorized', message: 'A bearer token is required.' } } } });
  await assert.rejects(loadCatalog(get), (e) => e instanceof ApiError && e.status === 401 && /bearer/.test(e.message));
  const down = jsonFetch({ '/graphs': { status: 503, body: { error: { code: 'store_unavailable', message: 'down' } } } });
  await assert.rejects(loadCatalog(down.get), (e) => e.status === 503);
});
