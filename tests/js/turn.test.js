import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { TurnModel } from '../../relay/spa/turn.js';
import { parseAll } from '../../relay/spa/sse.js';
import { buildTimeline, nestChildren } from '../../relay/spa/timeline.js';
import { STATE_TEXT } from '../../relay/spa/format.js';

const NODES = ['__start__', 'guardrail_pre', 'retrieve_context', 'generate', 'human_approval', 'guardrail_post', '__end__'];
const TOPO = {
  graph_id: 'support',
  nodes: NODES.map((id) => ({ id, label: id })),
  edges: [
    ['__start__', 'guardrail_pre'],
    ['guardrail_pre', 'retrieve_context'],
    ['guardrail_pre', 'generate'],
    ['retrieve_context', 'generate'],
    ['generate', 'guardrail_post'],
    ['generate', 'human_approval'],
    ['human_approval', 'guardrail_post'],
    ['guardrail_post', '__end__'],
  ].map(([source, target]) => ({ source, target, conditional: false })),
};

function script(turn = 'tu', trace = 't1', seq0 = 0, t0 = 1000) {
  let seq = seq0;
  let t = t0;
  const env = () => ({ v: 1, seq: ++seq, thread_id: 'th', turn_id: turn, trace_id: trace });
  const s = {
    events: [],
    topo(kind = 'chat') {
      s.events.push({ ...env(), type: 'graph_topology', ts: t, run_kind: kind, ...TOPO });
      return s;
    },
    node(name, status = 'ok', dur = 2, children = []) {
      const span = `${name}-${seq}`;
      s.events.push({ ...env(), type: 'node_started', ts: t, node: name, span_id: span, parent_span_id: 'root', step: 1, task_id: 'x' });
      t += dur;
      s.events.push({ ...env(), type: 'node_completed', ts: t, node: name, span_id: span, status, duration_ms: dur, summary: {}, children });
      t += 0.5;
      return s;
    },
    push(type, fields) {
      s.events.push({ ...env(), type, ts: t, ...fields });
      return s;
    },
    get seq() {
      return seq;
    },
    get t() {
      return t;
    },
  };
  return s;
}

function feed(model, events) {
  for (const e of events) model.apply(e);
}

const states = (m) => Object.fromEntries(NODES.map((n) => [n, m.nodeState(n)]));

test('answered turn: nodes ok, unreached nodes skipped, outcome answered', () => {
  const m = new TurnModel();
  const s = script().topo();
  feed(m, s.events);
  assert.equal(m.outcome, 'running');
  assert.equal(m.nodeState('guardrail_pre'), 'idle');
  s.events.length = 0;
  s.push('node_started', { node: 'guardrail_pre', span_id: 'g1' });
  feed(m, s.events);
  assert.equal(m.nodeState('guardrail_pre'), 'running');
  assert.equal(m.nodeState('__start__'), 'ok');
  s.events.length = 0;
  s.push('node_completed', { node: 'guardrail_pre', span_id: 'g1', status: 'ok', duration_ms: 1.5 });
  s.node('retrieve_context').node('generate').node('guardrail_post');
  s.push('turn_completed', { response: { status: 'answered', answer: 'x', citations: [], nodes: [] } });
  feed(m, s.events);
  assert.deepEqual(states(m), {
    __start__: 'ok',
    guardrail_pre: 'ok',
    retrieve_context: 'ok',
    generate: 'ok',
    human_approval: 'skipped',
    guardrail_post: 'ok',
    __end__: 'ok',
  });
  assert.equal(m.outcome, 'answered');
  assert.equal(m.terminal, true);
  assert.ok(m.edgeTaken('guardrail_pre', 'retrieve_context'));
  assert.ok(!m.edgeTaken('guardrail_pre', 'generate'), 'the flow went through retrieve_context');
  assert.ok(m.edgeTaken('retrieve_context', 'generate'));
  assert.ok(!m.edgeTaken('generate', 'human_approval'));
  assert.ok(m.edgeTaken('guardrail_post', '__end__'));
  assert.ok(m.edgeTaken('__start__', 'guardrail_pre'));
});

test('refused turn: retrieve_context skipped', () => {
  const m = new TurnModel();
  const s = script().topo().node('guardrail_pre').node('generate').node('guardrail_post');
  s.push('turn_completed', { response: { status: 'refused', answer: 'no' } });
  feed(m, s.events);
  assert.equal(m.nodeState('retrieve_context'), 'skipped');
  assert.equal(m.outcome, 'refused');
  assert.equal(m.nodeState('__end__'), 'ok');
  assert.ok(m.edgeTaken('guardrail_pre', 'generate'));
  assert.ok(!m.edgeTaken('guardrail_pre', 'retrieve_context'));
});

test('paused then resumed: the resume topology keeps earlier states; human wait recorded', () => {
  const m = new TurnModel();
  const s = script('tu', 'trace1').topo().node('guardrail_pre').node('retrieve_context').node('generate').node('human_approval', 'paused');
  s.push('paused', { interrupts: [{ id: 'i1', value: { type: 'approval', tool: 'issue_refund', args: { order_id: '1234', amount: 20 } } }], resume: { method: 'POST', path: '/chat/resume' } });
  feed(m, s.events);
  assert.equal(m.outcome, 'paused');
  assert.equal(m.terminal, false);
  assert.equal(m.nodeState('human_approval'), 'paused');
  assert.equal(m.nodeState('guardrail_post'), 'idle', 'not skipped while the turn can still reach it');
  assert.equal(m.interrupts.length, 1);
  // resume run: a second graph_topology, same turn, another trace
  const r = script('tu', 'trace2', s.seq, s.t + 5000).topo('resume');
  feed(m, r.events);
  assert.equal(m.nodeState('generate'), 'ok', 'earlier states survive the second topology');
  assert.equal(m.nodeState('human_approval'), 'paused');
  assert.equal(m.outcome, 'running');
  assert.equal(m.runs.length, 2);
  r.events.length = 0;
  r.push('node_started', { node: 'human_approval', span_id: 'h2' });
  r.push('tool_started', { tool: 'issue_refund', span_id: 'tool1', node: 'human_approval', label: 'Issuing refund' });
  feed(m, r.events);
  assert.equal(m.nodeState('human_approval'), 'running');
  assert.deepEqual(m.runningTools().map((t) => t.label), ['Issuing refund']);
  r.events.length = 0;
  r.push('tool_completed', { tool: 'issue_refund', span_id: 'tool1', status: 'ok', duration_ms: 1 });
  r.push('node_completed', { node: 'human_approval', span_id: 'h2', status: 'ok', duration_ms: 3 });
  r.node('guardrail_post');
  r.push('turn_completed', { response: { status: 'answered', answer: 'Refund issued' }, human_wait_ms: 5000 });
  feed(m, r.events);
  assert.equal(m.runningTools().length, 0);
  assert.equal(m.nodeState('human_approval'), 'ok');
  assert.equal(m.nodeInstances('human_approval').length, 2);
  assert.equal(m.humanWaitMs, 5000);
  assert.equal(m.outcome, 'answered');
  assert.equal(m.nodeState('retrieve_context'), 'ok');
  const tl = buildTimeline(m);
  assert.equal(tl.sections.length, 2);
  assert.equal(tl.sections[1].waitBeforeMs, 5000);
  assert.equal(tl.sections[1].kind, 'resume');
});

test('a new turn resets the states', () => {
  const m = new TurnModel();
  const s = script('tu1').topo().node('guardrail_pre');
  s.push('turn_completed', { response: { status: 'answered' } });
  feed(m, s.events);
  assert.equal(m.nodeState('guardrail_pre'), 'ok');
  feed(m, script('tu2').topo().events);
  assert.equal(m.nodeState('guardrail_pre'), 'idle');
  assert.equal(m.turnId, 'tu2');
  assert.equal(m.runs.length, 1);
});

test('error turn: the failing node is error, the rest skipped, the outcome error', () => {
  const m = new TurnModel();
  const s = script().topo().node('guardrail_pre').node('retrieve_context').node('generate', 'error');
  s.push('error', { code: 'node_failed', message: 'generate failed', node: 'generate', retryable: false });
  feed(m, s.events);
  assert.equal(m.outcome, 'error');
  assert.equal(m.nodeState('generate'), 'error');
  assert.equal(m.nodeState('guardrail_post'), 'skipped');
  assert.equal(m.nodeState('__end__'), 'skipped');
  assert.equal(m.error.message, 'generate failed');
});

test('cancelled: running nodes become cancelled', () => {
  const m = new TurnModel();
  const s = script().topo().node('guardrail_pre');
  s.push('node_started', { node: 'retrieve_context', span_id: 'r' });
  s.push('error', { code: 'cancelled', message: 'cancelled', node: null });
  feed(m, s.events);
  assert.equal(m.outcome, 'cancelled');
  assert.equal(m.nodeState('retrieve_context'), 'cancelled');
});

test('parallel instances of a node are kept apart', () => {
  const m = new TurnModel();
  const s = script().topo();
  s.push('node_started', { node: 'retrieve_context', span_id: 'a', task_id: '1' });
  s.push('node_started', { node: 'retrieve_context', span_id: 'b', task_id: '2' });
  s.push('node_completed', { node: 'retrieve_context', span_id: 'a', status: 'ok', duration_ms: 1 });
  feed(m, s.events);
  assert.equal(m.nodeInstances('retrieve_context').length, 2);
  assert.equal(m.nodeState('retrieve_context'), 'running');
  feed(m, [{ type: 'node_completed', node: 'retrieve_context', span_id: 'b', status: 'error', duration_ms: 4, ts: 1010 }]);
  assert.equal(m.nodeState('retrieve_context'), 'error');
  const rows = buildTimeline(m).sections[0].rows.filter((r) => r.type === 'node');
  assert.deepEqual(rows.map((r) => r.name), ['retrieve_context #1', 'retrieve_context #2']);
});

test('unknown event types and fields are ignored', () => {
  const m = new TurnModel();
  feed(m, script().topo().events);
  assert.equal(m.apply({ type: 'message_saved', seq: 99, delta: 'x' }), false);
  assert.equal(m.apply(null), false);
  assert.equal(m.apply({ nope: 1 }), false);
  assert.equal(m.outcome, 'running');
});

test('a recorded stream drives the model to its outcome', () => {
  const text = readFileSync(new URL('fixtures/recorded_answered.sse', import.meta.url), 'utf8');
  const m = new TurnModel();
  for (const e of parseAll(text)) m.apply(JSON.parse(e.data));
  assert.equal(m.outcome, 'answered');
  assert.equal(m.nodeState('guardrail_post'), 'ok');
  const tl = buildTimeline(m);
  assert.equal(tl.sections.length, 1);
  const rows = tl.sections[0].rows;
  assert.equal(rows.filter((r) => r.type === 'node').length, 4);
  assert.ok(rows.some((r) => r.type === 'span' && r.operation === 'chat'));
  for (const r of rows) {
    assert.ok(r.startMs >= 0, 'start inside the run');
    assert.ok(r.startMs + r.durationMs <= tl.sections[0].totalMs + 1e-9, 'end inside the run');
  }
});

test('degraded mode: a ChatResponse and GET /graph draw the graph after the turn', () => {
  const m = new TurnModel();
  m.applyChatResponse(
    { thread_id: 'th', turn_id: 'tu', trace_id: 'x', status: 'refused', answer: 'no', nodes: [{ name: 'guardrail_pre', status: 'ok', duration_ms: 1 }, { name: 'generate', status: 'ok', duration_ms: 2 }, { name: 'guardrail_post', status: 'ok', duration_ms: 1 }] },
    TOPO,
  );
  assert.ok(m.degraded);
  assert.equal(m.outcome, 'refused');
  assert.equal(m.nodeState('retrieve_context'), 'skipped');
  assert.equal(m.nodeState('generate'), 'ok');
  const tl = buildTimeline(m);
  assert.ok(tl.approximate);
  assert.equal(tl.sections[0].totalMs, 4);
  // paused then resumed through JSON
  const p = new TurnModel();
  p.applyChatResponse({ status: 'paused', interrupts: [{ id: 'i', value: {} }], nodes: [{ name: 'generate', status: 'ok', duration_ms: 1 }, { name: 'human_approval', status: 'paused', duration_ms: 0 }] }, TOPO);
  assert.equal(p.outcome, 'paused');
  assert.equal(p.nodeState('guardrail_post'), 'idle');
  p.applyChatResponse({ status: 'answered', nodes: [{ name: 'human_approval', status: 'ok', duration_ms: 1 }, { name: 'guardrail_post', status: 'ok', duration_ms: 1 }] }, TOPO, { resumed: true });
  assert.equal(p.nodeState('generate'), 'ok');
  assert.equal(p.nodeState('human_approval'), 'ok');
  assert.equal(p.outcome, 'answered');
});

test('children nest by parent span id', () => {
  const out = nestChildren(
    [
      { span_id: 'b', parent_span_id: 'a', start_ts: 2 },
      { span_id: 'a', parent_span_id: 'node', start_ts: 1 },
      { span_id: 'c', parent_span_id: 'node', start_ts: 3 },
    ],
    'node',
  );
  assert.deepEqual(out.map((x) => [x.span.span_id, x.depth]), [['a', 1], ['b', 2], ['c', 1]]);
});

test('edges taken through the approval branch, in degraded mode too', () => {
  const m = new TurnModel();
  const s = script().topo().node('guardrail_pre').node('retrieve_context').node('generate').node('human_approval').node('guardrail_post');
  s.push('turn_completed', { response: { status: 'answered' } });
  feed(m, s.events);
  assert.ok(m.edgeTaken('generate', 'human_approval'));
  assert.ok(!m.edgeTaken('generate', 'guardrail_post'));
  assert.ok(m.edgeTaken('human_approval', 'guardrail_post'));
  const d = new TurnModel();
  d.applyChatResponse({ status: 'refused', nodes: ['guardrail_pre', 'generate', 'guardrail_post'].map((name) => ({ name, status: 'ok', duration_ms: 1 })) }, TOPO);
  assert.ok(d.edgeTaken('guardrail_pre', 'generate'));
  assert.ok(!d.edgeTaken('guardrail_pre', 'retrieve_context'));
  assert.ok(d.edgeTaken('guardrail_post', '__end__'));
});

function recordedEvents(name) {
  const text = readFileSync(new URL(`fixtures/recorded_${name}.sse`, import.meta.url), 'utf8');
  return parseAll(text).map((e) => JSON.parse(e.data));
}

test('recorded refused run: retrieve_context skipped, guardrail_pre blocked', () => {
  const m = new TurnModel();
  feed(m, recordedEvents('refused'));
  assert.equal(m.outcome, 'refused');
  assert.equal(m.nodeState('retrieve_context'), 'skipped');
  assert.equal(m.nodeState('human_approval'), 'skipped');
  assert.equal(m.nodeState('guardrail_pre'), 'ok');
  assert.equal(m.nodeInstances('guardrail_pre')[0].summary.guardrail.decision, 'block');
  assert.ok(m.edgeTaken('guardrail_pre', 'generate'));
});

test('recorded paused then resumed runs of one turn', () => {
  const m = new TurnModel();
  feed(m, recordedEvents('paused'));
  assert.equal(m.outcome, 'paused');
  assert.equal(m.nodeState('human_approval'), 'paused');
  assert.deepEqual(m.interrupts[0].value, { type: 'approval', tool: 'issue_refund', args: { order_id: '1234', amount: 20 } });
  assert.equal(m.resumeHint.path, '/chat/resume');
  const resumed = recordedEvents('resumed');
  assert.equal(resumed[0].turn_id, m.turnId, 'the recordings are one turn');
  let sawTool = false;
  for (const e of resumed) {
    m.apply(e);
    if (e.type === 'tool_started') {
      sawTool = true;
      assert.equal(m.runningTools()[0].label, 'Issuing refund');
    }
    if (e.type === 'graph_topology') assert.equal(m.nodeState('generate'), 'ok', 'the resume topology keeps earlier states');
  }
  assert.ok(sawTool);
  assert.equal(m.outcome, 'answered');
  assert.equal(m.nodeState('human_approval'), 'ok');
  assert.equal(m.nodeState('retrieve_context'), 'ok');
  assert.ok(m.humanWaitMs > 0);
  assert.equal(m.runs.length, 2);
  assert.equal(m.anomalies.length, 0, m.anomalies.join());
  const tl = buildTimeline(m);
  assert.equal(tl.sections.length, 2);
  assert.equal(tl.sections[1].waitBeforeMs, m.humanWaitMs);
  assert.ok(tl.sections[1].rows.some((r) => r.operation === 'execute_tool'));
});

test('recorded fault run: generate error, then the error event', () => {
  const m = new TurnModel();
  feed(m, recordedEvents('error'));
  assert.equal(m.outcome, 'error');
  assert.equal(m.nodeState('generate'), 'error');
  assert.equal(m.nodeState('guardrail_post'), 'skipped');
  assert.equal(m.error.code, 'node_failed');
  assert.equal(m.error.node, 'generate');
});

test('an attempt its RetryPolicy runs again is retrying, not a failure; the retry decides', () => {
  const m = new TurnModel();
  const s = script().topo();
  s.push('node_started', { node: 'retrieve_context', span_id: 'a' });
  s.push('node_completed', { node: 'retrieve_context', span_id: 'a', status: 'retrying', attempt: 1, duration_ms: 2 });
  feed(m, s.events);
  assert.equal(m.nodeState('retrieve_context'), 'retrying');
  feed(m, [
    { type: 'node_started', node: 'retrieve_context', span_id: 'b', ts: 1020 },
    { type: 'node_completed', node: 'retrieve_context', span_id: 'b', status: 'ok', attempt: 2, duration_ms: 3, ts: 1023 },
  ]);
  assert.equal(m.nodeState('retrieve_context'), 'ok');
  const rows = buildTimeline(m).sections[0].rows.filter((r) => r.type === 'node');
  assert.deepEqual(rows.map((r) => r.state), ['retrying', 'ok']);
  assert.equal(STATE_TEXT.retrying, 'retried');
});
