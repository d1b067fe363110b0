// A Node.js agent whose exports race: each span is exported on its own the moment it ends
// (SimpleSpanProcessor, one request per span, sent concurrently), so the relay may get a
// run's root before its last node, and nodes out of order. It follows the relay's span
// conventions (relay.turn.id on the root, relay.node.name on nodes) but sends no
// topology: the relay discovers the graph as it runs. No start markers.
//
//   PROTOCOL=grpc|http-proto PROCESSOR=simple|batch ENDPOINT=... TURN_IDS=a,b,c \
//   MODE=answer|pause|resume node race.mjs
//
// MODE=answer: plan -> search -> answer, answered. MODE=pause: plan -> search -> approve,
// which pauses on an interrupt. MODE=resume: approve -> answer, the resume of a paused
// turn (a new trace, the same relay.turn.id, relay.run.kind=resume). One run per id in
// TURN_IDS, one after another. Prints one JSON line per run: its turn id and trace id.
// Within a run the exports race; the runs follow each other.

import { context, trace } from "@opentelemetry/api";
import { OTLPTraceExporter as GrpcExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { OTLPTraceExporter as ProtoExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor, NodeTracerProvider, SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-node";

const protocol = process.env.PROTOCOL ?? "grpc";
const endpoint = process.env.ENDPOINT;
const turnIds = (process.env.TURN_IDS ?? "").split(",").filter(Boolean);
const mode = process.env.MODE ?? "answer";
const threadId = process.env.THREAD_ID ?? "race-thread";

if (!endpoint || turnIds.length === 0) {
  console.error("ENDPOINT and TURN_IDS are required");
  process.exit(2);
}

const exporter = protocol === "grpc" ? new GrpcExporter({ url: endpoint })
  : new ProtoExporter({ url: endpoint });
const processor = process.env.PROCESSOR === "batch"
  ? new BatchSpanProcessor(exporter, { scheduledDelayMillis: 50 })
  : new SimpleSpanProcessor(exporter);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "race-agent" }),
  spanProcessors: [processor],
});
const tracer = provider.getTracer("race-agent");
const tick = () => new Promise((resolve) => setImmediate(resolve));

const NODES = {
  answer: ["plan", "search", "answer"],
  pause: ["plan", "search", "approve"],
  resume: ["approve", "answer"],
};

async function run(turnId) {
  const root = tracer.startSpan("invoke_agent race_agent", {
    attributes: {
      "gen_ai.operation.name": "invoke_agent",
      "gen_ai.agent.name": "race_agent",
      "gen_ai.conversation.id": threadId,
      "relay.turn.id": turnId,
      "relay.run.kind": mode === "resume" ? "resume" : "chat",
      "relay.graph.id": "race_graph",
      "relay.turn.message": "Find me a flight",
    },
  });
  const ctx = trace.setSpan(context.active(), root);
  const nodes = NODES[mode];
  const done = [];
  for (const [i, name] of nodes.entries()) {
    const span = tracer.startSpan(`node ${name}`, {
      attributes: { "relay.node.name": name, "relay.node.step": i + 1,
        "relay.node.task_id": `${name}-${turnId}` },
    }, ctx);
    await tick();
    const paused = mode === "pause" && name === "approve";
    span.setAttribute("relay.node.outcome", paused ? "paused" : "ok");
    span.end();
    done.push({ name, status: paused ? "paused" : "ok", duration_ms: 0 });
  }
  if (mode === "pause") {
    root.setAttribute("relay.turn.outcome", "paused");
    root.setAttribute("relay.turn.interrupts",
      JSON.stringify([{ id: `int-${turnId}`, value: { question: "Book it?" } }]));
  } else {
    root.setAttribute("relay.turn.outcome", "answered");
    root.setAttribute("relay.turn.response", JSON.stringify({
      thread_id: threadId, turn_id: turnId, trace_id: root.spanContext().traceId,
      status: "answered", answer: "Booked: the 9:40 to Lisbon.", citations: [],
      interrupts: [], nodes: done,
    }));
  }
  root.end();
  console.log(JSON.stringify({ turn_id: turnId, trace_id: root.spanContext().traceId }));
}

// turns in a row: the next begins once the last one's exports are through (the
// exporters refuse exports past their concurrencyLimit, 30 by default)
for (const turnId of turnIds) {
  await run(turnId);
  await provider.forceFlush();
}
await provider.shutdown();
