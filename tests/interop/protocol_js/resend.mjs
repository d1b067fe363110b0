// Events resent per reconnect, measured with LangGraph's own SSE transport for the
// streaming protocol (@langchain/langgraph-sdk's ProtocolSseTransportAdapter, what
// ThreadStream and useStream use).
// Usage: node resend.mjs <apiUrl> [plain|cursor] [assistant=chat] [runs=3] [channels]
//
// A thread gets `runs` runs (run.start through the transport); then one event stream
// (channels, comma-separated: lifecycle,input,values by default) reads them and is cut
// right after the last one's `completed`; the transport reconnects on its own; a fourth run is started and the
// stream is read until its `completed`. Through the fetch the transport is given, the
// script records what each connection sent (body, Last-Event-ID) and got; resent: the
// events a reconnection delivered that the stream had had already. "cursor" adds the
// Last-Event-ID of the stream's last event to the reconnect (the transport sends none).
import { Client, ProtocolSseTransportAdapter } from "@langchain/langgraph-sdk";

const [apiUrl, mode = "plain", assistant = "chat", runCount = "3", channelList] =
  process.argv.slice(2);
const CHANNELS = (channelList ?? "lifecycle,input,values").split(",");
const INPUT = { messages: [{ role: "user", content: "hi" }] };
const connections = [];
const had = new Set();
let lastSeq = null;
let cutAfter = null; // the event id after which the first connection is cut

function recordingFetch(url, init = {}) {
  if (!String(url).endsWith("/stream/events")) return fetch(url, init);
  const headers = new Headers(init.headers);
  const reconnect = connections.length > 0;
  if (mode === "cursor" && reconnect && lastSeq != null) {
    headers.set("Last-Event-ID", String(lastSeq));
  }
  const connection = {
    body: JSON.parse(String(init.body)),
    lastEventId: headers.get("last-event-id"),
    received: 0,
    resent: 0,
    cut: false,
  };
  connections.push(connection);
  return fetch(url, { ...init, headers }).then((response) => {
    if (!response.ok || !response.body) return response;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let buffer = "";
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) {
          controller.close();
          return;
        }
        // (the Agent Server ends its lines with CRLF, span-relay with LF)
        buffer += decoder.decode(value, { stream: true }).replaceAll("\r\n", "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end + 2);
          buffer = buffer.slice(end + 2);
          const data = frame.split("\n").find((line) => line.startsWith("data: "));
          controller.enqueue(encoder.encode(frame));
          if (!data) continue;
          const event = JSON.parse(data.slice("data: ".length));
          connection.received += 1;
          if (had.has(event.event_id)) connection.resent += 1;
          had.add(event.event_id);
          lastSeq = event.seq;
          if (!reconnect && cutAfter != null && cutAfter(event)) {
            connection.cut = true;
            await reader.cancel();
            controller.error(new TypeError("connection cut by the test"));
            return;
          }
        }
      },
      cancel() {
        return reader.cancel();
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  });
}

const client = new Client({ apiUrl });
const { thread_id: threadId } = await client.threads.create();
const transport = new ProtocolSseTransportAdapter({
  apiUrl,
  threadId,
  fetch: recordingFetch,
  reconnectDelayMs: () => 10,
  onConnected: ({ kind }) => {
    if (kind === "reconnected" && fourth == null) fourth = start();
  },
});
let commandId = 0;
async function start() {
  commandId += 1;
  const params = { assistant_id: assistant, input: INPUT };
  const answer = await transport.send({ id: commandId, method: "run.start", params });
  if (answer?.type !== "success") throw new Error(`run.start: ${JSON.stringify(answer)}`);
  return answer.result.run_id;
}
async function idle() {
  for (let i = 0; i < 600; i += 1) {
    const { status } = await client.threads.get(threadId);
    if (status === "idle") return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("the thread stayed busy");
}
const completed = (runId) => (event) =>
  event.method === "lifecycle" &&
  event.params?.data?.event === "completed" &&
  String(event.event_id).includes(runId);

let fourth = null; // the fourth run, started once the stream has reconnected
const runs = [];
for (let run = 1; run <= Number(runCount); run += 1) {
  runs.push(await start());
  await idle();
}
cutAfter = completed(runs.at(-1));
const stream = transport.openEventStream({ channels: CHANNELS });
await stream.ready;
let finished = false;
const timer = setTimeout(() => {
  console.error("no end in 60 s", JSON.stringify(connections));
  process.exit(2);
}, 60000);
for await (const event of stream.events) {
  if (fourth != null && completed(await fourth)(event)) {
    finished = true;
    break;
  }
}
clearTimeout(timer);
stream.close();
await transport.close();
const reconnects = connections.slice(1);
console.log(
  JSON.stringify({
    mode,
    finished,
    runs: [...runs, await fourth],
    connections,
    resent_per_reconnect: reconnects.map((c) => c.resent),
    sent_since: connections.some((c) => c.body.since != null),
    sent_last_event_id: connections.some((c) => c.lastEventId != null),
  }),
);
