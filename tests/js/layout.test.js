import test from 'node:test';
import assert from 'node:assert/strict';
import { layoutGraph, findBackEdges, normalizeTopology } from '../../relay/spa/layout.js';

const demo = {
  nodes: ['__start__', 'guardrail_pre', 'retrieve_context', 'generate', 'human_approval', 'guardrail_post', '__end__'].map((id) => ({ id, label: id })),
  edges: [
    ['__start__', 'guardrail_pre', false],
    ['guardrail_pre', 'retrieve_context', true],
    ['guardrail_pre', 'generate', true],
    ['retrieve_context', 'generate', false],
    ['generate', 'guardrail_post', true],
    ['generate', 'human_approval', true],
    ['human_approval', 'guardrail_post', false],
    ['guardrail_post', '__end__', false],
  ].map(([source, target, conditional]) => ({ source, target, conditional })),
};

const byId = (l) => new Map(l.nodes.map((n) => [n.id, n]));

function overlaps(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function assertSane(l) {
  for (let i = 0; i < l.nodes.length; i++) {
    const n = l.nodes[i];
    assert.ok(n.x >= 0 && n.y >= 0 && n.x + n.width <= l.width + 0.01 && n.y + n.height <= l.height + 0.01, `${n.id} inside`);
    for (let j = i + 1; j < l.nodes.length; j++) assert.ok(!overlaps(n, l.nodes[j]), `${n.id} overlaps ${l.nodes[j].id}`);
  }
  for (const e of l.edges) {
    assert.ok(e.path.startsWith('M '), 'path');
    assert.ok(!/NaN|Infinity/.test(e.path), e.path);
  }
}

test('demo topology: left to right, every forward edge goes right', () => {
  const l = layoutGraph(demo);
  assertSane(l);
  const n = byId(l);
  assert.equal(n.get('__start__').layer, 0);
  assert.equal(n.get('guardrail_pre').layer, 1);
  assert.equal(n.get('retrieve_context').layer, 2);
  assert.equal(n.get('generate').layer, 3); // longest path: after retrieve_context
  assert.equal(n.get('human_approval').layer, 4);
  assert.equal(n.get('guardrail_post').layer, 5);
  assert.equal(n.get('__end__').layer, 6);
  for (const e of l.edges) {
    assert.equal(e.back, false);
    assert.ok(n.get(e.target).x > n.get(e.source).x, `${e.source}->${e.target}`);
  }
  assert.equal(l.crossings, 0);
  // the skip edge guardrail_pre -> generate passes beside retrieve_context through a dummy point
  const skip = l.edges.find((e) => e.source === 'guardrail_pre' && e.target === 'generate');
  assert.equal(skip.points.length, 3);
  assert.equal(skip.conditional, true);
  // start/end are small terminals
  assert.ok(n.get('__start__').terminal && n.get('__start__').width < n.get('generate').width);
});

test('a cycle is drawn with a back edge and stays layered', () => {
  const topo = {
    nodes: [{ id: '__start__' }, { id: 'agent' }, { id: 'tools' }, { id: '__end__' }],
    edges: [
      { source: '__start__', target: 'agent' },
      { source: 'agent', target: 'tools', conditional: true },
      { source: 'tools', target: 'agent' },
      { source: 'agent', target: '__end__', conditional: true },
    ],
  };
  const l = layoutGraph(topo);
  assertSane(l);
  const back = l.edges.filter((e) => e.back);
  assert.equal(back.length, 1);
  assert.deepEqual([back[0].source, back[0].target], ['tools', 'agent']);
  const n = byId(l);
  assert.ok(n.get('tools').x > n.get('agent').x);
  assert.ok(n.get('__end__').x > n.get('tools').x);
  assert.ok(l.height > Math.max(...l.nodes.map((x) => x.y + x.height)), 'room for the loop below');
});

test('fan-out / fan-in (parallel branches) are stacked in one layer without overlap', () => {
  const branches = ['a', 'b', 'c', 'd'];
  const topo = {
    nodes: [{ id: '__start__' }, { id: 'split' }, ...branches.map((id) => ({ id })), { id: 'join' }, { id: '__end__' }],
    edges: [
      { source: '__start__', target: 'split' },
      ...branches.map((b) => ({ source: 'split', target: b })),
      ...branches.map((b) => ({ source: b, target: 'join' })),
      { source: 'join', target: '__end__' },
    ],
  };
  const l = layoutGraph(topo);
  assertSane(l);
  const n = byId(l);
  const xs = new Set(branches.map((b) => n.get(b).x));
  assert.equal(xs.size, 1);
  assert.equal(l.crossings, 0);
});

test('crossings are reduced by the ordering', () => {
  // two chains whose initial order would cross
  const topo = {
    nodes: ['s1', 's2', 'm2', 'm1', 't1', 't2'].map((id) => ({ id })),
    edges: [
      { source: 's1', target: 'm1' },
      { source: 's2', target: 'm2' },
      { source: 'm1', target: 't1' },
      { source: 'm2', target: 't2' },
    ],
  };
  const l = layoutGraph(topo);
  assertSane(l);
  assert.equal(l.crossings, 0);
});

test('edges to nodes not listed still lay out; duplicates and self loops are tolerated', () => {
  const l = layoutGraph({
    nodes: [{ id: 'x' }],
    edges: [
      { source: 'x', target: 'y' },
      { source: 'x', target: 'y' },
      { source: 'y', target: 'y' },
    ],
  });
  assertSane(l);
  assert.deepEqual(l.nodes.map((n) => n.id), ['x', 'y']);
  assert.equal(l.edges.length, 2);
  assert.ok(l.edges[1].back);
});

test('an empty or missing topology gives an empty layout', () => {
  assert.deepEqual(layoutGraph(null), { nodes: [], edges: [], width: 0, height: 0 });
  assert.deepEqual(layoutGraph({ nodes: [], edges: [] }).nodes, []);
});

test('a cycle with no source still terminates', () => {
  const { nodes, edges } = normalizeTopology({ edges: [{ source: 'a', target: 'b' }, { source: 'b', target: 'c' }, { source: 'c', target: 'a' }] });
  assert.equal(findBackEdges(nodes, edges).size, 1);
  assertSane(layoutGraph({ edges }));
});

test('a larger random DAG: no overlaps, forward edges go right', () => {
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  for (let k = 0; k < 30; k++) {
    const n = 3 + Math.floor(rnd() * 14);
    const nodes = Array.from({ length: n }, (_, i) => ({ id: `n${i}` }));
    const edges = [];
    for (let i = 0; i < n; i++) for (let j = i + 1; j < n; j++) if (rnd() < 0.25) edges.push({ source: `n${i}`, target: `n${j}`, conditional: rnd() < 0.3 });
    const l = layoutGraph({ nodes, edges });
    assertSane(l);
    const m = byId(l);
    for (const e of l.edges) assert.ok(m.get(e.target).layer > m.get(e.source).layer);
  }
});

test('top-to-bottom direction: layers go down, the same order across', () => {
  const lr = layoutGraph(demo);
  const tb = layoutGraph(demo, { direction: 'TB' });
  assertSane(tb);
  assert.equal(tb.direction, 'TB');
  const a = byId(lr);
  const b = byId(tb);
  for (const e of tb.edges) assert.ok(b.get(e.target).y > b.get(e.source).y, `${e.source}->${e.target}`);
  for (const n of tb.nodes) {
    assert.equal(n.layer, a.get(n.id).layer);
    assert.equal(n.order, a.get(n.id).order);
  }
  assert.ok(tb.height > tb.width, 'tall, for a narrow screen');
  assert.ok(tb.width < 420);
  // a back edge loops on the right in TB
  const loop = layoutGraph({ edges: [{ source: 'a', target: 'b' }, { source: 'b', target: 'a' }] }, { direction: 'TB' });
  assertSane(loop);
  assert.ok(loop.edges[1].back);
  assert.ok(loop.width > Math.max(...loop.nodes.map((n) => n.x + n.width)));
});
