import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { TurnModel } from '../../relay/spa/turn.js';

// text_delta in the SPA's turn model: the answer as it is written (docs/events.md, "Types").

function run({ trace = 't1', turn = 'tu', kind = 'chat', seq0 = 0 } = {}) {
  let seq = seq0;
  const env = () => ({ v: 1, seq: ++seq, thread_id: 'th', turn_id: turn, trace_id: trace, ts: 1000 + seq });
  return {
    topo: () => ({ ...env(), type: 'graph_topology', run_kind: kind, graph_id: 'g', nodes: [{ id: 'generate', label: 'generate' }], edges: [] }),
    started: (span = 'n1') => ({ ...env(), type: 'node_started', node: 'generate', span_id: span, parent_span_id: 'root', step: 1, task_id: 'x' }),
    delta: (delta, message = 'msg_1', span = 'chat1') => ({ ...env(), type: 'text_delta', message_id: message, delta, node: 'generate', span_id: span }),
    completed: (span = 'n1') => ({ ...env(), type: 'node_completed', node: 'generate', span_id: span, status: 'ok', duration_ms: 3, summary: {} }),
    done: (answer, status = 'answered') => ({ ...env(), type: 'turn_completed', response: { thread_id: 'th', turn_id: turn, trace_id: trace, status, answer, citations: [], interrupts: [], nodes: [] } }),
    paused: () => ({ ...env(), type: 'paused', interrupts: [{ id: 'i1', value: { type: 'approval', tool: 'issue_refund', args: {} } }], resume: {} }),
    get seq() {
      return seq;
    },
  };
}

test('the answer grows with each text_delta, in order', () => {
  const m = new TurnModel();
  const r = run();
  m.apply(r.topo());
  m.apply(r.started());
  assert.equal(m.streamedMessage(), null, 'nothing written yet');
  const seen = [];
  for (const w of ['Refunds ', 'take ', '5 ', 'days.']) {
    assert.equal(m.apply(r.delta(w)), true);
    seen.push(m.streamedMessage().text);
  }
  assert.deepEqual(seen, ['Refunds ', 'Refunds take ', 'Refunds take 5 ', 'Refunds take 5 days.']);
  assert.equal(m.streamedMessage().deltas, 4);
  assert.equal(m.streamedMessage().node, 'generate');
  assert.equal(m.outcome, 'running');
  m.apply(r.completed());
  m.apply(r.done('Refunds take 5 days.'));
  assert.equal(m.response.answer, m.streamedMessage().text, 'the answer is the concatenation');
  assert.equal(m.outcome, 'answered');
});

test('a second model call starts a new message: the last one is the answer', () => {
  const m = new TurnModel();
  const r = run();
  m.apply(r.topo());
  m.apply(r.delta('Partial ans', 'm1', 'c1'));
  m.apply(r.delta('Whole answer.', 'm2', 'c2'));
  assert.equal(m.streamedMessage().id, 'm2');
  assert.equal(m.streamedMessage().text, 'Whole answer.');
  assert.equal(m.texts.get('m1').text, 'Partial ans');
});

test('the text belongs to its run: a resume does not show the first run\'s text', () => {
  const m = new TurnModel();
  const chat = run();
  m.apply(chat.topo());
  m.apply(chat.delta('Let me check.', 'm1'));
  m.apply(chat.paused());
  assert.equal(m.streamedMessage().text, 'Let me check.', 'still this run until the next starts');
  const resume = run({ trace: 't2', kind: 'resume', seq0: chat.seq });
  m.apply(resume.topo());
  assert.equal(m.streamedMessage(), null);
  m.apply(resume.delta('Done.', 'm2'));
  assert.equal(m.streamedMessage().text, 'Done.');
  assert.equal(m.runs.length, 2);
});

test('unknown fields, missing ids and non-text deltas are tolerated', () => {
  const m = new TurnModel();
  const r = run();
  m.apply(r.topo());
  assert.equal(m.apply({ ...r.delta('x'), delta: 42 }), false);
  assert.equal(m.apply({ ...r.delta('a'), message_id: undefined, future: { x: 1 } }), true);
  assert.equal(m.streamedMessage().text, 'a');
  // a delta before any topology (a late attach) still opens a run
  const late = new TurnModel();
  assert.equal(late.apply(r.delta('tail')), true);
  assert.equal(late.streamedMessage().text, 'tail');
  assert.equal(late.outcome, 'running');
});

test('the chat log renders streamed text as text and app.js replaces it with the final answer', () => {
  const src = readFileSync(new URL('../../relay/spa/app.js', import.meta.url), 'utf8');
  const log = readFileSync(new URL('../../relay/spa/chat-log.js', import.meta.url), 'utf8');
  const show = log.slice(log.indexOf('  streamed(m) {'), log.indexOf('  endStreamed(partial) {'));
  assert.match(show, /\.textContent = m\.text/, 'deltas are set as textContent');
  assert.ok(!/innerHTML|insertAdjacentHTML/.test(show));
  assert.match(src, /chat\.answer\(r, chat\.endStreamed\(false\)\)/, 'the final answer takes the streamed bubble\'s place');
  assert.match(src, /case 'text_delta':\s*chat\.streamed\(app\.model\.streamedMessage\(\)\)/);
});
