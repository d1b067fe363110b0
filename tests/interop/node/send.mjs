// A Node.js "agent" of a made-up graph (fetch -> summarize) that sends its spans to
// span-relay's OTLP receiver, following the relay's span conventions (docs/events.md):
// a run root carrying relay.turn.id and the topology, node spans carrying
// relay.node.name, a model call and a tool call, and start markers so that the relay
// shows each node the moment it starts.
//
//   PROTOCOL=grpc|http-proto|http-json ENDPOINT=... TURN_ID=... node send.mjs
//
// Each node's inner span lasts NODE_SLEEP_MS (default 300); with HOLD=stdin it lasts
// instead until a line arrives on stdin (one line per node, fetch then summarize): the
// test holds each node until its reader has seen node_started, so it knows the event
// came live from the start marker without timing anything. stdin closed before the line:
// exit 3.
//
// Exits 0 once the provider has shut down. Exporters resolve shutdown() even when
// delivery failed, so the caller checks what the relay received, not this exit code.

import { createInterface } from "node:readline";

import { context, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as GrpcExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { NodeTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-node";

const protocol = process.env.PROTOCOL ?? "http-proto";
const endpoint = process.env.ENDPOINT;
const turnId = process.env.TURN_ID;
const threadId = process.env.THREAD_ID ?? "node-thread";
const markers = (process.env.MARKERS ?? "1") === "1";
const sleepMs = Number(process.env.NODE_SLEEP_MS ?? "300");
const headers = process.env.TOKEN ? { authorization: `Bearer ${process.env.TOKEN}` } : {};

if (!endpoint || !turnId) {
  console.error("ENDPOINT and TURN_ID are required");
  process.exit(2);
}

function exporter() {
  if (protocol === "grpc") return new GrpcExporter({ url: endpoint, metadata: undefined });
  if (protocol === "http-json") return new JsonExporter({ url: endpoint, headers });
  return new ProtoExporter({ url: endpoint, headers });
}

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "node-agent" }),
  // every span is exported the moment it ends: the start markers reach the relay at once
  spanProcessors: [new SimpleSpanProcessor(exporter())],
});
const tracer = provider.getTracer("node-agent");
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// HOLD=stdin: the node's work ends when the test sends a line, not after a sleep.
const stdin = process.env.HOLD === "stdin" ? createInterface({ input: process.stdin }) : null;
const stdinLines = stdin?.[Symbol.asyncIterator]();
async function work() {
  if (!stdinLines) return sleep(sleepMs);
  const { done } = await stdinLines.next();
  if (done) {
    console.error("stdin closed before the node was released");
    process.exit(3);
  }
}

const topology = {
  nodes: [
    { id: "__start__", label: "__start__" },
    { id: "fetch", label: "fetch" },
    { id: "summarize", label: "summarize" },
    { id: "__end__", label: "__end__" },
  ],
  edges: [
    { source: "__start__", target: "fetch", conditional: false },
    { source: "fetch", target: "summarize", conditional: false },
    { source: "summarize", target: "__end__", conditional: false },
  ],
};

// The start marker of `span` (docs/events.md, "Start markers"): a zero-duration child
// named "relay.start <name>" carrying the span's id, its parent's id and its start
// attributes as one JSON object.
function startMarker(span, name, attributes, parentSpanId, startTime) {
  const attrs = {
    "relay.start_of": span.spanContext().spanId,
    "relay.start.attributes": JSON.stringify(attributes),
  };
  if (parentSpanId) attrs["relay.start.parent"] = parentSpanId;
  const marker = tracer.startSpan(`relay.start ${name}`, { attributes: attrs, startTime },
    trace.setSpan(context.active(), span));
  marker.end(startTime);
}

function start(name, attributes, parent) {
  const startTime = new Date();
  const ctx = parent ? trace.setSpan(context.active(), parent) : context.active();
  const span = tracer.startSpan(name, { attributes, startTime }, ctx);
  if (markers) startMarker(span, name, attributes, parent?.spanContext().spanId, startTime);
  return span;
}

async function node(root, name, step, body) {
  const span = start(`node ${name}`, {
    "relay.node.name": name, "relay.node.step": step, "relay.node.task_id": `${name}-${step}`,
  }, root);
  await body(span);
  span.setAttribute("relay.node.outcome", "ok");
  span.end();
  return { name, status: "ok" };
}

const root = start("invoke_agent node_agent", {
  "gen_ai.operation.name": "invoke_agent",
  "gen_ai.agent.name": "node_agent",
  "gen_ai.conversation.id": threadId,
  "relay.turn.id": turnId,
  "relay.run.kind": "chat",
  "relay.graph.id": "node_graph",
  "relay.graph.topology": JSON.stringify(topology),
  "relay.turn.message": "What happened to my parcel?",
});

const nodes = [];
nodes.push(await node(root, "fetch", 1, async (span) => {
  const toolSpan = tracer.startSpan("execute_tool track_parcel", {
    attributes: {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "track_parcel",
      "gen_ai.tool.call.id": "call-7",
    },
  }, trace.setSpan(context.active(), span));
  await work();
  toolSpan.end();
}));
nodes.push(await node(root, "summarize", 2, async (span) => {
  const chat = tracer.startSpan("chat tiny-js", {
    attributes: { "gen_ai.operation.name": "chat", "gen_ai.request.model": "tiny-js" },
  }, trace.setSpan(context.active(), span));
  await work();
  chat.setAttribute("gen_ai.usage.input_tokens", 21);
  chat.setAttribute("gen_ai.usage.output_tokens", 8);
  chat.end();
}));

const response = {
  thread_id: threadId, turn_id: turnId, trace_id: root.spanContext().traceId,
  status: "answered", answer: "Your parcel is on its way.", citations: [], interrupts: [],
  nodes: nodes.map((n) => ({ ...n, duration_ms: 0 })),
};
root.setAttribute("relay.turn.response", JSON.stringify(response));
root.setAttribute("relay.turn.outcome", "answered");
root.end();

stdin?.close(); // lets go of stdin: nothing keeps the process alive
await provider.shutdown();
console.log(JSON.stringify({ sent: true, protocol, turn_id: turnId,
  trace_id: root.spanContext().traceId }));
