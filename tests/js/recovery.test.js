import test from 'node:test';
import assert from 'node:assert/strict';
import { NODE_STATES, TurnModel } from '../../relay/spa/turn.js';
import { parseAll } from '../../relay/spa/sse.js';
import { buildTimeline, runTitle, waitText } from '../../relay/spa/timeline.js';
import { STATE_TEXT } from '../../relay/spa/format.js';
import { outcomeLine, recoveryNotice } from '../../relay/spa/outcome.js';

// A turn whose server stopped mid-run and that another took up again from the thread's last
// checkpoint (docs/events.md, "turn_recovered"), or ended instead (interrupted with a reason, ...).

const TRACE_CUT = 'a'.repeat(32);
const TRACE_RECOVERED = 'b'.repeat(32);
const TOPOLOGY = {
  graph_id: 'g',
  nodes: ['__start__', 'prepare', 'generate', '__end__'].map((id) => ({ id, label: id })),
  edges: [
    ['__start__', 'prepare'],
    ['prepare', 'generate'],
    ['generate', '__end__'],
  ].map(([source, target]) => ({ source, target, conditional: false })),
};

/** The events of a turn as the relay sends them, seq-numbered; `trace` and `ts` per event. */
function stream() {
  let seq = 0;
  const events = [];
  const add = (type, trace, ts, fields) => {
    events.push({ v: 1, type, seq: ++seq, thread_id: 'th', turn_id: 'tu', trace_id: trace, ts, ...fields });
    return events[events.length - 1];
  };
  return { events, add };
}

/** The cut run: prepare completed, generate started, wrote some text and started a tool. */
function cutRun(s) {
  s.add('graph_topology', TRACE_CUT, 1000, { ...TOPOLOGY, run_kind: 'chat' });
  s.add('node_started', TRACE_CUT, 1001, { node: 'prepare', span_id: 'p1', parent_span_id: 'r1', step: 1, task_id: 'k1', namespace: [] });
  s.add('node_completed', TRACE_CUT, 1011, { node: 'prepare', span_id: 'p1', namespace: [], status: 'ok', duration_ms: 10, summary: {}, children: [] });
  s.add('node_started', TRACE_CUT, 1012, { node: 'generate', span_id: 'g1', parent_span_id: 'r1', step: 2, task_id: 'k2', namespace: [] });
  s.add('text_delta', TRACE_CUT, 1015, { message_id: 'm1', delta: 'Let me ', node: 'generate', span_id: 'c1' });
  s.add('tool_started', TRACE_CUT, 1020, { tool: 'lookup', span_id: 't1', node: 'generate', call_id: 'call1', idempotent: true, args: {} });
}

/** The recovered run (its server was gone 15 s): generate again, then the answer. */
function recoveredRun(s) {
  s.add('turn_recovered', TRACE_RECOVERED, 16000, { attempt: 1, reason: 'owner_lost', resumed_from: '1f0c-ckpt' });
  s.add('graph_topology', TRACE_RECOVERED, 16000, { ...TOPOLOGY, run_kind: 'recover' });
  s.add('node_started', TRACE_RECOVERED, 16001, { node: 'generate', span_id: 'g2', parent_span_id: 'r2', step: 2, task_id: 'k3', namespace: [] });
  s.add('tool_started', TRACE_RECOVERED, 16002, { tool: 'lookup', span_id: 't2', node: 'generate', call_id: 'call2', idempotent: true, args: {} });
  s.add('tool_completed', TRACE_RECOVERED, 16005, { tool: 'lookup', span_id: 't2', node: 'generate', call_id: 'call2', duration_ms: 3, status: 'ok' });
  s.add('text_delta', TRACE_RECOVERED, 16006, { message_id: 'm2', delta: 'It is 5 days.', node: 'generate', span_id: 'c2' });
  s.add('node_completed', TRACE_RECOVERED, 16010, { node: 'generate', span_id: 'g2', namespace: [], status: 'ok', duration_ms: 9, summary: {}, children: [] });
  const response = { thread_id: 'th', turn_id: 'tu', trace_id: TRACE_RECOVERED, status: 'answered', answer: 'It is 5 days.', citations: [], interrupts: [], nodes: [] };
  s.add('turn_completed', TRACE_RECOVERED, 16011, { response });
}

function feed(model, events) {
  for (const e of events) model.apply(e);
  return model;
}

/** What the page draws from a model: comparable across models. */
function snapshot(m) {
  return {
    states: Object.fromEntries(TOPOLOGY.nodes.map((n) => [n.id, m.nodeState(n.id)])),
    instances: m.instances.map((i) => [i.node, i.run, i.state, i.startTs, i.endTs, i.durationMs]),
    runs: m.runs.map((r) => ({ ...r })),
    tools: [...m.tools.entries()].map(([k, t]) => [k, t.running, t.status]),
    outcome: m.outcome,
    terminal: m.terminal,
    error: m.error,
    lastSeq: m.lastSeq,
    anomalies: m.anomalies,
    timeline: buildTimeline(m),
  };
}

test('every node state has its words', () => {
  for (const state of NODE_STATES) assert.equal(typeof STATE_TEXT[state], 'string', state);
  assert.ok(NODE_STATES.includes('cut'));
});

test('turn_recovered: the cut run ends recovered, its running node is cut, a recovered run starts', () => {
  const s = stream();
  cutRun(s);
  const m = feed(new TurnModel(), s.events);
  assert.equal(m.nodeState('generate'), 'running');
  assert.equal(m.runningTools().length, 1);
  const cutSeq = s.events.length;

  recoveredRun(s);
  m.apply(s.events[cutSeq]); // turn_recovered
  assert.equal(m.runs.length, 2);
  assert.deepEqual(m.runs[0], { kind: 'chat', traceId: TRACE_CUT, startTs: 1000, endTs: 1020, terminal: 'recovered', recovery: null });
  assert.deepEqual(m.runs[1], {
    kind: 'recover',
    traceId: TRACE_RECOVERED,
    startTs: 16000,
    endTs: null,
    terminal: null,
    recovery: { attempt: 1, reason: 'owner_lost', resumedFrom: '1f0c-ckpt' },
  });
  assert.equal(m.nodeState('prepare'), 'ok', 'what completed before the cut stays');
  assert.equal(m.nodeState('generate'), 'cut');
  assert.deepEqual(m.runningTools(), []);
  assert.equal(m.tools.get('t1').status, 'cut');
  assert.equal(m.outcome, 'running', 'no error: the turn goes on');
  assert.equal(m.terminal, false);
  assert.equal(m.error, null);
  assert.equal(m.streamedMessage(), null, 'the cut run\'s text is not the recovered run\'s');
  assert.deepEqual(m.lastRecovery(), { attempt: 1, reason: 'owner_lost', resumedFrom: '1f0c-ckpt' });

  m.apply(s.events[cutSeq + 1]); // graph_topology, run_kind recover, the same trace
  assert.equal(m.runs.length, 2, 'the recovered run\'s topology starts no third run');
  assert.equal(m.edgeTaken('generate', '__end__'), false, 'a cut node took no edge');
  m.apply(s.events[cutSeq + 2]); // generate again
  assert.equal(m.nodeState('generate'), 'running');
  assert.deepEqual(outcomeLine(m), { outcome: 'running', text: 'Running', detail: 'in generate · taken up again after its server stopped' });

  feed(m, s.events.slice(cutSeq + 3));
  assert.deepEqual(m.anomalies, []);
  assert.equal(m.lastSeq, s.events.length);
  assert.equal(m.outcome, 'answered');
  assert.equal(m.terminal, true);
  assert.deepEqual(
    m.nodeInstances('generate').map((i) => [i.run, i.state]),
    [
      [0, 'cut'],
      [1, 'ok'],
    ],
  );
  assert.equal(m.nodeState('generate'), 'ok');
  assert.equal(m.nodeState('__end__'), 'ok');
  assert.equal(m.edgeTaken('prepare', 'generate'), true);
  assert.equal(m.edgeTaken('generate', '__end__'), true);
  assert.equal(m.streamedMessage().text, 'It is 5 days.');
  assert.equal(m.runs[1].terminal, 'turn_completed');
});

test('the timeline: the cut run, the gap to its recovery, the recovered run', () => {
  const s = stream();
  cutRun(s);
  recoveredRun(s);
  const tl = buildTimeline(feed(new TurnModel(), s.events));
  assert.equal(tl.sections.length, 2);
  const [cut, recovered] = tl.sections;
  assert.equal(runTitle(cut), 'Run 1');
  assert.equal(cut.cut, true);
  assert.deepEqual(
    cut.rows.map((r) => [r.node, r.state, r.startMs, r.durationMs, r.cutMs]),
    [
      ['prepare', 'ok', 1, 10, undefined],
      ['generate', 'cut', 12, null, 8], // up to where its run was last seen (the tool's start)
    ],
  );
  assert.equal(runTitle(recovered), 'Recovered run 2 (recovery 1)');
  assert.equal(recovered.cut, false);
  assert.equal(recovered.waitBeforeMs, 14980);
  assert.equal(waitText(recovered), 'The server running the turn stopped responding; another took it up again from its last checkpoint 15.0 s later (not to scale)');
  assert.deepEqual(
    recovered.rows.map((r) => [r.node, r.state]),
    [['generate', 'ok']],
  );
});

test('a replay of the same events gives the same state, whether parsed from SSE or fed at once', () => {
  const s = stream();
  cutRun(s);
  recoveredRun(s);
  const live = new TurnModel();
  for (const e of s.events) live.apply(e);
  const sse = s.events.map((e) => `id: ${e.seq}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join('');
  const replayed = feed(new TurnModel(), parseAll(sse).map((e) => JSON.parse(e.data)));
  assert.deepEqual(snapshot(replayed), snapshot(live));
  const again = feed(new TurnModel(), structuredClone(s.events));
  assert.deepEqual(snapshot(again), snapshot(live));
});

test('a recovered run whose turn_recovered was not seen still cuts the run before it', () => {
  const s = stream();
  cutRun(s);
  recoveredRun(s);
  const m = feed(
    new TurnModel(),
    s.events.filter((e) => e.type !== 'turn_recovered'),
  );
  assert.deepEqual(
    m.runs.map((r) => [r.kind, r.terminal]),
    [
      ['chat', 'recovered'],
      ['recover', 'turn_completed'],
    ],
  );
  assert.deepEqual(
    m.nodeInstances('generate').map((i) => i.state),
    ['cut', 'ok'],
  );
  assert.equal(runTitle(buildTimeline(m).sections[1]), 'Recovered run 2 (recovery 1)');
});

test('a second recovery: recovery 2, handed over, and the turn still answers', () => {
  const s = stream();
  cutRun(s);
  s.add('turn_recovered', TRACE_RECOVERED, 16000, { attempt: 1, reason: 'owner_lost', resumed_from: 'c1' });
  s.add('graph_topology', TRACE_RECOVERED, 16000, { ...TOPOLOGY, run_kind: 'recover' });
  s.add('node_started', TRACE_RECOVERED, 16001, { node: 'generate', span_id: 'g2', parent_span_id: 'r2', step: 2, task_id: 'k3', namespace: [] });
  const third = 'c'.repeat(32);
  s.add('turn_recovered', third, 20000, { attempt: 2, reason: 'handed_over', resumed_from: 'c1' });
  s.add('graph_topology', third, 20000, { ...TOPOLOGY, run_kind: 'recover' });
  const m = feed(new TurnModel(), s.events);
  assert.deepEqual(
    m.runs.map((r) => [r.kind, r.terminal, r.recovery && r.recovery.attempt]),
    [
      ['chat', 'recovered', null],
      ['recover', 'recovered', 1],
      ['recover', null, 2],
    ],
  );
  assert.deepEqual(
    m.nodeInstances('generate').map((i) => [i.run, i.state]),
    [
      [0, 'cut'],
      [1, 'cut'],
    ],
  );
  const sections = buildTimeline(m).sections;
  assert.deepEqual(sections.map(runTitle), ['Run 1', 'Recovered run 2 (recovery 1)', 'Recovered run 3 (recovery 2)']);
  assert.match(waitText(sections[2]), /^The server running the turn was stopped and handed the turn over; another took it up again from its last checkpoint /);
  assert.equal(
    recoveryNotice(m.lastRecovery()),
    'The server running this turn was stopped and handed this turn over; another server took it up again from its last checkpoint: the steps that had finished are not run again (recovery 2).',
  );
});

test('the recovery notice of the conversation', () => {
  assert.equal(
    recoveryNotice({ attempt: 1, reason: 'owner_lost', resumedFrom: 'c1' }),
    'The server running this turn stopped responding; another server took it up again from its last checkpoint: the steps that had finished are not run again.',
  );
  assert.equal(recoveryNotice({ attempt: 1, reason: 'owner_lost', resumedFrom: null }), 'The server running this turn stopped responding; another server took it up again.');
  assert.equal(recoveryNotice(null), 'The server running this turn stopped responding; another server took it up again.');
});

for (const [label, code, retryable, message] of [
  ['interrupted (a tool was running)', 'interrupted', true, 'The server stopped while a tool of this turn was running (lookup), so the turn was not taken up again on its own: the tool may have done its work. Sending your message again runs it again.'],
  ['recovery_exhausted', 'recovery_exhausted', false, 'This turn was cut short by its server 4 times and was not taken up again. Please send your message again.'],
  ['interrupted', 'interrupted', true, 'The server stopped while this turn was running, so it did not finish. Please send your message again.'],
]) {
  test(`a turn ended ${label} instead: an error with its message, what ran cut`, () => {
    const s = stream();
    cutRun(s);
    s.add('error', TRACE_CUT, 16000, { code, message, node: null, retryable });
    const m = feed(new TurnModel(), s.events);
    assert.equal(m.outcome, 'error');
    assert.equal(m.terminal, true);
    assert.deepEqual(m.error, { code, message, node: null, retryable });
    assert.equal(m.nodeState('prepare'), 'ok');
    assert.equal(m.nodeState('generate'), 'cut');
    assert.deepEqual(outcomeLine(m), { outcome: 'error', text: 'Error', detail: message });
    assert.deepEqual(
      m.runs.map((r) => r.terminal),
      ['error'],
    );
  });
}

test('a node error still fails its node, and a cancel still cancels: only a server stop cuts', () => {
  const s = stream();
  cutRun(s);
  s.add('error', TRACE_CUT, 1030, { code: 'node_failed', message: 'x', node: 'generate', retryable: false });
  assert.equal(feed(new TurnModel(), s.events).nodeState('generate'), 'error');
  const c = stream();
  cutRun(c);
  c.add('error', TRACE_CUT, 1030, { code: 'cancelled', message: 'x', node: null, retryable: true });
  assert.equal(feed(new TurnModel(), c.events).nodeState('generate'), 'cancelled');
});
