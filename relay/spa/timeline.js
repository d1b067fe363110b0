// The turn's spans as a waterfall: one section per run (the chat run, then each resume
// run, and each run that took the turn up again after its server stopped), node spans with
// their child spans nested under them, offsets and widths in ms relative to the run's start
// so that durations are to scale.

import { formatMs } from './format.js';

const OPS = new Set(['chat', 'retrieval', 'apply_guardrail', 'execute_tool']);

export function operationClass(op) {
  return OPS.has(op) ? `op-${op}` : 'op-other';
}

export const OPERATION_TEXT = {
  chat: 'model',
  retrieval: 'retrieval',
  apply_guardrail: 'guardrail',
  execute_tool: 'tool',
  other: 'other',
};

function finite(x) {
  return typeof x === 'number' && Number.isFinite(x);
}

/**
 * Build the waterfall from a TurnModel. Returns
 * {approximate, sections:[{index, kind, traceId, totalMs, waitBeforeMs, cut, recovery, recoveryIndex,
 *  rows:[{type:'node'|'span', name, node, operation, depth, startMs, durationMs, state, cutMs}]}]}.
 * `waitBeforeMs` of a resumed run is the human wait before it; of a recovered run (kind 'recover'),
 * the time from where the cut run was last seen to the run that took the turn up. `cut`: the run
 * was cut by its server's stop; a node row it cut ('cut') has `cutMs`, from its start to there.
 * `recoveryIndex`: the how-manieth recovered run (1, 2, ...), for a recovered run.
 */
export function buildTimeline(model) {
  const sections = [];
  const approximate = !!model.degraded;
  let recoveries = 0;
  model.runs.forEach((run, index) => {
    const recovered = run.kind === 'recover';
    if (recovered) recoveries += 1;
    const about = { cut: run.terminal === 'recovered', recovery: run.recovery || null, recoveryIndex: recovered ? (run.recovery && run.recovery.attempt) || recoveries : null };
    const insts = model.instances.filter((i) => i.run === index);
    if (!insts.length && run.startTs === null) return;
    const rows = [];
    if (approximate) {
      let t = 0;
      for (const i of insts) {
        const d = finite(i.durationMs) ? i.durationMs : 0;
        rows.push({ type: 'node', name: i.node, node: i.node, operation: 'node', depth: 0, startMs: t, durationMs: d, state: i.state });
        t += d;
      }
      sections.push({ index, kind: run.kind, traceId: run.traceId, totalMs: t, waitBeforeMs: null, ...about, rows });
      return;
    }
    const starts = insts.map((i) => i.startTs).filter(finite);
    const t0 = finite(run.startTs) ? run.startTs : starts.length ? Math.min(...starts) : 0;
    let tEnd = finite(run.endTs) ? run.endTs : t0;
    const sorted = insts.slice().sort((a, b) => (a.startTs ?? Infinity) - (b.startTs ?? Infinity));
    // Instances of one node in one run (parallel tasks, or a loop) are numbered, not merged.
    // A subgraph's inner node is a row of its own, indented under its parent: its span is
    // left out of the parent's children (with what it holds), so nothing shows twice.
    const keyOf = (i) => JSON.stringify([...(i.namespace || []), i.node]);
    const nodeSpans = new Set(insts.map((i) => i.spanId).filter(Boolean));
    const total = new Map();
    for (const i of sorted) total.set(keyOf(i), (total.get(keyOf(i)) || 0) + 1);
    const seen = new Map();
    for (const i of sorted) {
      const key = keyOf(i);
      const nsDepth = Array.isArray(i.namespace) ? i.namespace.length : 0;
      seen.set(key, (seen.get(key) || 0) + 1);
      const name = total.get(key) > 1 ? `${i.node} #${seen.get(key)}` : i.node;
      const start = finite(i.startTs) ? i.startTs : t0;
      const dur = finite(i.durationMs) ? i.durationMs : null;
      if (dur !== null) tEnd = Math.max(tEnd, start + dur);
      else tEnd = Math.max(tEnd, start);
      rows.push({
        type: 'node',
        name,
        node: i.node,
        operation: 'node',
        depth: nsDepth,
        namespace: Array.isArray(i.namespace) ? i.namespace : [],
        startMs: start - t0,
        durationMs: dur,
        state: i.state,
      });
      for (const c of nestChildren(i.children, i.spanId, nodeSpans)) {
        const cs = finite(c.span.start_ts) ? c.span.start_ts : start;
        const cd = finite(c.span.duration_ms) ? c.span.duration_ms : null;
        if (cd !== null) tEnd = Math.max(tEnd, cs + cd);
        rows.push({
          type: 'span',
          name: String(c.span.name || c.span.operation || 'span'),
          node: i.node,
          operation: OPS.has(c.span.operation) ? c.span.operation : 'other',
          depth: c.depth + nsDepth,
          startMs: cs - t0,
          durationMs: cd,
          state: c.span.status === 'error' ? 'error' : 'ok',
        });
      }
    }
    // A running node has no duration yet: draw it up to "now" (the latest time seen). A node its
    // server's stop cut has none either: drawn up to where its run was last seen working.
    for (const r of rows) {
      if (r.durationMs !== null || r.type !== 'node') continue;
      if (r.state === 'running') r.open = true;
      else if (r.state === 'cut') r.cutMs = Math.max(0, tEnd - t0 - r.startMs);
    }
    let waitBeforeMs = null;
    if (index > 0) {
      const prev = model.runs[index - 1];
      if (finite(prev.endTs) && finite(run.startTs)) waitBeforeMs = Math.max(0, run.startTs - prev.endTs);
      if (!recovered && index === model.runs.length - 1 && finite(model.humanWaitMs)) waitBeforeMs = model.humanWaitMs;
    }
    sections.push({ index, kind: run.kind, traceId: run.traceId, totalMs: Math.max(0, tEnd - t0), waitBeforeMs, ...about, rows });
  });
  return { approximate, sections };
}

/** A section's title: "Run 1", "Resumed run 2", "Recovered run 3 (recovery 1)". */
export function runTitle(sec) {
  if (sec.kind === 'resume') return `Resumed run ${sec.index + 1}`;
  if (sec.kind === 'recover') return `Recovered run ${sec.index + 1}${sec.recoveryIndex ? ` (recovery ${sec.recoveryIndex})` : ''}`;
  return `Run ${sec.index + 1}`;
}

/** The words of the gap before a section (its `waitBeforeMs`): a human wait, or a server that stopped. */
export function waitText(sec) {
  const ms = formatMs(sec.waitBeforeMs);
  if (sec.kind !== 'recover') return `Waited ${ms} for a human decision (not to scale)`;
  const why = sec.recovery && sec.recovery.reason === 'handed_over' ? 'was stopped and handed the turn over' : 'stopped responding';
  const from = sec.recovery && sec.recovery.resumedFrom ? ' from its last checkpoint' : '';
  return `The server running the turn ${why}; another took it up again${from} ${ms} later (not to scale)`;
}

/** Children (flat, start order) nested by parent_span_id under the node span; the spans in
 * `skip` (other node instances: a subgraph's inner nodes) are left out with their subtrees. */
export function nestChildren(children, rootSpanId, skip = null) {
  const list = Array.isArray(children) ? children.filter((c) => c && typeof c === 'object') : [];
  const ids = new Set(list.map((c) => c.span_id));
  const kids = new Map();
  const top = [];
  for (const c of list) {
    if (c.parent_span_id && c.parent_span_id !== rootSpanId && ids.has(c.parent_span_id)) {
      if (!kids.has(c.parent_span_id)) kids.set(c.parent_span_id, []);
      kids.get(c.parent_span_id).push(c);
    } else top.push(c);
  }
  const byStart = (a, b) => (a.start_ts ?? 0) - (b.start_ts ?? 0);
  const out = [];
  const walk = (arr, depth) => {
    for (const c of arr.slice().sort(byStart)) {
      if (skip && c.span_id && c.span_id !== rootSpanId && skip.has(c.span_id)) continue;
      out.push({ span: c, depth });
      if (c.span_id && kids.has(c.span_id)) walk(kids.get(c.span_id), depth + 1);
    }
  };
  walk(top, 1);
  return out;
}
