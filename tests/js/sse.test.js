import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { SSEParser, parseAll, readEventStream } from '../../relay/spa/sse.js';

const here = new URL('.', import.meta.url);
// Streams recorded from the real server (curl -N -H 'Accept: text/event-stream' ...): a normal,
// a refused, a paused and a resumed run, and a run failed by the fault header.
const recorded = readdirSync(new URL('fixtures/', here))
  .filter((f) => f.endsWith('.sse'))
  .sort()
  .map((f) => ({ name: f, text: readFileSync(new URL(`fixtures/${f}`, here), 'utf8') }));


function parseChunks(chunks) {
  const p = new SSEParser();
  const out = [];
  for (const c of chunks) out.push(...p.feed(c));
  out.push(...p.end());
  return { events: out, retry: p.retry, lastEventId: p.lastEventId };
}

function summary(events) {
  return events.map((e) => [e.type, e.lastEventId, e.data]);
}

test('a recorded stream parses into its events', () => {
  for (const { name, text } of recorded) {
    const { events, retry } = parseChunks([text]);
    assert.ok(events.length >= 5, name);
    assert.equal(retry, 2000, name);
    events.forEach((e, i) => {
      const obj = JSON.parse(e.data);
      assert.equal(obj.type, e.type, name);
      assert.equal(String(obj.seq), e.lastEventId, name);
      if (i === 0) assert.equal(e.type, 'graph_topology');
      if (i > 0) assert.equal(Number(e.lastEventId), Number(events[i - 1].lastEventId) + 1, 'ids increase by one');
    });
    assert.ok(['turn_completed', 'paused', 'error'].includes(events.at(-1).type));
  }
});

for (const { name, text } of recorded) {
  for (const [variant, t] of [
    ['LF', text],
    ['CRLF', text.replace(/\n/g, '\r\n')],
    ['CR', text.replace(/\n/g, '\r')],
  ]) {
    test(`${name} (${variant}): every two-chunk split gives the same events`, () => {
      const expected = summary(parseChunks([text]).events);
      for (let i = 0; i <= t.length; i++) {
        const got = summary(parseChunks([t.slice(0, i), t.slice(i)]).events);
        assert.deepEqual(got, expected, `split at ${i}`);
      }
    });
  }

  test(`${name}: one character per chunk, and random multi-splits`, () => {
    const expected = summary(parseChunks([text]).events);
    assert.deepEqual(summary(parseChunks([...text]).events), expected);
    const crlf = text.replace(/\n/g, '\r\n');
    assert.deepEqual(summary(parseChunks(crlf.split('')).events), expected);
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
    for (let k = 0; k < 300; k++) {
      const cuts = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => Math.floor(rnd() * crlf.length)).sort((a, b) => a - b);
      const chunks = [];
      let last = 0;
      for (const c of cuts) {
        chunks.push(crlf.slice(last, c));
        last = c;
      }
      chunks.push(crlf.slice(last));
      assert.deepEqual(summary(parseChunks(chunks).events), expected, `cuts ${cuts}`);
    }
  });

  test(`${name}: bytes split at every boundary decode whole (UTF-8 across chunks)`, async () => {
    const expected = summary(parseChunks([text]).events);
    const bytes = new TextEncoder().encode(text);
    for (let i = 0; i <= bytes.length; i += 1) {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(bytes.slice(0, i));
          c.enqueue(bytes.slice(i));
          c.close();
        },
      });
      const got = [];
      for await (const ev of readEventStream(body)) got.push(ev);
      assert.deepEqual(summary(got), expected, `byte split at ${i}`);
    }
  });
}

test('multi-line data joins with LF; the final LF is removed', () => {
  const ev = parseAll('data: first\ndata: second\ndata\ndata:third\n\n');
  assert.deepEqual(ev.map((e) => e.data), ['first\nsecond\n\nthird']);
});

test('only one leading space is stripped from a value', () => {
  assert.equal(parseAll('data:  two\n\n')[0].data, ' two');
  assert.equal(parseAll('data:x\n\n')[0].data, 'x');
});

test('comments and unknown fields are ignored; event type defaults to message', () => {
  const ev = parseAll(': hb\n\n:another comment\nfoo: bar\ndata: x\n\n');
  assert.equal(ev.length, 1);
  assert.equal(ev[0].type, 'message');
  assert.equal(ev[0].data, 'x');
});

test('an event with no data is not dispatched, but its id still sets the last event id', () => {
  const p = new SSEParser();
  assert.deepEqual(p.feed('id: 7\nevent: x\n\n'), []);
  assert.equal(p.lastEventId, '7');
  const [ev] = p.feed('event: y\ndata: z\n\n');
  assert.equal(ev.type, 'y'); // the event type buffer was reset by the empty dispatch
  assert.equal(ev.lastEventId, '7');
});

test('id persists across events, an empty id resets it, an id with NUL is ignored', () => {
  const ev = parseAll('id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\nid: 3\u00004\ndata: d\n\n');
  assert.deepEqual(ev.map((e) => e.lastEventId), ['1', '1', '', '']);
});

test('retry accepts only ASCII digits', () => {
  const p = new SSEParser();
  p.feed('retry: 2000\n\n');
  assert.equal(p.retry, 2000);
  p.feed('retry: 12a\n\nretry: -5\n\nretry:  30\n\n');
  assert.equal(p.retry, 2000);
  p.feed('retry:300\n\n');
  assert.equal(p.retry, 300);
});

test('an unterminated event at the end of the stream is discarded', () => {
  assert.deepEqual(parseAll('data: a\n\ndata: b\n'), parseAll('data: a\n\n'));
  assert.equal(parseAll('data: a\n\ndata: b').length, 1);
});

test('a leading BOM is stripped once; a later one is data', () => {
  assert.equal(parseAll('\uFEFFdata: a\n\n')[0].data, 'a');
  const p = new SSEParser();
  p.feed('data: a\n\n');
  assert.equal(p.feed('\uFEFFdata: b\n\n').length, 0); // "\uFEFFdata" is an unknown field
});

test('CR at the end of a chunk followed by LF is one line end, not two', () => {
  const p = new SSEParser();
  const out = [...p.feed('data: a\r'), ...p.feed('\ndata: b\r'), ...p.feed('\n\r'), ...p.feed('\n')];
  assert.deepEqual(out.map((e) => e.data), ['a\nb']);
});

test('mixed line ends in one stream', () => {
  const ev = parseAll('event: e1\rdata: x\r\n\ndata: y\n\r\n');
  assert.deepEqual(summary(ev), [['e1', '', 'x'], ['message', '', 'y']]);
});

test('readEventStream cancels the body when the consumer stops early', async () => {
  let cancelled = false;
  const body = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode('data: 1\n\ndata: 2\n\n'));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const ev of readEventStream(body)) {
    assert.equal(ev.data, '1');
    break;
  }
  assert.ok(cancelled);
});

test('multi-byte UTF-8 split across byte chunks stays whole', async () => {
  const text = 'id: 1\nevent: turn_completed\ndata: {"answer":"Crème brûlée 😀 — ok"}\n\n';
  const bytes = new TextEncoder().encode(text);
  for (let i = 0; i <= bytes.length; i++) {
    for (const j of [i, Math.min(bytes.length, i + 1), Math.min(bytes.length, i + 3)]) {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(bytes.slice(0, i));
          c.enqueue(bytes.slice(i, j));
          c.enqueue(bytes.slice(j));
          c.close();
        },
      });
      const got = [];
      for await (const ev of readEventStream(body)) got.push(ev);
      assert.equal(got.length, 1);
      assert.equal(JSON.parse(got[0].data).answer, 'Crème brûlée 😀 — ok');
    }
  }
});
