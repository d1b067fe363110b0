import test from 'node:test';
import assert from 'node:assert/strict';
import { progressOf } from '../../relay/spa/progress.js';
import { TurnModel } from '../../relay/spa/turn.js';

// `custom` events in the SPA: a node's latest progress (docs/events.md, "Payloads from inside nodes").

test('a fraction is a bar, with its stage or message beside it', () => {
  assert.deepEqual(progressOf({ stage: 'prepare', progress: 0.33 }), { fraction: 0.33, text: 'prepare 33%' });
  assert.deepEqual(progressOf({ progress: 1 }), { fraction: 1, text: '100%' });
  assert.deepEqual(progressOf({ message: 'fetched 3 rows' }), { fraction: null, text: 'fetched 3 rows' });
});

test('no fraction: its text, else compact JSON', () => {
  assert.deepEqual(progressOf({ progress: 1.5, stage: 'x' }), { fraction: null, text: 'x' }, 'not a fraction');
  assert.deepEqual(progressOf({ progress: '50%' }), { fraction: null, text: '{"progress":"50%"}' });
  assert.deepEqual(progressOf('writing the answer'), { fraction: null, text: 'writing the answer' });
  assert.deepEqual(progressOf([1, 2]), { fraction: null, text: '[1,2]' });
  assert.deepEqual(progressOf(null), { fraction: null, text: 'null' });
  assert.equal(progressOf({ blob: 'y'.repeat(500) }).text.length, 80, 'long text cut');
});

test("the model keeps each node instance's latest payload", () => {
  const m = new TurnModel();
  let seq = 0;
  const env = () => ({ v: 1, seq: ++seq, thread_id: 'th', turn_id: 'tu', trace_id: 't1', ts: 1000 + seq });
  m.apply({ ...env(), type: 'graph_topology', graph_id: 'g', nodes: [{ id: 'prepare', label: 'prepare' }], edges: [] });
  m.apply({ ...env(), type: 'node_started', node: 'prepare', span_id: 'n1', namespace: [] });
  m.apply({ ...env(), type: 'node_started', node: 'inner', span_id: 'n2', namespace: ['sub'] });
  m.apply({ ...env(), type: 'custom', node: 'prepare', namespace: [], name: null, data: { stage: 'prepare', progress: 0.33 } });
  m.apply({ ...env(), type: 'custom', node: 'prepare', namespace: [], name: null, data: { stage: 'prepare', progress: 0.66 } });
  m.apply({ ...env(), type: 'custom', node: 'inner', namespace: ['sub'], name: 'inner_done', data: { ok: true } });
  assert.deepEqual(m.nodeInstances('prepare')[0].progress, { fraction: 0.66, text: 'prepare 66%' });
  assert.deepEqual(m.nodeInstances('inner', ['sub'])[0].progress, { fraction: null, text: '{"ok":true}' });
  assert.equal(m.apply({ ...env(), type: 'custom', node: 'ghost', namespace: [], data: 1 }), false, 'no such node');
});
