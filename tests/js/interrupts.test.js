import test from 'node:test';
import assert from 'node:assert/strict';
import {
  describeInterrupt, describeInterrupts, buildResume, answerFor, decisionFor, textAnswer, resumeValue, allowedDecisions,
  approvalAnswer, asksApproval, pauseDetail, DEFAULT_REJECT_COMMENT,
} from '../../relay/spa/interrupts.js';

const APPROVAL = { id: 'i1', value: { type: 'approval', tool: 'issue_refund', args: { order_id: '1234', amount: 20.0 } } };

// LangChain's HumanInTheLoopMiddleware (langchain.agents.middleware.human_in_the_loop.HITLRequest)
const HITL = {
  id: 'i2',
  value: {
    action_requests: [
      { name: 'send_email', args: { to: 'a@example.com', body: 'hi' }, description: 'Tool execution requires approval' },
      { name: 'delete_file', args: { path: '/tmp/x' } },
      { name: 'lookup', args: { q: 'x' } },
    ],
    review_configs: [
      { action_name: 'send_email', allowed_decisions: ['approve', 'edit', 'reject'] },
      { action_name: 'delete_file', allowed_decisions: ['approve', 'reject'] },
      { action_name: 'lookup', allowed_decisions: ['respond', 'bogus', 'respond'] },
    ],
  },
};

test('an approval value: Approve / Reject and a comment; resumes with {approved, comment?}', () => {
  const d = describeInterrupt(APPROVAL);
  assert.equal(d.kind, 'approval');
  assert.equal(d.id, 'i1');
  assert.equal(d.tool, 'issue_refund');
  assert.deepEqual(d.controls, ['approve', 'reject', 'comment']);
  assert.deepEqual(buildResume([d], [{ approved: true, comment: '' }]), { ok: true, resume: { approved: true }, errors: [] });
  assert.deepEqual(buildResume([d], [{ approved: true, comment: ' fine ' }]).resume, { approved: true, comment: 'fine' });
  assert.deepEqual(buildResume([d], [{ approved: false, comment: 'Outside the window' }]).resume, { approved: false, comment: 'Outside the window' });
  // as the SPA always did: a rejection says who rejected it when no comment was written
  assert.deepEqual(approvalAnswer(false, ''), { approved: false, comment: DEFAULT_REJECT_COMMENT });
  // no choice yet: not sent
  assert.equal(buildResume([d], [{}]).ok, false);
  assert.equal(pauseDetail([d]), 'issue_refund needs approval');
  assert.ok(asksApproval([d]));
});

test('a human-in-the-loop request: each action with exactly its allowed decisions', () => {
  const d = describeInterrupt(HITL);
  assert.equal(d.kind, 'hitl');
  assert.deepEqual(d.actions.map((a) => [a.name, a.decisions]), [
    ['send_email', ['approve', 'edit', 'reject']],
    ['delete_file', ['approve', 'reject']],
    ['lookup', ['respond']], // unknown decision types are dropped, duplicates too
  ]);
  assert.equal(d.actions[0].description, 'Tool execution requires approval');
  assert.equal(d.actions[1].description, null);
  assert.equal(pauseDetail([d]), 'send_email, delete_file, lookup need review');
});

test('a review resumes with {decisions: [...]}: one per action, in order', () => {
  const d = describeInterrupt(HITL);
  const r = buildResume([d], [{
    choices: [
      { type: 'edit', argsText: '{"to": "b@example.com", "body": "hello"}' },
      { type: 'reject', message: '  not this one ' },
      { type: 'respond', message: 'the answer is 42' },
    ],
  }]);
  assert.equal(r.ok, true, r.errors.join());
  assert.deepEqual(r.resume, {
    decisions: [
      { type: 'edit', edited_action: { name: 'send_email', args: { to: 'b@example.com', body: 'hello' } } },
      { type: 'reject', message: 'not this one' },
      { type: 'respond', message: 'the answer is 42' },
    ],
  });
  const plain = buildResume([d], [{ choices: [{ type: 'approve' }, { type: 'reject', message: '' }, { type: 'respond', message: 'x' }] }]);
  assert.deepEqual(plain.resume.decisions.slice(0, 2), [{ type: 'approve' }, { type: 'reject' }]);
});

test('a review is not sent with a missing, disallowed or malformed decision', () => {
  const d = describeInterrupt(HITL);
  const missing = buildResume([d], [{ choices: [{ type: 'approve' }] }]);
  assert.equal(missing.ok, false);
  assert.equal(missing.errors.length, 2);
  assert.match(missing.errors[0], /delete_file/);
  assert.equal(decisionFor(d.actions[1], { type: 'edit', argsText: '{}' }).ok, false, 'edit is not allowed for delete_file');
  assert.match(decisionFor(d.actions[0], { type: 'edit', argsText: '{"to": ' }).error, /not valid JSON/);
  assert.match(decisionFor(d.actions[0], { type: 'edit', argsText: '[1, 2]' }).error, /JSON object/);
  assert.match(decisionFor(d.actions[2], { type: 'respond', message: ' ' }).error, /response/);
});

test('review configs are matched by position, else by action name; none at all: approve or reject', () => {
  const a = { name: 'b' };
  assert.deepEqual(allowedDecisions([{ action_name: 'a', allowed_decisions: ['approve'] }, { action_name: 'b', allowed_decisions: ['reject'] }], a, 0), ['reject']);
  assert.deepEqual(allowedDecisions([], a, 0), ['approve', 'reject']);
  assert.deepEqual(allowedDecisions(undefined, a, 0), ['approve', 'reject']);
});

test('the per-call form of the middleware ({type: "tool_approval"}) resumes with one decision', () => {
  const d = describeInterrupt({ id: 'i3', value: { type: 'tool_approval', tool_call_id: 'c1', name: 'search', args: { q: 'x' }, description: 'ok?' } });
  assert.equal(d.kind, 'tool_approval');
  assert.deepEqual(d.actions[0].decisions, ['approve', 'edit', 'reject']);
  assert.deepEqual(buildResume([d], [{ choices: [{ type: 'approve' }] }]).resume, { type: 'approve' });
});

test('any other value: a text box, sent as JSON when it parses, else as a string', () => {
  for (const value of ['What is your name?', 42, null, ['a'], { question: 'x', options: [1, 2] }, { type: 'other' }]) {
    const d = describeInterrupt({ id: 'q', value });
    assert.equal(d.kind, 'value', JSON.stringify(value));
    assert.deepEqual(d.controls, ['text']);
  }
  // an action_requests list that is not one (no names) is a plain value too
  assert.equal(describeInterrupt({ id: 'q', value: { action_requests: [{ args: {} }] } }).kind, 'value');
  assert.equal(textAnswer(' Alice '), 'Alice');
  assert.equal(textAnswer('42'), 42);
  assert.equal(textAnswer('"42"'), '42');
  assert.equal(textAnswer('true'), true);
  assert.deepEqual(textAnswer('{"a": [1, 2]}'), { a: [1, 2] });
  assert.equal(textAnswer('{not json'), '{not json');
  assert.equal(textAnswer(''), '');
  const d = describeInterrupt({ id: 'q', value: 'Your name?' });
  assert.deepEqual(answerFor(d, { text: '{"name": "Alice"}' }).value, { name: 'Alice' });
  assert.equal(pauseDetail([d]), 'waiting for your answer');
  assert.equal(asksApproval([d]), false);
});

test('several interrupts at once resume with {interrupt_id: answer}', () => {
  const descs = describeInterrupts([APPROVAL, HITL, { id: 'i4', value: 'Why?' }]);
  const r = buildResume(descs, [
    { approved: false, comment: 'no' },
    { choices: [{ type: 'approve' }, { type: 'approve' }, { type: 'respond', message: 'r' }] },
    { text: 'because' },
  ]);
  assert.deepEqual(r.resume, {
    i1: { approved: false, comment: 'no' },
    i2: { decisions: [{ type: 'approve' }, { type: 'approve' }, { type: 'respond', message: 'r' }] },
    i4: 'because',
  });
  assert.equal(asksApproval(descs), false);
  // one interrupt: its answer as it is (not keyed)
  assert.deepEqual(resumeValue([descs[0]], [{ approved: true }]), { approved: true });
  // an interrupt without an id (an old record) is keyed by its position
  assert.deepEqual(resumeValue(describeInterrupts([{ value: 1 }, { value: 2 }]), ['a', 'b']), { 0: 'a', 1: 'b' });
});
