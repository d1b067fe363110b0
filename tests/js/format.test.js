import test from 'node:test';
import assert from 'node:assert/strict';
import { formatMs, formatClock, latencyBin, toolActivityText, argPairs } from '../../relay/spa/format.js';

test('durations read naturally', () => {
  assert.equal(formatMs(0.207), '0.21 ms');
  assert.equal(formatMs(2.189), '2.2 ms');
  assert.equal(formatMs(245.4), '245 ms');
  assert.equal(formatMs(3802.559), '3.80 s');
  assert.equal(formatMs(42000), '42.0 s');
  assert.equal(formatMs(125000), '2 min 05 s');
  assert.equal(formatMs(null), '–');
  assert.equal(formatClock(7500), '0:07');
  assert.equal(formatClock(3723000), '1:02:03');
});

test('the latency scale is fixed and logarithmic', () => {
  assert.deepEqual([0.2, 1, 9.9, 10, 150, 999, 1000, 60000, null].map(latencyBin), [0, 1, 1, 2, 3, 3, 4, 4, -1]);
});

test('tool activity uses the label when present', () => {
  assert.equal(toolActivityText({ tool: 'issue_refund', label: 'Issuing refund' }), 'Issuing refund…');
  assert.equal(toolActivityText({ tool: 'issue_refund', label: 'Issuing refund...' }), 'Issuing refund…');
  assert.equal(toolActivityText({ tool: 'issue_refund', label: null }), 'Running issue_refund…');
  assert.deepEqual(argPairs({ order_id: '1234', amount: 20.0, meta: { a: 1 } }), [['order_id', '1234'], ['amount', '20'], ['meta', '{"a":1}']]);
});
