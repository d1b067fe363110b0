import test from 'node:test';
import assert from 'node:assert/strict';
import { TurnModel } from '../../relay/spa/turn.js';
import { outcomeLine, pauseKindOf } from '../../relay/spa/outcome.js';

function paused(interrupts) {
  const m = new TurnModel();
  m.apply({ type: 'graph_topology', seq: 1, turn_id: 't', trace_id: 'x', ts: 1, nodes: [], edges: [] });
  m.apply({ type: 'paused', seq: 2, turn_id: 't', trace_id: 'x', ts: 2, interrupts, resume: { method: 'POST', path: '/graphs/g/chat/resume' } });
  return m;
}

test('the outcome line of a pause says what it waits for', () => {
  const approval = paused([{ id: 'a', value: { type: 'approval', tool: 'issue_refund', args: {} } }]);
  assert.deepEqual(outcomeLine(approval, { pausedAt: 1000, now: 8000 }), { outcome: 'paused', text: 'Paused: waiting for approval', detail: 'issue_refund needs approval · waiting 0:07' });
  const question = paused([{ id: 'q', value: 'What is your name?' }]);
  assert.equal(outcomeLine(question).text, 'Paused: waiting for an answer');
  assert.equal(outcomeLine(question).detail, 'waiting for your answer');
  assert.equal(pauseKindOf(question.interrupts), 'input');
  assert.equal(pauseKindOf(approval.interrupts), 'approval');
  const review = paused([{ id: 'h', value: { action_requests: [{ name: 'send_email', args: {} }], review_configs: [] } }]);
  assert.equal(outcomeLine(review).detail, 'send_email needs review');
  assert.equal(review.resumeHint.path, '/graphs/g/chat/resume');
});

test('running: the top-level nodes that run (not a subgraph\'s inner ones)', () => {
  const m = new TurnModel();
  m.apply({ type: 'graph_topology', seq: 1, turn_id: 't', trace_id: 'x', ts: 1, nodes: [], edges: [] });
  m.apply({ type: 'node_started', seq: 2, turn_id: 't', trace_id: 'x', ts: 2, node: 'research', span_id: 'r', namespace: [] });
  m.apply({ type: 'node_started', seq: 3, turn_id: 't', trace_id: 'x', ts: 3, node: 'agent', span_id: 'a', namespace: ['research'] });
  assert.equal(outcomeLine(m).detail, 'in research');
});
