import test from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';

// Every module of the SPA except the entry point (app.js wires the page) imports in Node:
// no DOM access at import time.
const modules = [
  'sse.js', 'layout.js', 'turn.js', 'timeline.js', 'format.js', 'api.js', 'graph-view.js', 'timeline-view.js',
  'graphs.js', 'interrupts.js', 'interrupt-card.js', 'subgraphs.js', 'chat-log.js', 'graph-settings.js', 'history.js',
  'outcome.js', 'details.js', 'turn-feed.js', 'follow.js', 'dom.js', 'page-ui.js', 'token.js', 'turn-view.js', 'pause.js',
  'runs.js', 'chat-send.js', 'graph-loading.js', 'turn-lists.js', 'replay.js', 'progress.js',
];

for (const m of modules) {
  test(`relay/spa/${m} imports without a DOM`, async () => {
    const mod = await import(`../../relay/spa/${m}`);
    assert.ok(Object.keys(mod).length > 0);
  });
}

test('trace links: base URL + /trace/ + trace id; only http(s)', async () => {
  const { traceHref } = await import('../../relay/spa/timeline-view.js');
  assert.equal(traceHref('http://jaeger:16686/', 'ab'.repeat(16)), `http://jaeger:16686/trace/${'ab'.repeat(16)}`);
  assert.equal(traceHref('https://x.example/ui', 'abc'), 'https://x.example/ui/trace/abc');
  assert.equal(traceHref(null, 'abc'), null);
  assert.equal(traceHref('javascript:alert(1)', 'abc'), null);
});

test('no module writes HTML from strings', () => {
  for (const m of [...modules, 'app.js']) {
    const src = readFileSync(new URL(`../../relay/spa/${m}`, import.meta.url), 'utf8');
    assert.ok(!/innerHTML|outerHTML|insertAdjacentHTML|document\.write/.test(src), m);
  }
});

test('index.html has no inline script, inline style or style attribute (CSP)', () => {
  const html = readFileSync(new URL('../../relay/spa/index.html', import.meta.url), 'utf8');
  assert.ok(!/<style[\s>]/i.test(html), 'inline <style>');
  assert.ok(!/\sstyle\s*=/i.test(html), 'style attribute');
  assert.ok(!/\son[a-z]+\s*=/i.test(html), 'inline event handler');
  for (const m of html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/gi)) {
    assert.match(m[1], /\ssrc=/, 'external scripts only');
    assert.equal(m[2].trim(), '', 'no inline script body');
  }
});

test('no demo text in the SPA: every word about a graph comes from the server (GET /graphs/{name})', () => {
  const files = readdirSync(new URL('../../relay/spa/', import.meta.url)).filter((f) => /\.(js|html|css)$/.test(f));
  assert.ok(files.includes('app.js') && files.includes('index.html'));
  for (const f of files) {
    const src = readFileSync(new URL(`../../relay/spa/${f}`, import.meta.url), 'utf8');
    for (const word of [/support agent/i, /refund/i, /\bshop\b/i, /knowledge base/i, /guardrail_pre|retrieve_context|human_approval/]) {
      assert.ok(!word.test(src), `${f} mentions ${word}`);
    }
  }
});
