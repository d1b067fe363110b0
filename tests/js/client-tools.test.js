import test from 'node:test';
import assert from 'node:assert/strict';
import { browserResume, clientToolCall, localTime, BROWSER_TOOLS } from '../../relay/spa/client-tools.js';

const CALL = { id: 'i1', value: { type: 'client_tool', name: 'local_time', arguments: {}, call_id: 'call_local_time', token: 'tok-1', round: 1 } };

test('a client-tool interrupt is a call; anything else is not', () => {
  assert.deepEqual(clientToolCall(CALL), { id: 'i1', name: 'local_time', args: {}, token: 'tok-1' });
  assert.equal(clientToolCall({ id: 'i2', value: { type: 'approval', tool: 'issue_refund' } }), null);
  assert.equal(clientToolCall({ id: 'i3', value: { type: 'client_tool', name: 'x' } }), null, 'no token: not answerable');
});

test('one known call resumes with its result and token, bare', () => {
  const ran = browserResume([CALL], { local_time: () => ({ local: 'noon' }) });
  assert.deepEqual(ran, { resume: { result: { local: 'noon' }, token: 'tok-1' }, names: ['local_time'] });
});

test('several calls resume by interrupt id; a failing tool answers with its error', () => {
  const other = { id: 'i2', value: { ...CALL.value, name: 'broken', call_id: 'c2', token: 'tok-2' } };
  const ran = browserResume([CALL, other], { local_time: () => 'noon', broken: () => { throw new Error('no clock'); } });
  assert.deepEqual(ran.resume, { i1: { result: 'noon', token: 'tok-1' }, i2: { error: 'no clock', token: 'tok-2' } });
});

test('an unknown tool or another interrupt leaves the pause to a person', () => {
  assert.equal(browserResume([{ ...CALL, value: { ...CALL.value, name: 'unknown' } }]), null);
  assert.equal(browserResume([CALL, { id: 'i2', value: { type: 'approval' } }]), null);
  assert.equal(browserResume([]), null);
});

test('local_time reads the clock and the time zone', () => {
  const t = localTime(new Date(Date.UTC(2026, 11, 3, 9, 30)));
  assert.equal(t.iso, '2026-12-03T09:30:00.000Z');
  assert.equal(typeof t.local, 'string');
  assert.equal(typeof t.time_zone, 'string');
  assert.equal(typeof t.utc_offset_minutes, 'number');
  assert.equal(typeof BROWSER_TOOLS.local_time, 'function');
});
