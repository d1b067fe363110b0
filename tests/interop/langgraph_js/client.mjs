// LangGraph's own JavaScript client (@langchain/langgraph-sdk) against an Agent Server API,
// making the calls agent-chat-ui and useStream make: the assistant of a graph, a thread, a
// run streamed in several modes at once, the thread's state and history, an interrupt seen
// in `values` and answered with `command.resume`, a run waited for, a run stream cut and
// joined again with the last event id, a background run cancelled.
//
//   node client.mjs URL GATES
//
// GATES: a folder the `gated` graph's second node waits in for a file this script writes
// (after its cut), on either server.
// Prints one JSON report of what the client got (tests/interop/test_langgraph_js.py
// asserts it). The graphs are tests/agent_server_graphs.py's: `chat` (a fake model that
// streams tokens, a `custom` payload from its first node), `approval` (interrupt()) and
// `gated`.
import { writeFileSync } from "node:fs";
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url || !process.argv[3]) {
  console.error("usage: node client.mjs URL GATES");
  process.exit(2);
}
const client = new Client({ apiUrl: url });

async function collect(generator) {
  const parts = [];
  for await (const part of generator) parts.push({ event: part.event, data: part.data });
  return parts;
}

const report = {};

// agent-chat-ui: the assistant of the graph it was pointed at, by the graph's name
report.assistants = await client.assistants.search({ graphId: "chat" });
// (by the id the search gave: the Agent Server takes no graph name here, 422)
report.assistant = await client.assistants.get(report.assistants[0].assistant_id);

// useStream: a thread, then one run streamed in the modes it asks for
const thread = await client.threads.create();
report.thread = thread;
report.chat = await collect(
  client.runs.stream(thread.thread_id, "chat", {
    input: { messages: [{ type: "human", content: "hi" }] },
    streamMode: ["values", "messages-tuple", "updates", "custom"],
  }),
);
report.state = await client.threads.getState(thread.thread_id);
report.history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
report.thread_after = await client.threads.get(thread.thread_id);

// an interrupt: seen in values as __interrupt__, answered with command.resume
const asked = await client.threads.create();
report.asked = await collect(
  client.runs.stream(asked.thread_id, "approval", {
    input: { question: "Ship it?" },
    streamMode: "values",
  }),
);
report.asked_state = await client.threads.getState(asked.thread_id);
report.answered = await collect(
  client.runs.stream(asked.thread_id, "approval", {
    command: { resume: "yes" },
    streamMode: "values",
  }),
);

// a run waited for
const waited = await client.threads.create();
report.waited_thread = waited.thread_id;
report.waited = await client.runs.wait(waited.thread_id, "chat", {
  input: { messages: [{ type: "human", content: "again" }] },
});

// agent-chat-ui's thread list: the threads of the graph, newest first, by the metadata a
// run writes on its thread; and a thread created with metadata of its own
report.created = await client.threads.create({ metadata: { topic: "refunds" } });
report.listed = await client.threads.search({
  metadata: { graph_id: "chat" },
  limit: 10,
  sortBy: "updated_at",
  sortOrder: "desc",
});
report.by_topic = await client.threads.search({ metadata: { topic: "refunds" } });

// useStream's reconnect: a resumable run stream cut after the third custom part (the run
// goes on: on_disconnect continue), joined again from the last id the client had
// (Last-Event-ID), then the run read, joined and listed
const gates = process.argv[3];
const gatedThread = await client.threads.create();
const firstPart = [];
let lastId;
let runId;
for await (const part of client.runs.stream(gatedThread.thread_id, "gated", {
  input: { gate: `${gates}/first` },
  streamMode: ["custom", "updates"],
  streamResumable: true,
  onDisconnect: "continue",
})) {
  if (part.event === "metadata") runId = part.data.run_id;
  firstPart.push({ event: part.event, data: part.data, id: part.id });
  lastId = part.id;
  if (firstPart.filter((p) => p.event === "custom").length === 3) break;
}
report.first_part = firstPart;
report.running_read = await client.runs.get(gatedThread.thread_id, runId);
writeFileSync(`${gates}/first`, "go");
report.rest = await collect(
  client.runs.joinStream(gatedThread.thread_id, runId, {
    streamMode: ["custom", "updates"],
    lastEventId: lastId,
  }),
);
report.joined = await client.runs.join(gatedThread.thread_id, runId);
report.ended_read = await client.runs.get(gatedThread.thread_id, runId);
report.listed_runs = await client.runs.list(gatedThread.thread_id);

// a background run, read, then cancelled (its gate never opens)
const cancelThread = await client.threads.create();
const doomed = await client.runs.create(cancelThread.thread_id, "gated", {
  input: { gate: `${gates}/never` },
});
report.started = doomed;
await client.runs.cancel(cancelThread.thread_id, doomed.run_id, true);
report.cancelled_read = await client.runs.get(cancelThread.thread_id, doomed.run_id);
// a cancel of a run that ended: nothing to cancel, a 404 (LangGraph's)
try {
  await client.runs.cancel(cancelThread.thread_id, doomed.run_id);
  report.cancel_ended = 202;
} catch (error) {
  report.cancel_ended = error.status ?? String(error);
}

// a stateless run: a thread made for it (deleted after it, LangGraph's default)
report.stateless = await client.runs.wait(null, "chat", {
  input: { messages: [{ type: "human", content: "once" }] },
});

process.stdout.write(JSON.stringify(report));
