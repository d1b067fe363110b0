// LangGraph's JavaScript client for the streaming protocol, as @langchain/react v1's
// useStream runs it: @langchain/langgraph-sdk's ThreadStream (client.threads.stream) over
// its SSE transport: run.start posted to /threads/{id}/commands, the events read from
// /threads/{id}/stream/events. Usage: node client.mjs <apiUrl> [plain|cursor]
//
// The thread gets two runs, then a third whose event streams are each cut once, right
// after the first `values` event that shows the third run's input (five messages); the
// transport reconnects on its own. Through the fetch the
// client is given, this script records what each connection sent (its body, a
// Last-Event-ID header) and received (event ids), and prints a JSON report: per
// reconnect, the events it delivered that the client had already had (resent).
// "cursor" adds to each reconnect the Last-Event-ID of the last event its stream had
// (what a client can do with the transport's fetch hook; the client itself sends none).
import { Client } from "@langchain/langgraph-sdk";

const [apiUrl, mode = "plain"] = process.argv.slice(2);
const CUT_AT_MESSAGES = 5; // a `values` event with this many messages: the third run's
const INPUT = { messages: [{ role: "user", content: "hi" }] };

const connections = [];
const streams = new Map(); // request body -> { ids: Set, lastSeq, cut }
let measured = false; // the third run: its streams are cut

function recordingFetch(url, init = {}) {
  const target = String(url);
  if (!target.endsWith("/stream/events")) return fetch(url, init);
  const key = String(init.body);
  const stream = streams.get(key) ?? { ids: new Set(), lastSeq: null, cut: false };
  streams.set(key, stream);
  const headers = new Headers(init.headers);
  const reconnect = stream.ids.size > 0;
  if (mode === "cursor" && reconnect && stream.lastSeq != null) {
    headers.set("Last-Event-ID", String(stream.lastSeq));
  }
  const connection = {
    body: JSON.parse(key),
    lastEventId: headers.get("last-event-id"),
    reconnect,
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
    const cutHere = measured && !stream.cut;
    let buffer = "";
    let seen = false;
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
          if (data) {
            const event = JSON.parse(data.slice("data: ".length));
            connection.received += 1;
            if (stream.ids.has(event.event_id)) connection.resent += 1;
            stream.ids.add(event.event_id);
            stream.lastSeq = event.seq;
            const messages = event.params?.data?.messages;
            if (event.method === "values" && (messages?.length ?? 0) >= CUT_AT_MESSAGES) {
              seen = true;
            }
          }
          controller.enqueue(encoder.encode(frame));
          if (cutHere && seen) {
            stream.cut = connection.cut = true;
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

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const client = new Client({ apiUrl });
const { thread_id: threadId } = await client.threads.create();
const outputs = [];
for (let run = 1; run <= 3; run += 1) {
  measured = run === 3;
  streams.clear(); // each ThreadStream's connections are its own
  const thread = client.threads.stream(threadId, {
    assistantId: "chat",
    transport: "sse",
    fetch: recordingFetch,
  });
  const started = await withTimeout(thread.run.start({ input: INPUT }), 30000, "run.start");
  const output = await withTimeout(thread.output, 60000, `run ${run}'s output`);
  const messages = output?.messages ?? [];
  outputs.push({
    run_id: started.run_id,
    messages: messages.length,
    answer: messages.at(-1)?.content ?? null,
    notes: output?.notes ?? null,
  });
  await thread.close();
}

const reconnects = connections.filter((c) => c.reconnect);
console.log(
  JSON.stringify({
    mode,
    thread_id: threadId,
    outputs,
    connections,
    reconnects: reconnects.length,
    resent_per_reconnect: reconnects.map((c) => c.resent),
    sent_since: connections.some((c) => c.body.since != null),
    sent_last_event_id: connections.some((c) => c.lastEventId != null),
  }),
);
