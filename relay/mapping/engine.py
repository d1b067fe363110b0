"""Span -> events: the one mapping that the live path, the replay and the receiver share.

``map_span(state, record, ended)`` is a pure function of its inputs: the same spans fed in
the same order into a fresh :class:`MappingState` give the same events, payload for
payload. That is why a replayed turn equals the live one.

The state exists because spans are a tree and events are about turns: a node span does
not carry the turn id (only the run's root does), a tool span names no node (its parent
does), and ``node_completed`` summarises the node's children. The state remembers, per
trace, which turn it belongs to and, per open span, which node it sits under.

What a span *is* (run root, graph node, tool, model call, retrieval, guardrail) is decided
by one table, :data:`RULES`, first match wins; docs/events.md ("Mapping rules") repeats it.
Our own conventions come first (``relay.turn.id``, ``relay.node.name``, GenAI
``gen_ai.operation.name``), then OpenLLMetry (``traceloop.*``), OpenInference
(``openinference.span.kind``, ``metadata.langgraph_*``) and the GenAI ``invoke_agent``.

- Our run root (``relay.turn.id`` at start): start -> ``graph_topology``; end -> the run's
  terminal event, from ``relay.turn.outcome``. A span of a trace whose root the state has
  not seen maps to nothing.
- A *foreign* run (spans of another instrumentation, no ``relay.turn.id``): its turn id is
  the trace id. It begins at the first span that identifies a graph run (see ``activates``
  in the table) with a ``graph_topology`` (empty unless the root names its nodes) and ends
  at its root span's end with ``turn_completed`` (a ChatResponse built from the spans) or
  ``error``. Those instrumentations set their attributes only when a span ends, so a span
  may be recognised only at its end: it then yields its start event and its end event
  together ("late"), and the facts of children that ended before their node was known
  wait for it (bounded, per run).
- A start marker (``relay.start_of``, see :mod:`relay.conventions`) stands for the start
  of the span it names; that span's own start then yields nothing.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relay import conventions as c
from relay import events as ev
from relay.events import Event
from relay.spans import SpanRecord

#: How many runs (traces) the state follows at once before it forgets the oldest.
MAX_OPEN_RUNS = 10_000
#: How many facts of children whose node is not known yet the state keeps (all runs).
MAX_ORPHANS = 10_000

# -- roles --------------------------------------------------------------------------------

ROOT = "root"
NODE = "node"
TOOL = "tool"
CHAT = "chat"
RETRIEVAL = "retrieval"
GUARDRAIL = "guardrail"

_ROLE_OPERATION = {CHAT: c.OP_CHAT, RETRIEVAL: c.OP_RETRIEVAL, GUARDRAIL: c.OP_GUARDRAIL,
                   TOOL: c.OP_TOOL}

# attribute names of the other instrumentations (string literals on purpose, as for GenAI)
OI_KIND = "openinference.span.kind"
OI_METADATA = "metadata"
OI_SESSION = "session.id"
OI_MODEL = "llm.model_name"
OI_PROMPT_TOKENS = "llm.token_count.prompt"
OI_COMPLETION_TOKENS = "llm.token_count.completion"
OI_TOOL_NAME = "tool.name"
OI_TOOL_CALL_ID = "tool_call.id"
OI_OUTPUT = "output.value"
TL_KIND = "traceloop.span.kind"
TL_ENTITY = "traceloop.entity.name"
TL_WORKFLOW = "traceloop.workflow.name"
TL_OUTPUT = "traceloop.entity.output"
TL_ASSOC = "traceloop.association.properties."
GENAI_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # older GenAI / OpenLLMetry names
GENAI_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
GENAI_WORKFLOW_NODES = "gen_ai.workflow.nodes"
GENAI_WORKFLOW_EDGES = "gen_ai.workflow.edges"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"


@dataclass(slots=True)
class Facts:
    """What one rule read from one span."""

    role: str
    source: str
    name: str | None = None  # node, tool or agent name
    step: Any = None
    task_id: Any = None
    task: str | None = None  # the LangGraph task (checkpoint ns) of a node
    call_id: Any = None
    model: Any = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    documents: int | None = None
    thread_id: str | None = None
    langgraph_node: str | None = None  # the node a span runs in (from its metadata)
    activates: bool = False  # may begin a foreign run
    graph_id: str | None = None
    topology: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One row of the mapping table: ``source``, the ``role`` it gives, and ``when``."""

    source: str
    role: str
    when: str
    match: Callable[[Mapping[str, Any], str], Facts | None]


# -- the table's readers ------------------------------------------------------------------

def _relay_root(a: Mapping[str, Any], name: str) -> Facts | None:
    return Facts(ROOT, "relay") if c.TURN_ID in a else None


def _relay_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if c.NODE_NAME not in a:
        return None
    return Facts(NODE, "relay", name=str(a[c.NODE_NAME]), step=a.get(c.NODE_STEP),
                 task_id=a.get(c.NODE_TASK_ID))


def _genai_op(op: str, role: str) -> Callable[[Mapping[str, Any], str], Facts | None]:
    def match(a: Mapping[str, Any], name: str) -> Facts | None:
        if a.get(c.OPERATION) != op:
            return None
        facts = Facts(role, "genai")
        if role == TOOL:
            facts.name = str(a.get(c.TOOL_NAME, _suffix(name)))
            facts.call_id = a.get(c.TOOL_CALL_ID)
            facts.langgraph_node = _str(a.get(TL_ASSOC + "langgraph_node"))
        return facts
    return match


def _tl_workflow(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) not in ("workflow", "agent"):
        return None
    return Facts(ROOT, "openllmetry", name=_str(a.get(TL_ENTITY) or a.get(TL_WORKFLOW)),
                 thread_id=_thread(a, None), activates=True,
                 graph_id=_str(a.get(TL_WORKFLOW) or a.get(TL_ENTITY)))


def _tl_task(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) != "task":
        return None
    entity = _str(a.get(TL_ENTITY)) or _suffix(name)
    lg_node = _str(a.get(TL_ASSOC + "langgraph_node"))
    if lg_node is not None and lg_node != entity:
        return None  # a runnable inside a node, not the node
    ns = _str(a.get(TL_ASSOC + "langgraph_checkpoint_ns"))
    return Facts(NODE, "openllmetry", name=entity, step=a.get(TL_ASSOC + "langgraph_step"),
                 task_id=_task_id(ns), task=ns, thread_id=_thread(a, None),
                 langgraph_node=lg_node, activates=True)


def _tl_tool(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) != "tool":
        return None
    return Facts(TOOL, "openllmetry", name=_str(a.get(TL_ENTITY)) or _suffix(name),
                 thread_id=_thread(a, None),
                 langgraph_node=_str(a.get(TL_ASSOC + "langgraph_node")))


def _oi(kind: str, role: str) -> Callable[[Mapping[str, Any], str], Facts | None]:
    def match(a: Mapping[str, Any], name: str) -> Facts | None:
        if a.get(OI_KIND) != kind:
            return None
        meta = _metadata(a)
        lg_node = _str(meta.get("langgraph_node"))
        facts = Facts(role, "openinference", thread_id=_thread(a, meta),
                      langgraph_node=lg_node, activates=lg_node is not None)
        if role == CHAT:
            facts.model = a.get(OI_MODEL)
            facts.input_tokens = _int(a.get(OI_PROMPT_TOKENS))
            facts.output_tokens = _int(a.get(OI_COMPLETION_TOKENS))
        elif role == RETRIEVAL:
            facts.documents = _oi_documents(a)
        elif role == TOOL:
            facts.name = _str(a.get(OI_TOOL_NAME)) or name
            facts.call_id = a.get(OI_TOOL_CALL_ID)
        return facts
    return match


def _oi_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(OI_KIND) not in ("CHAIN", "AGENT", None) or OI_METADATA not in a:
        return None
    meta = _metadata(a)
    lg_node = _str(meta.get("langgraph_node"))
    if lg_node is None or lg_node != name:
        return None
    ns = _str(meta.get("langgraph_checkpoint_ns"))
    return Facts(NODE, "openinference", name=lg_node, step=meta.get("langgraph_step"),
                 task_id=_task_id(ns), task=ns, thread_id=_thread(a, meta),
                 langgraph_node=lg_node, activates=True)


def _oi_root(a: Mapping[str, Any], name: str) -> Facts | None:
    kind = a.get(OI_KIND)
    if kind not in ("CHAIN", "AGENT"):
        return None
    meta = _metadata(a)
    if meta.get("langgraph_node") is not None:
        return None  # a chain inside a node
    graphish = kind == "AGENT" or meta.get("ls_integration") == "langgraph" \
        or name == "LangGraph"
    return Facts(ROOT, "openinference", name=name, thread_id=_thread(a, meta),
                 activates=graphish, graph_id=name)


def _genai_agent(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(c.OPERATION) != c.OP_INVOKE_AGENT:
        return None
    agent = _str(a.get(c.AGENT_NAME)) or _suffix(name)
    return Facts(ROOT, "genai", name=agent, thread_id=_thread(a, None), activates=True,
                 graph_id=agent, topology=_workflow_topology(a))


#: The mapping table, first match wins (docs/events.md "Mapping rules" repeats it).
#: A ``root`` row met inside a run (under its root or a node) is no root: a GenAI
#: ``invoke_agent`` there is a node (a sub-agent), any other root row an ordinary span.
RULES: tuple[Rule, ...] = (
    Rule("relay", ROOT, "`relay.turn.id` at start", _relay_root),
    Rule("relay", NODE, "`relay.node.name`", _relay_node),
    Rule("genai", TOOL, "`gen_ai.operation.name=execute_tool`", _genai_op(c.OP_TOOL, TOOL)),
    Rule("genai", CHAT, "`gen_ai.operation.name=chat`", _genai_op(c.OP_CHAT, CHAT)),
    Rule("genai", RETRIEVAL, "`gen_ai.operation.name=retrieval`",
         _genai_op(c.OP_RETRIEVAL, RETRIEVAL)),
    Rule("genai", GUARDRAIL, "`gen_ai.operation.name=apply_guardrail`",
         _genai_op(c.OP_GUARDRAIL, GUARDRAIL)),
    Rule("openllmetry", ROOT, "`traceloop.span.kind` `workflow` or `agent`", _tl_workflow),
    Rule("openllmetry", NODE, "`traceloop.span.kind=task` (and `traceloop.entity.name` equals "
         "`traceloop.association.properties.langgraph_node` when that is set)", _tl_task),
    Rule("openllmetry", TOOL, "`traceloop.span.kind=tool`", _tl_tool),
    Rule("openinference", CHAT, "`openinference.span.kind=LLM`", _oi("LLM", CHAT)),
    Rule("openinference", RETRIEVAL, "`openinference.span.kind=RETRIEVER`",
         _oi("RETRIEVER", RETRIEVAL)),
    Rule("openinference", TOOL, "`openinference.span.kind=TOOL`", _oi("TOOL", TOOL)),
    Rule("openinference", GUARDRAIL, "`openinference.span.kind=GUARDRAIL`",
         _oi("GUARDRAIL", GUARDRAIL)),
    Rule("openinference", NODE, "`metadata.langgraph_node` equals the span name "
         "(kind `CHAIN`)", _oi_node),
    Rule("openinference", ROOT, "kind `CHAIN`/`AGENT` without `metadata.langgraph_node`",
         _oi_root),
    Rule("genai", ROOT, "`gen_ai.operation.name=invoke_agent` (no `relay.turn.id`)",
         _genai_agent),
)


def classify(record: SpanRecord) -> Facts | None:
    """The facts of the first rule of :data:`RULES` that matches, or None."""
    attrs, name = record.attributes, record.name
    for rule in RULES:
        facts = rule.match(attrs, name)
        if facts is not None:
            return facts
    return None


def can_start_run(record: SpanRecord) -> bool:
    """True when this span (all its attributes known) lets the mapping follow its trace:
    our run root or its start marker, or a span that begins a foreign run."""
    attrs = record.attributes
    if c.TURN_ID in attrs:
        return True
    if c.START_OF in attrs:
        started = _marker_attributes(record)
        return started is not None and c.TURN_ID in started
    facts = classify(record)
    return facts is not None and facts.activates


# -- state --------------------------------------------------------------------------------

@dataclass(slots=True)
class _Run:
    turn_id: str
    thread_id: str
    trace_id: str
    kind: str
    root_span_id: str | None = None
    foreign: bool = False  # turn id from the trace id: another instrumentation's run
    nodes: list[dict[str, Any]] = field(default_factory=list)  # foreign: for the response
    failed_node: str | None = None
    paused: bool = False


@dataclass(slots=True)
class _Open:
    """An open span under a run: which node it belongs to, if any."""

    run: _Run
    node_span_id: str | None  # the enclosing node span (itself, for a node)
    node: str | None
    is_node: bool = False
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)
    task: str | None = None  # a foreign node's LangGraph task
    tool_started: bool = False


@dataclass(slots=True)
class _Bag:
    """Facts of ended children waiting for their node to be recognised."""

    trace_id: str
    summary: dict[str, Any] = field(default_factory=dict)
    children: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MappingState:
    """What the mapping remembers between spans. One per live relay, one per replay."""

    runs: OrderedDict[str, _Run] = field(default_factory=OrderedDict)  # trace_id -> run
    spans: dict[str, _Open] = field(default_factory=dict)  # span_id -> open span
    #: span_id -> facts of its ended descendants, while no enclosing node is known
    orphans: OrderedDict[str, _Bag] = field(default_factory=OrderedDict)
    #: foreign runs that ended: their late spans map to nothing
    ended: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def forget_run(self, trace_id: str) -> None:
        self.runs.pop(trace_id, None)
        stale = [sid for sid, o in self.spans.items() if o.run.trace_id == trace_id]
        for sid in stale:
            del self.spans[sid]
        if self.orphans:
            for sid in [s for s, b in self.orphans.items() if b.trace_id == trace_id]:
                del self.orphans[sid]


def map_span(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """The events for one span start (``ended=False``) or end (``ended=True``)."""
    attrs = record.attributes
    if attrs.get(c.OPERATION) == c.OP_SAVE_MESSAGE:
        return _message_saved(record) if ended else []
    if c.START_OF in attrs:
        return [] if ended else _marker_started(state, record)
    if not ended and c.TURN_ID in attrs:
        run = state.runs.get(record.trace_id)
        if run is not None and run.root_span_id == record.span_id:
            return []  # its start marker came first
        return _root_started(state, record)
    run = state.runs.get(record.trace_id)
    if run is None:
        return _unknown_trace(state, record, ended)
    if ended and attrs.get(c.TURN_ID) == run.turn_id:
        return _root_ended(state, run, record)
    if not ended:
        return _span_started(state, run, record)
    return _span_ended(state, run, record)


def _message_saved(record: SpanRecord) -> list[Event]:
    """A ``save_message`` span (a child of the run's root that ends after it) that
    succeeded: the turn's answer is stored under ``relay.message.id``. The run is over by
    then, so the span names its turn and thread itself."""
    attrs = record.attributes
    if record.status == "error" or c.MESSAGE_ID not in attrs or c.MESSAGE_TURN_ID not in attrs:
        return []
    return [Event(ev.MESSAGE_SAVED, str(attrs.get(c.CONVERSATION_ID, "")),
                  str(attrs[c.MESSAGE_TURN_ID]), record.trace_id, _ms(record.end_ns or 0),
                  {"message_id": str(attrs[c.MESSAGE_ID])})]


# -- start markers ------------------------------------------------------------------------

def _marker_attributes(record: SpanRecord) -> dict[str, Any] | None:
    raw = record.attributes.get(c.START_ATTRIBUTES, "{}")
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _marker_started(state: MappingState, marker: SpanRecord) -> list[Event]:
    """A start marker: the start of the span it names, unless that span started already."""
    attributes = _marker_attributes(marker)
    span_id = str(marker.attributes.get(c.START_OF, "")).lower()
    if attributes is None or len(span_id) != 16:
        return []  # cut or malformed: the real span's end still gives a (late) start
    # a marker is a child of its span (then it names the span's parent, if any, in
    # relay.start.parent) or a sibling (then its own parent is the span's)
    parent = marker.attributes.get(c.START_PARENT)
    if not parent and marker.parent_span_id != span_id:
        parent = marker.parent_span_id
    record = SpanRecord(
        trace_id=marker.trace_id, span_id=span_id,
        parent_span_id=str(parent).lower() if parent else None,
        name=marker.name.removeprefix(c.START_PREFIX), start_ns=marker.start_ns, end_ns=None,
        attributes=attributes)
    run = state.runs.get(marker.trace_id)
    if run is not None and (run.root_span_id == span_id or span_id in state.spans):
        return []
    return map_span(state, record, False)


# -- run root -----------------------------------------------------------------------------

def _remember(state: MappingState, run: _Run) -> None:
    state.runs[run.trace_id] = run
    while len(state.runs) > MAX_OPEN_RUNS:
        state.forget_run(next(iter(state.runs)))


def _root_started(state: MappingState, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    run = _Run(
        turn_id=str(attrs[c.TURN_ID]),
        thread_id=str(attrs.get(c.CONVERSATION_ID, "")),
        trace_id=record.trace_id,
        kind=str(attrs.get(c.RUN_KIND, "chat")),
        root_span_id=record.span_id,
    )
    _remember(state, run)
    topology, ok = _json_attr(attrs, c.GRAPH_TOPOLOGY, {"nodes": [], "edges": []})
    fields: dict[str, Any] = {
        "graph_id": str(attrs.get(c.GRAPH_ID, "")),
        "nodes": topology.get("nodes", []),
        "edges": topology.get("edges", []),
        "run_kind": run.kind,
    }
    if not ok:
        fields["truncated"] = True
    return [_event(ev.GRAPH_TOPOLOGY, run, record.start_ns, fields)]


def _root_ended(state: MappingState, run: _Run, record: SpanRecord) -> list[Event]:
    attrs = record.attributes
    state.forget_run(run.trace_id)
    outcome = attrs.get(c.TURN_OUTCOME)
    end = record.end_ns or record.start_ns
    if outcome in ("answered", "refused"):
        response, ok = _json_attr(attrs, c.TURN_RESPONSE, None)
        if not ok:
            return [_truncated(run, end, c.TURN_RESPONSE)]
        if response is None:
            return [_missing(run, end, c.TURN_RESPONSE)]
        fields: dict[str, Any] = {"response": response}
        if run.kind == "resume" and c.TURN_HUMAN_WAIT_MS in attrs:
            fields["human_wait_ms"] = attrs[c.TURN_HUMAN_WAIT_MS]
        return [_event(ev.TURN_COMPLETED, run, end, fields)]
    if outcome == "paused":
        interrupts, ok = _json_attr(attrs, c.TURN_INTERRUPTS, [])
        if not ok:
            return [_truncated(run, end, c.TURN_INTERRUPTS)]
        return [_event(ev.PAUSED, run, end, {
            "interrupts": interrupts,
            "resume": _how_to_resume(run, interrupts),
        })]
    if outcome == "cancelled":
        return [_event(ev.ERROR, run, end, {
            "code": "cancelled",
            "message": str(attrs.get(c.ERROR_MESSAGE, "The turn was cancelled.")),
            "node": attrs.get(c.ERROR_NODE),
            "retryable": True,
        })]
    return [_event(ev.ERROR, run, end, {
        "code": str(attrs.get(c.ERROR_CODE, "turn_failed")),
        "message": str(attrs.get(c.ERROR_MESSAGE, "The agent could not finish this turn.")),
        "node": attrs.get(c.ERROR_NODE),
        "retryable": bool(attrs.get(c.ERROR_RETRYABLE, True)),
    })]


def _how_to_resume(run: _Run, interrupts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(interrupts) == 1:
        value: Any = "<your answer to the interrupt>"
    else:
        value = {str(i.get("id")): "<your answer>" for i in interrupts}
    return {
        "method": "POST",
        "path": "/chat/resume",
        "body": {"thread_id": run.thread_id, "turn_id": run.turn_id, "resume": value},
    }


def _missing(run: _Run, end_ns: int, attribute: str) -> Event:
    return _event(ev.ERROR, run, end_ns, {
        "code": "attribute_missing",
        "message": (
            f"The span attribute {attribute} is not there: the spans were probably exported "
            "with RELAY_CAPTURE_CONTENT=false, which drops the answer; the turn's outcome "
            "is in relay.turn.outcome."
        ),
        "node": None,
        "retryable": False,
    })


def _truncated(run: _Run, end_ns: int, attribute: str) -> Event:
    return _event(ev.ERROR, run, end_ns, {
        "code": "attribute_truncated",
        "message": (
            f"The span attribute {attribute} arrived cut short, probably by "
            "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT; raise or unset that limit."
        ),
        "node": None,
        "retryable": False,
    })


# -- foreign runs (another instrumentation's spans) ---------------------------------------

def _unknown_trace(state: MappingState, record: SpanRecord, ended: bool) -> list[Event]:
    """A span of a trace with no run: it begins a foreign run when a rule says so."""
    if record.trace_id in state.ended:
        return []
    facts = classify(record)
    if facts is None or not facts.activates:
        return []
    run = _Run(turn_id=record.trace_id, thread_id=facts.thread_id or "",
               trace_id=record.trace_id, kind="chat", foreign=True)
    _remember(state, run)
    topology = facts.topology or {"nodes": [], "edges": []} if facts.role == ROOT \
        else {"nodes": [], "edges": []}
    events = [_event(ev.GRAPH_TOPOLOGY, run, record.start_ns, {
        "graph_id": facts.graph_id or "",
        "nodes": topology["nodes"],
        "edges": topology["edges"],
        "run_kind": run.kind,
    })]
    if facts.role == ROOT and not ended:
        run.root_span_id = record.span_id
        return events
    if ended:
        if facts.role == ROOT:
            run.root_span_id = record.span_id
        return events + _span_ended(state, run, record, facts)
    return events + _span_started(state, run, record, facts)


def _inside(state: MappingState, run: _Run, parent_span_id: str | None) -> bool:
    """Whether a span with this parent sits under the run's root or one of its nodes."""
    if parent_span_id is None:
        return False
    if parent_span_id == run.root_span_id:
        return True
    parent = state.spans.get(parent_span_id)
    return parent is not None and parent.node_span_id is not None


def _effective(state: MappingState, run: _Run, record: SpanRecord,
               facts: Facts | None) -> Facts | None:
    """Resolve a ``root`` row by where the span sits (see :data:`RULES`)."""
    if facts is None or facts.role != ROOT or facts.source == "relay":
        return facts
    if record.span_id == run.root_span_id:
        return facts
    if _inside(state, run, record.parent_span_id):
        if facts.source == "genai":  # a sub-agent
            facts.role = NODE
            return facts
        return None
    if run.foreign and run.root_span_id is None:
        return facts
    return None


def _foreign_root_ended(state: MappingState, run: _Run, record: SpanRecord) -> list[Event]:
    state.forget_run(run.trace_id)
    state.ended[run.trace_id] = None
    while len(state.ended) > MAX_OPEN_RUNS:
        state.ended.popitem(last=False)
    end = record.end_ns or record.start_ns
    if record.status == "error":
        return [_event(ev.ERROR, run, end, {
            "code": "node_failed" if run.failed_node else "turn_failed",
            "message": "The agent could not finish this turn.",
            "node": run.failed_node,
            "retryable": True,
        })]
    response = {
        "thread_id": run.thread_id, "turn_id": run.turn_id, "trace_id": run.trace_id,
        "status": "paused" if run.paused else "answered",
        "answer": _answer_of(record.attributes), "citations": [], "interrupts": [],
        "nodes": run.nodes,
    }
    return [_event(ev.TURN_COMPLETED, run, end, {"response": response})]


# -- spans under a run --------------------------------------------------------------------

def _span_started(state: MappingState, run: _Run, record: SpanRecord,
                  facts: Facts | None = None) -> list[Event]:
    if record.span_id in state.spans:
        return []  # its start marker came first
    attrs = record.attributes
    parent = state.spans.get(record.parent_span_id or "")
    if facts is None:
        facts = classify(record)
    facts = _effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT:
        run.root_span_id = record.span_id
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return []
    if facts is not None and facts.role == NODE and not _same_task(state, parent, facts):
        node = facts.name if facts.source != "relay" else attrs.get(c.NODE_NAME)
        opened = _Open(run, record.span_id, str(node), is_node=True, task=facts.task)
        state.spans[record.span_id] = opened
        _claim(state, record.span_id, opened)
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return [_node_started(run, record, str(node), facts)]
    node_span_id = parent.node_span_id if parent else None
    node_name = parent.node if parent else None
    opened = _Open(run, node_span_id, node_name)
    state.spans[record.span_id] = opened
    if facts is not None and facts.role == TOOL:
        opened.tool_started = True
        return [_tool_started(run, record, facts, node_name or facts.langgraph_node)]
    return []


def _span_ended(state: MappingState, run: _Run, record: SpanRecord,
                facts: Facts | None = None) -> list[Event]:
    attrs = record.attributes
    opened = state.spans.pop(record.span_id, None)
    end = record.end_ns or record.start_ns
    if opened is not None and opened.is_node:
        _claim(state, record.span_id, opened)
        return [_node_completed(run, record, opened)]
    if facts is None:
        facts = classify(record)
    facts = _effective(state, run, record, facts)
    if facts is not None and facts.role == ROOT and run.foreign:
        return _foreign_root_ended(state, run, record)
    if facts is not None and facts.role == NODE and facts.source != "relay":
        # recognised only now (attributes set at end): start and end together
        late = _Open(run, record.span_id, str(facts.name), is_node=True, task=facts.task)
        if opened is not None:
            _merge(late, opened)
        _claim(state, record.span_id, late)
        if not run.thread_id and facts.thread_id:
            run.thread_id = facts.thread_id
        return [_node_started(run, record, str(facts.name), facts),
                _node_completed(run, record, late)]
    operation = attrs.get(c.OPERATION)
    if operation is None and facts is not None:
        operation = _ROLE_OPERATION.get(facts.role)
    events: list[Event] = []
    node_name = opened.node if opened is not None else None
    if facts is not None and facts.role == TOOL:
        node_name = node_name or facts.langgraph_node
        if opened is None or not opened.tool_started:  # recognised only now: a late start
            events.append(_tool_started(run, record, facts, node_name))
    if opened is None or opened.node_span_id is None:
        # no enclosing node known: keep the facts for it (an ancestor may be recognised
        # later as a node), and finish a foreign tool
        _to_parent(state, run, record, operation, facts, opened)
        started = opened is not None and opened.tool_started
        if facts is not None and facts.role == TOOL and (run.foreign or events or started):
            events.append(_tool_completed(run, record, facts, node_name, end))
        return events
    node = state.spans.get(opened.node_span_id)
    if node is not None:
        _summarise(node, record, operation, facts)
    if operation == c.OP_TOOL or (facts is not None and facts.role == TOOL):
        events.append(_tool_completed(run, record, facts, opened.node, end))
    return events


def _same_task(state: MappingState, parent: _Open | None, facts: Facts) -> bool:
    """A foreign 'node' inside the node of the same LangGraph task is an inner span."""
    if parent is None or parent.node_span_id is None or facts.task is None:
        return False
    node = state.spans.get(parent.node_span_id)
    return node is not None and node.task == facts.task


def _node_started(run: _Run, record: SpanRecord, node: str, facts: Facts) -> Event:
    return _event(ev.NODE_STARTED, run, record.start_ns, {
        "node": node,
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "step": facts.step,
        "task_id": facts.task_id,
    })


def _node_completed(run: _Run, record: SpanRecord, opened: _Open) -> Event:
    status = _status(record, c.NODE_OUTCOME)
    if run.foreign:
        if status == "error" and _interrupted(record):
            status = "paused"
        if status == "paused":
            run.paused = True
        elif status == "error":
            run.failed_node = opened.node
        run.nodes.append({"name": opened.node, "status": status,
                          "duration_ms": record.duration_ms})
    opened.children.sort(key=lambda ch: (ch["start_ts"], ch["span_id"]))  # start order
    return _event(ev.NODE_COMPLETED, run, record.end_ns or record.start_ns, {
        "node": opened.node,
        "span_id": record.span_id,
        "status": status,
        "duration_ms": record.duration_ms,
        "summary": opened.summary,
        "children": opened.children,
    })


def _tool_started(run: _Run, record: SpanRecord, facts: Facts, node: str | None) -> Event:
    fields: dict[str, Any] = {
        "tool": facts.name,
        "span_id": record.span_id,
        "node": node,
        "call_id": facts.call_id,
    }
    if c.TOOL_LABEL in record.attributes:
        fields["label"] = str(record.attributes[c.TOOL_LABEL])
    return _event(ev.TOOL_STARTED, run, record.start_ns, fields)


def _tool_completed(run: _Run, record: SpanRecord, facts: Facts | None, node: str | None,
                    end: int) -> Event:
    attrs = record.attributes
    name = facts.name if facts is not None and facts.name is not None \
        else str(attrs.get(c.TOOL_NAME, _suffix(record.name)))
    return _event(ev.TOOL_COMPLETED, run, end, {
        "tool": name,
        "span_id": record.span_id,
        "node": node,
        "call_id": facts.call_id if facts is not None else attrs.get(c.TOOL_CALL_ID),
        "duration_ms": record.duration_ms,
        "status": _status(record, c.SPAN_OUTCOME),
    })


# -- facts of children --------------------------------------------------------------------

def _summarise(node: _Open | _Bag, record: SpanRecord, operation: Any,
               facts: Facts | None = None) -> None:
    attrs = record.attributes
    summary = node.summary
    foreign = c.OPERATION not in attrs and facts is not None
    if foreign:
        assert facts is not None
        if facts.role == CHAT:
            if facts.model is not None:
                summary["model"] = facts.model
            for value, out in ((facts.input_tokens, "input_tokens"),
                               (facts.output_tokens, "output_tokens")):
                if value is not None:
                    summary[out] = summary.get(out, 0) + value
        elif facts.role == RETRIEVAL and facts.documents is not None:
            summary["documents"] = summary.get("documents", 0) + facts.documents
        elif facts.role == TOOL:
            summary.setdefault("tools", []).append(str(facts.name))
    elif operation == c.OP_CHAT:
        model = attrs.get(c.RESPONSE_MODEL, attrs.get(c.REQUEST_MODEL))
        if model is not None:
            summary["model"] = model
        for key, alt, out in ((c.INPUT_TOKENS, GENAI_PROMPT_TOKENS, "input_tokens"),
                              (c.OUTPUT_TOKENS, GENAI_COMPLETION_TOKENS, "output_tokens")):
            if key in attrs:
                summary[out] = summary.get(out, 0) + int(attrs[key])
            elif alt in attrs:
                summary[out] = summary.get(out, 0) + int(attrs[alt])
    elif operation == c.OP_RETRIEVAL and c.RETRIEVAL_DOCUMENTS in attrs:
        summary["documents"] = summary.get("documents", 0) + int(attrs[c.RETRIEVAL_DOCUMENTS])
    elif operation == c.OP_GUARDRAIL and c.GUARDRAIL_DECISION in attrs:
        summary["guardrail"] = {
            "name": str(attrs.get(c.GUARDRAIL_NAME, _suffix(record.name))),
            "decision": attrs[c.GUARDRAIL_DECISION],
            "reason": attrs.get(c.GUARDRAIL_REASON, ""),
        }
    elif operation == c.OP_TOOL:
        summary.setdefault("tools", []).append(str(attrs.get(c.TOOL_NAME, _suffix(record.name))))
    node.children.append({
        "span_id": record.span_id,
        "parent_span_id": record.parent_span_id,
        "name": record.name,
        "operation": operation if operation in _OPERATIONS else "other",
        "start_ts": _ms(record.start_ns),
        "duration_ms": record.duration_ms,
        "status": _status(record, c.SPAN_OUTCOME),
    })


_OPERATIONS = frozenset({c.OP_CHAT, c.OP_RETRIEVAL, c.OP_GUARDRAIL, c.OP_TOOL})


def _to_parent(state: MappingState, run: _Run, record: SpanRecord, operation: Any,
               facts: Facts | None, opened: _Open | None) -> None:
    """Facts of a span with no known node go up to its parent, to wait for a node."""
    parent_id = record.parent_span_id
    if parent_id is None or parent_id == run.root_span_id:
        return
    parent = state.spans.get(parent_id)
    target: _Open | _Bag
    if parent is not None:
        target = parent
    else:
        bag = state.orphans.get(parent_id)
        if bag is None:
            bag = state.orphans[parent_id] = _Bag(run.trace_id)
            while len(state.orphans) > MAX_ORPHANS:
                state.orphans.popitem(last=False)
        target = bag
    _summarise(target, record, operation, facts)
    if opened is not None:
        _merge(target, opened)
    waiting = state.orphans.pop(record.span_id, None)
    if waiting is not None:
        _merge(target, waiting)


def _claim(state: MappingState, span_id: str, node: _Open) -> None:
    waiting = state.orphans.pop(span_id, None) if state.orphans else None
    if waiting is not None:
        _merge(node, waiting)


def _merge(into: _Open | _Bag, other: _Open | _Bag) -> None:
    for key, value in other.summary.items():
        if key in ("input_tokens", "output_tokens", "documents"):
            into.summary[key] = into.summary.get(key, 0) + value
        elif key == "tools":
            into.summary.setdefault("tools", []).extend(value)
        else:
            into.summary[key] = value
    into.children.extend(other.children)


# -- helpers ------------------------------------------------------------------------------

def _event(type_: str, run: _Run, time_ns: int, fields: dict[str, Any]) -> Event:
    return Event(type_, run.thread_id, run.turn_id, run.trace_id, _ms(time_ns), fields)


def _ms(time_ns: int) -> float:
    return round(time_ns / 1e6, 3)


def _status(record: SpanRecord, outcome_key: str | None) -> str:
    if outcome_key is not None:
        outcome = record.attributes.get(outcome_key)
        if outcome in ("ok", "error", "paused", "cancelled"):
            return str(outcome)
    return "error" if record.status == "error" else "ok"


def _interrupted(record: SpanRecord) -> bool:
    """A LangGraph interrupt recorded as an exception (it pauses, it does not fail)."""
    for event in record.events:
        kind = str((event.get("attributes") or {}).get("exception.type", ""))
        if kind.endswith(("GraphInterrupt", "NodeInterrupt")):
            return True
    return "GraphInterrupt" in record.status_message


def _suffix(name: str) -> str:
    return name.split(" ", 1)[1] if " " in name else name


def _str(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _task_id(ns: str | None) -> str | None:
    if not ns:
        return None
    last = ns.split("|")[-1]
    return last.rsplit(":", 1)[-1] if ":" in last else None


def _metadata(attrs: Mapping[str, Any]) -> dict[str, Any]:
    raw = attrs.get(OI_METADATA)
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _thread(attrs: Mapping[str, Any], meta: Mapping[str, Any] | None) -> str | None:
    if meta and meta.get("thread_id") is not None:
        return str(meta["thread_id"])
    for key in (OI_SESSION, TL_ASSOC + "thread_id", c.CONVERSATION_ID):
        if attrs.get(key) is not None:
            return str(attrs[key])
    return None


def _oi_documents(attrs: Mapping[str, Any]) -> int | None:
    prefix = "retrieval.documents."
    seen = {key[len(prefix):].split(".", 1)[0] for key in attrs if key.startswith(prefix)}
    return len(seen) if seen else None


def _workflow_topology(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """OpenLLMetry's ``gen_ai.workflow.nodes`` / ``.edges`` ("a -> b") as a topology."""
    nodes = attrs.get(GENAI_WORKFLOW_NODES)
    if not isinstance(nodes, list | tuple) or not nodes:
        return None
    edges = []
    for raw in attrs.get(GENAI_WORKFLOW_EDGES) or ():
        source, sep, target = str(raw).partition("->")
        if sep:
            edges.append({"source": source.strip(), "target": target.strip(),
                          "conditional": False})
    return {"nodes": [{"id": str(n), "label": str(n)} for n in nodes], "edges": edges}


def _answer_of(attrs: Mapping[str, Any]) -> str:
    """The answer of a foreign run: its root's output, as far as it says one."""
    for key in (OI_OUTPUT, TL_OUTPUT, GENAI_OUTPUT_MESSAGES):
        raw = attrs.get(key)
        if raw is None:
            continue
        try:
            value: Any = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return str(raw)
        found = _answer_in(value)
        if found is not None:
            return found
    return ""


def _answer_in(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if isinstance(value.get("outputs"), dict):
            return _answer_in(value["outputs"])
        for key in ("answer", "output", "content"):
            if isinstance(value.get(key), str):
                return value[key]
        messages = value.get("messages")
        if isinstance(messages, list) and messages:
            return _answer_in(messages[-1])
        parts = value.get("parts")
        if isinstance(parts, list):
            texts = [p.get("content") for p in parts
                     if isinstance(p, dict) and isinstance(p.get("content"), str)]
            return "".join(texts) if texts else None
        kwargs = value.get("kwargs")
        if isinstance(kwargs, dict):
            return _answer_in(kwargs)
    if isinstance(value, list) and value:
        return _answer_in(value[-1])
    return None


def _json_attr(attrs: Any, key: str, default: Any) -> tuple[Any, bool]:
    """A JSON-valued attribute; ``ok`` is False when it is present but cut or malformed."""
    raw = attrs.get(key)
    if raw is None:
        return default, True
    try:
        return json.loads(raw), True
    except (TypeError, ValueError):
        return default, False


# -- span events: text as it is written ---------------------------------------------------

def map_span_event(state: MappingState, record: SpanRecord,
                   event: Mapping[str, Any]) -> list[Event]:
    """The events for one span event (``{name, time_ns, attributes}``) of an open span.

    A ``gen_ai.content.delta`` event on a model-call span is a ``text_delta``: the chunk,
    the message it belongs to (one per model call unless the event names one), and the
    node the call runs in. A processor never sees ``add_event``; the live path hands the
    event over with :meth:`relay.processor.RelaySpanProcessor.add_event`, the replay reads
    it from the stored span."""
    if event.get("name") != c.DELTA_EVENT:
        return []
    run = state.runs.get(record.trace_id)
    attributes = event.get("attributes") or {}
    text = attributes.get(c.DELTA_TEXT)
    if run is None or not isinstance(text, str) or not text:
        return []
    opened = state.spans.get(record.span_id)
    return [_event(ev.TEXT_DELTA, run, int(event.get("time_ns") or record.start_ns), {
        "message_id": str(attributes.get(c.DELTA_MESSAGE_ID) or f"msg_{record.span_id}"),
        "delta": text,
        "node": opened.node if opened is not None else None,
        "span_id": record.span_id,
    })]
