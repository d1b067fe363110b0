import test from 'node:test';
import assert from 'node:assert/strict';
import { drawnGraph, nodeKey, pathLabel } from '../../relay/spa/subgraphs.js';
import { layoutGraph, groupRows, placeIsolated, normalizeTopology } from '../../relay/spa/layout.js';
import { TurnModel } from '../../relay/spa/turn.js';
import { buildTimeline } from '../../relay/spa/timeline.js';

const TOPO = {
  graph_id: 'parent',
  nodes: ['__start__', 'research', 'write', '__end__'].map((id) => ({ id, label: id })),
  edges: [
    { source: '__start__', target: 'research', conditional: false },
    { source: 'research', target: 'write', conditional: false },
    { source: 'write', target: '__end__', conditional: false },
  ],
};

// A compiled subgraph `research` (agent -> tools -> agent), whose `tools` node holds another
// subgraph (`fetch`); a top-level `cleanup` that the topology does not list.
function events() {
  let seq = 0;
  let t = 1000;
  const env = () => ({ v: 1, seq: ++seq, thread_id: 'th', turn_id: 'tu', trace_id: 'a'.repeat(32) });
  const out = [{ ...env(), type: 'graph_topology', ts: t, run_kind: 'chat', ...TOPO }];
  const start = (node, span, parent, namespace) => out.push({ ...env(), type: 'node_started', ts: (t += 1), node, span_id: span, parent_span_id: parent, step: 1, task_id: span, namespace });
  const end = (node, span, namespace, status = 'ok', children = []) => out.push({ ...env(), type: 'node_completed', ts: (t += 1), node, span_id: span, namespace, status, duration_ms: 1, summary: {}, children });
  start('research', 'r', 'root', []);
  start('agent', 'a1', 'r', ['research']);
  end('agent', 'a1', ['research']);
  start('tools', 'tl', 'r', ['research']);
  start('fetch', 'f', 'tl', ['research', 'tools']);
  end('fetch', 'f', ['research', 'tools']);
  end('tools', 'tl', ['research']);
  start('agent', 'a2', 'r', ['research']);
  end('agent', 'a2', ['research']);
  end('research', 'r', [], 'ok', [
    { span_id: 'a1', parent_span_id: 'r', name: 'node agent', operation: 'other', start_ts: 1002, duration_ms: 1, status: 'ok' },
    { span_id: 'm1', parent_span_id: 'a1', name: 'chat fake', operation: 'chat', start_ts: 1002.2, duration_ms: 0.5, status: 'ok' },
    { span_id: 'g', parent_span_id: 'r', name: 'a guardrail', operation: 'apply_guardrail', start_ts: 1002.1, duration_ms: 0.1, status: 'ok' },
  ]);
  start('write', 'w', 'root', []);
  start('agent', 'wa', 'w', ['write']); // the same inner name in another parent
  start('cleanup', 'c', 'root'); // no namespace field at all: the top
  return out;
}

function model() {
  const m = new TurnModel();
  for (const e of events()) m.apply(e);
  return m;
}

test('inner nodes are kept apart from top-level nodes of the same name, by namespace', () => {
  const m = model();
  assert.equal(m.nodeState('research'), 'ok');
  assert.equal(m.nodeInstances('agent').length, 0, 'no top-level agent ran');
  assert.equal(m.nodeInstances('agent', ['research']).length, 2);
  assert.equal(m.nodeState('agent', ['research']), 'ok');
  assert.equal(m.nodeState('agent', ['write']), 'running');
  assert.equal(m.nodeState('fetch', ['research', 'tools']), 'ok');
  assert.equal(m.nodeState('cleanup'), 'running');
  assert.deepEqual(m.instances.find((i) => i.node === 'cleanup').namespace, []);
});

test('grouping: inner nodes under their top-level node, depth first; unknown top-level nodes drawn', () => {
  const d = drawnGraph(TOPO, model().instances);
  assert.deepEqual(d.topology.nodes.map((n) => n.id), ['__start__', 'research', 'write', '__end__', 'cleanup']);
  assert.equal(d.topology.nodes.at(-1).discovered, true);
  assert.deepEqual(d.discovered, ['cleanup']);
  const research = d.groups.get('research');
  assert.deepEqual(research.map((e) => [e.node, e.depth, pathLabel(e)]), [
    ['agent', 0, 'research › agent'],
    ['tools', 0, 'research › tools'],
    ['fetch', 1, 'research › tools › fetch'],
  ]);
  assert.equal(research[0].key, nodeKey(['research'], 'agent'));
  assert.notEqual(research[0].key, d.groups.get('write')[0].key);
  assert.equal(nodeKey([], 'agent'), 'agent');
  assert.ok(!d.groups.has('cleanup'));
});

test('a graph with no topology: every node seen is drawn, in the order they started', () => {
  const m = new TurnModel();
  m.apply({ type: 'graph_topology', seq: 1, turn_id: 't', trace_id: 'x', graph_id: 'LangGraph', nodes: [], edges: [], discovered: true });
  for (const [i, n] of ['a', 'b', 'c'].entries()) m.apply({ type: 'node_started', seq: i + 2, turn_id: 't', trace_id: 'x', node: n, span_id: n, namespace: [] });
  const d = drawnGraph(m.topology, m.instances);
  assert.deepEqual(d.topology.nodes.map((n) => n.id), ['a', 'b', 'c']);
  const l = layoutGraph(d.topology);
  const x = Object.fromEntries(l.nodes.map((n) => [n.id, n.x]));
  assert.ok(x.a < x.b && x.b < x.c, 'one after another, not stacked');
  // a subgraph node whose parent is nowhere (neither in the topology nor started) brings its parent
  const orphan = drawnGraph(null, [{ node: 'inner', namespace: ['outer'] }]);
  assert.deepEqual(orphan.topology.nodes.map((n) => n.id), ['outer']);
  assert.equal(orphan.groups.get('outer')[0].label, 'inner');
});

test('layout: a node with a group is taller, one row per inner node inside it, and nothing overlaps', () => {
  const d = drawnGraph(TOPO, model().instances);
  for (const direction of ['LR', 'TB']) {
    const l = layoutGraph(d.topology, { groups: d.groups, direction });
    const n = Object.fromEntries(l.nodes.map((x) => [x.id, x]));
    assert.equal(n.research.inner.length, 3);
    assert.equal(n.write.inner.length, 1);
    assert.equal(n.cleanup.inner.length, 0);
    assert.ok(n.research.height > n.cleanup.height, direction);
    assert.equal(n.research.headHeight, n.cleanup.height);
    for (const row of n.research.inner) {
      assert.ok(row.y >= n.research.headHeight - 0.01 && row.y + row.height <= n.research.height + 0.01, 'rows under the head, inside the box');
      assert.ok(row.x > 0 && row.x + row.width < n.research.width);
    }
    for (let i = 1; i < n.research.inner.length; i++) assert.ok(n.research.inner[i].y >= n.research.inner[i - 1].y + n.research.inner[i - 1].height);
    for (const a of l.nodes)
      for (const b of l.nodes)
        if (a !== b) assert.ok(!(a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height), `${a.id} overlaps ${b.id} (${direction})`);
    assert.ok(n.cleanup.discovered);
    // the discovered node sits after the flow, not inside it
    assert.equal(n.cleanup.layer, n.__end__.layer + 1);
  }
  // a huge group is capped (the last row stands for the rest)
  assert.equal(groupRows({ p: 30 }, 'p'), 8);
  assert.equal(groupRows(new Map([['p', [1, 2]]]), 'p'), 2);
  assert.equal(groupRows(null, 'p'), 0);
});

test('isolated nodes: a row when nothing has edges, else one layer after the rest', () => {
  const { nodes, edges } = normalizeTopology({ nodes: [{ id: '__end__' }, { id: 'x' }, { id: '__start__' }, { id: 'y' }] });
  const layer = placeIsolated(nodes, edges, new Map(nodes.map((n) => [n.id, 0])));
  assert.deepEqual(Object.fromEntries(layer), { __start__: 0, x: 1, y: 2, __end__: 3 });
  const t = normalizeTopology({ nodes: [{ id: 'lost' }], edges: [{ source: 'a', target: 'b' }] });
  const l2 = placeIsolated(t.nodes, t.edges, new Map([['lost', 0], ['a', 0], ['b', 1]]));
  assert.equal(l2.get('lost'), 2);
});

test('timeline: inner nodes are rows indented under their parent, their spans not repeated in it', () => {
  const tl = buildTimeline(model());
  const rows = tl.sections[0].rows;
  const names = rows.map((r) => `${'  '.repeat(r.depth)}${r.type}:${r.name}`);
  const research = rows.findIndex((r) => r.type === 'node' && r.name === 'research');
  assert.ok(research >= 0);
  // research's own children: the guardrail span only (agent's span and its model call are agent's)
  assert.ok(!rows.some((r) => r.type === 'span' && r.name === 'node agent'), names.join('\n'));
  assert.ok(!rows.some((r) => r.type === 'span' && r.name === 'chat fake'), names.join('\n'));
  assert.ok(rows.some((r) => r.type === 'span' && r.name === 'a guardrail'));
  const inner = rows.filter((r) => r.type === 'node' && r.namespace.length);
  assert.deepEqual(inner.map((r) => [r.name, r.depth]), [
    ['agent #1', 1],
    ['tools', 1],
    ['fetch', 2],
    ['agent #2', 1],
    ['agent', 1],
  ]);
});
