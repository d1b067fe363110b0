// The state of one turn, built from the event stream (or, in degraded mode, from a
// ChatResponse). Pure data, no DOM: the renderer reads it, the Node tests check it.

import { progressOf } from './progress.js';

// retrying: an attempt that failed and that the node's RetryPolicy runs again (no failure);
// cut: it was running when its server stopped, and the turn was taken up again from the
// thread's last checkpoint (turn_recovered), where that step runs again
export const NODE_STATES = ['idle', 'running', 'ok', 'error', 'paused', 'skipped', 'cancelled', 'retrying', 'cut'];
const ENDED_STATES = ['ok', 'error', 'paused', 'cancelled', 'retrying'];
export const OUTCOMES = ['answered', 'refused', 'paused', 'error', 'cancelled', 'interrupted'];
const TERMINAL_TYPES = new Set(['turn_completed', 'paused', 'error']);
// the error codes of a turn whose server stopped and that was not taken up again: what ran is cut
const SERVER_STOPPED = new Set(['interrupted', 'recovery_exhausted']);

export function isTerminalEvent(ev) {
  return !!ev && TERMINAL_TYPES.has(ev.type);
}

function num(x) {
  return typeof x === 'number' && Number.isFinite(x) ? x : null;
}

/** A node event's namespace: the enclosing node names, outermost first ([] at the top). */
export function namespaceOf(ev) {
  return ev && Array.isArray(ev.namespace) ? ev.namespace.map(String) : [];
}

function sameNamespace(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class TurnModel {
  constructor() {
    this.reset();
  }

  reset() {
    this.turnId = null;
    this.threadId = null;
    this.topology = null; // {graph_id, nodes, edges, discovered}
    this.discovered = false; // the topology is what the spans showed so far (no topology was sent)
    this.instances = []; // every node execution, in start order
    this.bySpan = new Map(); // span_id -> instance
    this.runs = []; // {kind, traceId, startTs, endTs, terminal, recovery}: terminal 'recovered' for a cut run
    this.outcome = null; // null while nothing ran; 'running' while a run is live; then an OUTCOMES value
    this.terminal = false; // the turn (not only the run) has ended
    this.response = null; // the last ChatResponse
    this.interrupts = [];
    this.resumeHint = null;
    this.resumeMessage = null; // the paused event's words on where to resume, when it gave some
    this.error = null; // {code, message, node, retryable}
    this.humanWaitMs = null;
    this.tools = new Map(); // span_id -> {tool, label, node, call_id, running, status, duration_ms, ts}
    this.degraded = false;
    this.lastSeq = 0;
    this.anomalies = []; // contract violations noticed (seq order...), for the console
    this.texts = new Map(); // message_id -> {id, text, deltas, node, spanId, run}: text_delta, as written
    this.lastMessageId = null; // the message the latest text_delta wrote to
    this.lastTs = null; // the latest event time seen: where a cut run was last seen working
  }

  /**
   * The text being written in the current run (the last message that received a text_delta),
   * or null when this run has written none yet. For an answered turn its final text equals
   * turn_completed's answer; the renderer replaces it with that answer when they differ.
   */
  streamedMessage() {
    const m = this.lastMessageId !== null ? this.texts.get(this.lastMessageId) : null;
    return m && m.run === this.runs.length - 1 ? m : null;
  }

  /** Which tools are running now, in start order. */
  runningTools() {
    return [...this.tools.values()].filter((t) => t.running);
  }

  currentRun() {
    return this.runs[this.runs.length - 1] || null;
  }

  _startRun(kind, traceId, ts) {
    // recovery: {attempt, reason, resumedFrom} of a run that took the turn up again (turn_recovered)
    const run = { kind, traceId: traceId || null, startTs: num(ts), endTs: null, terminal: null, recovery: null };
    this.runs.push(run);
    return run;
  }

  /**
   * Apply one event (a parsed JSON object). Returns true when it changed something.
   * Unknown types and fields are ignored, per the contract.
   */
  apply(ev) {
    if (!ev || typeof ev !== 'object' || typeof ev.type !== 'string') return false;
    if (ev.turn_id && this.turnId && ev.turn_id !== this.turnId && ev.type === 'graph_topology') {
      // A different turn: start afresh.
      this.reset();
    }
    if (typeof ev.seq === 'number') {
      if (ev.seq <= this.lastSeq) this.anomalies.push(`seq ${ev.seq} after ${this.lastSeq}`);
      this.lastSeq = Math.max(this.lastSeq, ev.seq);
    }
    if (ev.turn_id) this.turnId = ev.turn_id;
    if (ev.thread_id) this.threadId = ev.thread_id;
    const changed = this._dispatch(ev);
    const ts = num(ev.ts);
    if (ts !== null) this.lastTs = this.lastTs === null ? ts : Math.max(this.lastTs, ts);
    return changed;
  }

  _dispatch(ev) {
    switch (ev.type) {
      case 'graph_topology':
        return this._topology(ev);
      case 'graph_discovered':
        return this._discoveredGraph(ev);
      case 'node_started':
        return this._nodeStarted(ev);
      case 'node_completed':
        return this._nodeCompleted(ev);
      case 'tool_started':
        return this._toolStarted(ev);
      case 'tool_completed':
        return this._toolCompleted(ev);
      case 'paused':
        return this._paused(ev);
      case 'error':
        return this._error(ev);
      case 'turn_completed':
        return this._completed(ev);
      case 'text_delta':
        return this._textDelta(ev);
      case 'custom':
        return this._custom(ev);
      case 'turn_recovered':
        return this._recovered(ev);
      default:
        return false;
    }
  }

  _ensureRun(ev) {
    const run = this.currentRun();
    if (run && run.terminal === null) return run;
    return this._startRun(ev.run_kind || (this.runs.length ? 'resume' : 'chat'), ev.trace_id, ev.ts);
  }

  _topology(ev) {
    // Merge: a resume run's topology must not drop what the first run drew.
    const nodes = Array.isArray(ev.nodes) ? ev.nodes : [];
    const edges = Array.isArray(ev.edges) ? ev.edges : [];
    if (!this.topology) {
      this.topology = { graph_id: ev.graph_id ?? null, nodes: nodes.slice(), edges: edges.slice() };
    } else {
      const ids = new Set(this.topology.nodes.map((n) => n.id));
      for (const n of nodes) if (!ids.has(n.id)) this.topology.nodes.push(n);
      const keys = new Set(this.topology.edges.map((e) => `${e.source}\u0000${e.target}`));
      for (const e of edges) if (!keys.has(`${e.source}\u0000${e.target}`)) this.topology.edges.push(e);
      if (ev.graph_id != null) this.topology.graph_id = ev.graph_id;
    }
    if (ev.discovered === true) this.discovered = true;
    this.topology.discovered = this.discovered;
    const current = this.currentRun();
    if (!current || current.terminal !== null || current.traceId !== (ev.trace_id || null)) {
      // a recovered run whose turn_recovered this model did not see still cuts the run before it
      if (ev.run_kind === 'recover') this._cutRun();
      this._startRun(ev.run_kind || (this.runs.length ? 'resume' : 'chat'), ev.trace_id, ev.ts);
    }
    this.outcome = 'running';
    this.terminal = false;
    this.error = null;
    this.interrupts = [];
    return true;
  }

  /**
   * graph_discovered: the whole graph the spans have shown so far (an agent that sends no
   * topology). It replaces the drawn topology; node states live in the instances, so every
   * node keeps the state it has. A node the new graph lacks but that ran is still drawn
   * (subgraphs.js adds nodes seen in events).
   */
  _discoveredGraph(ev) {
    const nodes = Array.isArray(ev.nodes) ? ev.nodes.filter((n) => n && typeof n === 'object' && n.id !== undefined && n.id !== null) : [];
    const edges = Array.isArray(ev.edges) ? ev.edges.filter((e) => e && typeof e === 'object' && e.source != null && e.target != null) : [];
    const graphId = ev.graph_id ?? (this.topology ? this.topology.graph_id : null);
    this.discovered = true;
    this.topology = { graph_id: graphId, nodes: nodes.slice(), edges: edges.slice(), discovered: true };
    return true;
  }

  _nodeStarted(ev) {
    const run = this._ensureRun(ev);
    if (this.outcome === null || this.outcome === 'paused') this.outcome = 'running';
    const key = ev.span_id || `${ev.node}#${this.instances.length}`;
    if (this.bySpan.has(key)) return false;
    const inst = {
      node: String(ev.node),
      namespace: namespaceOf(ev),
      spanId: ev.span_id || null,
      parentSpanId: ev.parent_span_id || null,
      step: ev.step ?? null,
      taskId: ev.task_id ?? null,
      run: this.runs.indexOf(run),
      state: 'running',
      startTs: num(ev.ts),
      endTs: null,
      durationMs: null,
      summary: null,
      children: [],
      progress: null, // {fraction, text}: the latest custom event's (progress.js)
    };
    this.instances.push(inst);
    this.bySpan.set(key, inst);
    return true;
  }

  _nodeCompleted(ev) {
    let inst = ev.span_id ? this.bySpan.get(ev.span_id) : null;
    if (!inst) {
      // No start seen (a late attach, or a mapping whose start arrives late): find a running one.
      const ns = namespaceOf(ev);
      inst = this.instances.find((i) => i.node === ev.node && i.state === 'running' && sameNamespace(i.namespace, ns));
    }
    if (!inst) {
      this._nodeStarted({ ...ev, ts: num(ev.ts) !== null && num(ev.duration_ms) !== null ? ev.ts - ev.duration_ms : ev.ts });
      inst = this.instances[this.instances.length - 1];
    }
    const status = String(ev.status || 'ok');
    inst.state = ENDED_STATES.includes(status) ? status : 'ok';
    inst.endTs = num(ev.ts);
    inst.durationMs = num(ev.duration_ms);
    if (inst.durationMs === null && inst.startTs !== null && inst.endTs !== null) inst.durationMs = inst.endTs - inst.startTs;
    if (inst.startTs === null && inst.endTs !== null && inst.durationMs !== null) inst.startTs = inst.endTs - inst.durationMs;
    inst.summary = ev.summary && typeof ev.summary === 'object' ? ev.summary : null;
    inst.children = Array.isArray(ev.children) ? ev.children : [];
    return true;
  }

  _toolStarted(ev) {
    const key = ev.span_id || `${ev.tool}#${this.tools.size}`;
    this.tools.set(key, {
      tool: String(ev.tool || 'tool'),
      label: typeof ev.label === 'string' && ev.label ? ev.label : null,
      node: ev.node ?? null,
      callId: ev.call_id ?? null,
      running: true,
      status: null,
      durationMs: null,
      ts: num(ev.ts),
    });
    return true;
  }

  _toolCompleted(ev) {
    let t = ev.span_id ? this.tools.get(ev.span_id) : null;
    if (!t) t = [...this.tools.values()].find((x) => x.running && x.tool === ev.tool);
    if (!t) return false;
    t.running = false;
    t.status = ev.status || 'ok';
    t.durationMs = num(ev.duration_ms);
    return true;
  }

  _textDelta(ev) {
    if (typeof ev.delta !== 'string') return false;
    const run = this._ensureRun(ev);
    if (this.outcome === null || this.outcome === 'paused') this.outcome = 'running';
    const id = String(ev.message_id || `msg_${ev.span_id || this.runs.length}`);
    let m = this.texts.get(id);
    if (!m) {
      m = { id, text: '', deltas: 0, node: ev.node ?? null, spanId: ev.span_id ?? null, run: this.runs.indexOf(run) };
      this.texts.set(id, m);
    }
    m.text += ev.delta;
    m.deltas += 1;
    this.lastMessageId = id;
    return true;
  }

  /** custom: a payload the node sent; its instance keeps the latest as `progress`. */
  _custom(ev) {
    const ns = namespaceOf(ev);
    const mine = this.instances.filter((i) => i.node === ev.node && sameNamespace(i.namespace, ns));
    const inst = (ev.span_id && this.bySpan.get(ev.span_id)) || mine.filter((i) => i.state === 'running').pop() || mine.pop();
    if (!inst) return false;
    inst.progress = progressOf(ev.data);
    return true;
  }

  /**
   * turn_recovered: the server running the turn stopped, and another took the turn up again
   * from the thread's last checkpoint. The cut run ends 'recovered' (no failure: the turn goes
   * on), its unfinished node instances are 'cut' (they never completed; what completed stays),
   * and the recovered run starts here; its graph_topology (run_kind 'recover', the same trace)
   * follows.
   */
  _recovered(ev) {
    const current = this.currentRun();
    if (current && current.kind === 'recover' && current.terminal === null && current.traceId === (ev.trace_id || null)) {
      return false; // this recovery's run has started already
    }
    this._cutRun();
    const attempt = Number.isInteger(ev.attempt) && ev.attempt > 0 ? ev.attempt : this.runs.filter((r) => r.kind === 'recover').length + 1;
    const run = this._startRun('recover', ev.trace_id, ev.ts);
    run.recovery = {
      attempt,
      reason: typeof ev.reason === 'string' ? ev.reason : null,
      resumedFrom: typeof ev.resumed_from === 'string' && ev.resumed_from ? ev.resumed_from : null,
    };
    this.outcome = 'running';
    this.terminal = false;
    this.error = null;
    this.interrupts = [];
    return true;
  }

  /** The current run was cut (its server stopped): it ends 'recovered', where it was last seen. */
  _cutRun() {
    const run = this.currentRun();
    if (run && run.terminal === null) {
      run.terminal = 'recovered';
      run.endTs = this.lastTs;
    }
    for (const i of this.instances) if (i.state === 'running') i.state = 'cut';
    for (const t of this.tools.values()) {
      if (!t.running) continue;
      t.running = false;
      t.status = 'cut';
    }
  }

  /** The latest recovery of the turn ({attempt, reason, resumedFrom}), or null when it had none. */
  lastRecovery() {
    for (let k = this.runs.length - 1; k >= 0; k--) if (this.runs[k].recovery) return this.runs[k].recovery;
    return null;
  }

  _endRun(terminalType, ts) {
    const run = this.currentRun();
    if (run) {
      run.terminal = terminalType;
      run.endTs = num(ts);
    }
    for (const t of this.tools.values()) t.running = false;
  }

  _paused(ev) {
    this._endRun('paused', ev.ts);
    this.outcome = 'paused';
    this.terminal = false;
    this.interrupts = Array.isArray(ev.interrupts) ? ev.interrupts : [];
    this.resumeHint = ev.resume && typeof ev.resume === 'object' ? ev.resume : null;
    // why (and where) to resume, when the page cannot: the resume's own words, else the event's
    const said = [this.resumeHint && this.resumeHint.message, ev.message].find((x) => typeof x === 'string' && x.trim());
    this.resumeMessage = said ? said.trim() : null;
    return true;
  }

  _error(ev) {
    this._endRun('error', ev.ts);
    const cancelled = ev.code === 'cancelled';
    this.outcome = cancelled ? 'cancelled' : 'error';
    this.terminal = true;
    this.error = {
      code: ev.code ?? 'error',
      message: typeof ev.message === 'string' ? ev.message : 'The turn failed.',
      node: ev.node ?? null,
      retryable: !!ev.retryable,
    };
    const left = cancelled ? 'cancelled' : SERVER_STOPPED.has(ev.code) ? 'cut' : null;
    for (const i of this.instances) if (i.state === 'running') i.state = left || (i.node === ev.node ? 'error' : 'cancelled');
    return true;
  }

  _completed(ev) {
    this._endRun('turn_completed', ev.ts);
    const r = ev.response && typeof ev.response === 'object' ? ev.response : {};
    this.response = r;
    this.outcome = OUTCOMES.includes(r.status) ? r.status : 'answered';
    this.terminal = this.outcome !== 'paused';
    if (this.outcome === 'paused') this.interrupts = Array.isArray(r.interrupts) ? r.interrupts : [];
    if (num(ev.human_wait_ms) !== null) this.humanWaitMs = ev.human_wait_ms;
    for (const i of this.instances) if (i.state === 'running') i.state = 'cancelled';
    return true;
  }

  /**
   * Degraded mode: build the state from a ChatResponse (the JSON path) and the topology
   * from GET /graph. A resume response adds its run; the earlier run's nodes keep their states.
   */
  applyChatResponse(resp, topology, { resumed = false } = {}) {
    this.degraded = true;
    if (topology && !this.topology) this._topology({ ...topology, trace_id: resp && resp.trace_id });
    else this._startRun(resumed ? 'resume' : 'chat', resp && resp.trace_id, null);
    if (!resp || typeof resp !== 'object') return;
    if (resp.turn_id) this.turnId = resp.turn_id;
    if (resp.thread_id) this.threadId = resp.thread_id;
    const runIndex = this.runs.length - 1;
    const listed = Array.isArray(resp.nodes) ? resp.nodes : [];
    // A resume response lists the nodes of its own run: they are added as new instances (the
    // node that paused in the first run stays in the history, as on the stream).
    let clock = this.instances.length ? Math.max(...this.instances.map((i) => i.endTs ?? 0)) + 1 : 0;
    for (const n of listed) {
      const state = ENDED_STATES.includes(n.status) ? n.status : 'ok';
      this.instances.push({
        node: String(n.name),
        namespace: [],
        spanId: null,
        parentSpanId: null,
        step: null,
        taskId: null,
        run: runIndex,
        state,
        // No timestamps on the JSON path: the order of `nodes` stands in for time.
        startTs: clock,
        endTs: clock + 0.5,
        durationMs: num(n.duration_ms),
        summary: null,
        children: [],
      });
      clock += 2;
    }
    this.response = resp;
    const status = OUTCOMES.includes(resp.status) ? resp.status : 'answered';
    this.outcome = status;
    this.terminal = status !== 'paused';
    this.interrupts = status === 'paused' && Array.isArray(resp.interrupts) ? resp.interrupts : [];
    this.currentRun().terminal = status === 'paused' ? 'paused' : status === 'error' ? 'error' : 'turn_completed';
    if (status === 'error' || status === 'cancelled') {
      const failed = listed.find((n) => n.status === 'error');
      this.error = { code: status, message: resp.answer || 'The turn failed.', node: failed ? String(failed.name) : null, retryable: false };
    }
  }

  /** The state of a graph node (a top-level one, or an inner one by its namespace), for data-state. */
  nodeState(id, namespace = []) {
    const inst = this.nodeInstances(id, namespace);
    if (inst.length) {
      if (inst.some((i) => i.state === 'running')) return 'running';
      return inst[inst.length - 1].state;
    }
    if (id === '__start__') return this.runs.length ? 'ok' : 'idle';
    if (id === '__end__') {
      if (this.outcome === 'answered' || this.outcome === 'refused') return 'ok';
      return this.terminal ? 'skipped' : 'idle';
    }
    return this.terminal ? 'skipped' : 'idle';
  }

  nodeInstances(id, namespace = []) {
    return this.instances.filter((i) => i.node === id && sameNamespace(i.namespace, namespace));
  }

  /**
   * Was the edge source -> target taken in this turn? A target instance that started after a
   * source instance ended took that edge, unless a node between them (a successor of the source
   * and a predecessor of the target) ran in that window: then the flow went through it.
   */
  edgeTaken(source, target) {
    if (source === '__start__') return this.runs.length > 0 && (target === '__end__' ? this.nodeState('__end__') === 'ok' : this.nodeInstances(target).length > 0);
    const done = this.nodeInstances(source).filter((i) => i.state !== 'running' && i.state !== 'cancelled' && i.state !== 'cut');
    if (!done.length) return false;
    if (target === '__end__') return (this.outcome === 'answered' || this.outcome === 'refused') && this.isLastToEnd(source);
    const ti = this.nodeInstances(target);
    if (!ti.length) return false;
    const edges = this.topology ? this.topology.edges : [];
    const succ = new Set(edges.filter((e) => e.source === source).map((e) => e.target));
    const pred = new Set(edges.filter((e) => e.target === target).map((e) => e.source));
    const between = this.instances.filter((x) => !x.namespace.length && x.node !== source && x.node !== target && succ.has(x.node) && pred.has(x.node));
    const eps = 1;
    for (const s of done) {
      if (s.endTs === null) return true;
      const after = ti.filter((t) => t.startTs === null || t.startTs >= s.endTs - eps).sort((a, b) => (a.startTs ?? 0) - (b.startTs ?? 0));
      if (!after.length) continue;
      const t = after[0];
      if (t.startTs === null) return true;
      const via = between.some((x) => x.startTs !== null && x.startTs >= s.endTs - eps && x.endTs !== null && x.endTs <= t.startTs + eps);
      if (!via) return true;
    }
    return false;
  }

  isLastToEnd(source) {
    if (!this.topology) return true;
    const preds = this.topology.edges.filter((e) => e.target === '__end__').map((e) => e.source);
    if (preds.length <= 1) return true;
    // The predecessor of __end__ that finished last.
    let best = null;
    let bestTs = -Infinity;
    for (const p of preds) {
      for (const i of this.nodeInstances(p)) {
        const t = i.endTs ?? 0;
        if (i.state !== 'running' && i.state !== 'cut' && t >= bestTs) {
          bestTs = t;
          best = p;
        }
      }
    }
    return best === source;
  }

  /** Wall time of the turn's runs (sum of run durations, without the human wait). */
  activeMs() {
    let total = 0;
    for (const run of this.runs) if (run.startTs !== null && run.endTs !== null) total += run.endTs - run.startTs;
    return total;
  }
}
