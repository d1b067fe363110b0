// LangGraph's own JavaScript client (@langchain/langgraph-sdk) against an Agent Server API,
// making the calls agent-chat-ui and useStream make: the assistant of a graph, a thread, a
// run streamed in several modes at once, the thread's state and history, an interrupt seen
// in `values` and answered with `command.resume`, a run waited for, a background run
// (made, joined, read, listed, its stream joined with `lastEventId`, a cancel), a stateless
// run.
//
//   node client.mjs URL
//
// Prints one JSON report of what the client got (tests/interop/test_langgraph_js.py
// asserts it). The graphs are tests/agent_server_graphs.py's: `chat` (a fake model that
// streams tokens, a `custom` payload from its first node) and `approval` (interrupt()).
import { Client } from "@langchain/langgraph-sdk";

const url = process.argv[2];
if (!url) {
  console.error("usage: node client.mjs URL");
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

// a background run, as useStream makes one and joins it again after a reload: made at
// once, joined, read, listed; its stream joined from the start and, after a cut behind
// its second frame, from that frame's id (the rest, nothing twice)
async function frames(generator) {
  const parts = [];
  for await (const part of generator) parts.push({ id: part.id, event: part.event, data: part.data });
  return parts;
}
const background = await client.threads.create();
const run = await client.runs.create(background.thread_id, "chat", {
  input: { messages: [{ type: "human", content: "later" }] },
  streamMode: ["values", "custom"],
  streamResumable: true,
});
report.bg_created = run;
report.bg_joined = await client.runs.join(background.thread_id, run.run_id);
report.bg_got = await client.runs.get(background.thread_id, run.run_id);
report.bg_listed = await client.runs.list(background.thread_id);
const joinOptions = { streamMode: ["values", "custom"] };
report.bg_whole = await frames(
  client.runs.joinStream(background.thread_id, run.run_id, { ...joinOptions, lastEventId: "-1" }),
);
report.bg_rest = await frames(
  client.runs.joinStream(background.thread_id, run.run_id, {
    ...joinOptions,
    lastEventId: report.bg_whole[1]?.id,
  }),
);
// a cancel of a run that ended: refused, the run as it ended
try {
  await client.runs.cancel(background.thread_id, run.run_id);
  report.bg_cancel_ended = 202;
} catch (error) {
  report.bg_cancel_ended = error.status ?? String(error);
  report.bg_cancel_text = String(error.message ?? error);
}
report.bg_after_cancel = await client.runs.get(background.thread_id, run.run_id);

// a stateless run: a thread made for it (deleted after it, LangGraph's default)
report.stateless = await client.runs.wait(null, "chat", {
  input: { messages: [{ type: "human", content: "once" }] },
});

process.stdout.write(JSON.stringify(report));
