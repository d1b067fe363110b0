// The real AG-UI client (@ag-ui/client 1.0 HttpAgent) runs one message against one AG-UI
// route and reports the conversation it holds afterwards (agent.messages) and the events it
// delivered. Driven by tests/interop/test_agui_answer.py; by hand:
//
//   node tests/interop/agui/answer.mjs http://127.0.0.1:8000/graphs/review/agui "Tell me." --out result.json
//
// Exits non-zero on any console.warn / console.error (the client warns when it drops an
// event or strips a field it does not know, and errors when validation fails) or a rejected run.

import { writeFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';

const problems = [];
for (const level of ['warn', 'error']) {
  const original = console[level].bind(console);
  console[level] = (...args) => {
    problems.push(`console.${level}: ${args.map((a) => (a instanceof Error ? a.stack || a.message : typeof a === 'string' ? a : JSON.stringify(a))).join(' ')}`);
    original(...args);
  };
}

const { HttpAgent } = await import('@ag-ui/client');

const args = process.argv.slice(2);
const outIndex = args.indexOf('--out');
const outPath = outIndex >= 0 ? args.splice(outIndex, 2)[1] : null;
const [url, message] = args;

const agent = new HttpAgent({ url, threadId: randomUUID() });
agent.addMessage({ id: randomUUID(), role: 'user', content: message });
const events = [];
let result = null;
try {
  await agent.runAgent({}, {
    onEvent: ({ event }) => { events.push(event); },
    onRunFinishedEvent: (p) => { result = p.result; },
  });
} catch (err) {
  problems.push(`the run was rejected: ${err && err.stack ? err.stack : err}`);
}
const report = { messages: agent.messages, events, result, problems };
if (outPath) writeFileSync(outPath, JSON.stringify(report, null, 2));
console.log(JSON.stringify(agent.messages.map((m) => [m.role, m.content])));
process.exit(problems.length ? 1 : 0);
