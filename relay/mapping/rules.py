"""What a span is: the instrumentation rule table, first match wins.

A span is a run root, a graph node, a tool, a model call, a retrieval or a guardrail, or
none of them. One table, :data:`RULES`, decides; docs/events.md ("Mapping rules") repeats
it. Our own conventions come first (``relay.turn.id``, ``relay.node.name``, GenAI
``gen_ai.operation.name``), then OpenLLMetry (``traceloop.*``), OpenInference
(``openinference.span.kind``, ``metadata.langgraph_*``) and the GenAI ``invoke_agent``.
Each row's reader turns the span's attributes into :class:`Facts`; this module also holds
the small attribute readers they share (and the engine reuses): nothing here keeps state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relay import conventions as c
from relay.mapping.attributes import (
    int_or_none,
    marker_attributes,
    str_or_none,
    suffix,
    task_id_of,
)
from relay.spans import SpanRecord

# -- roles --------------------------------------------------------------------------------

ROOT = "root"
NODE = "node"
TOOL = "tool"
CHAT = "chat"
RETRIEVAL = "retrieval"
GUARDRAIL = "guardrail"

#: the GenAI operation a role stands for, for spans of other instrumentations
ROLE_OPERATION = {
    CHAT: c.OP_CHAT,
    RETRIEVAL: c.OP_RETRIEVAL,
    GUARDRAIL: c.OP_GUARDRAIL,
    TOOL: c.OP_TOOL,
}

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
OI_INPUT = "input.value"
TL_KIND = "traceloop.span.kind"
TL_ENTITY = "traceloop.entity.name"
TL_WORKFLOW = "traceloop.workflow.name"
TL_OUTPUT = "traceloop.entity.output"
TL_INPUT = "traceloop.entity.input"
TL_ASSOC = "traceloop.association.properties."
GENAI_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"  # older GenAI / OpenLLMetry names
GENAI_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
GENAI_WORKFLOW_NODES = "gen_ai.workflow.nodes"
GENAI_WORKFLOW_EDGES = "gen_ai.workflow.edges"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GENAI_INPUT_MESSAGES = "gen_ai.input.messages"


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
    """One row of the mapping table: ``source``, the ``role`` it gives, and ``when``.

    ``key`` is the attribute that identifies the row's spans, and ``values`` the values of
    it the row is for (empty: any value; the row's reader then decides): a span is tried
    only against the rows its identifying attributes point to (:func:`classify`)."""

    source: str
    role: str
    when: str
    match: Callable[[Mapping[str, Any], str], Facts | None]
    key: str
    values: tuple[str, ...] = ()


# -- the table's readers ------------------------------------------------------------------


def _relay_root(a: Mapping[str, Any], name: str) -> Facts | None:
    return Facts(ROOT, "relay") if c.TURN_ID in a else None


def _relay_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if c.NODE_NAME not in a:
        return None
    return Facts(
        NODE,
        "relay",
        name=str(a[c.NODE_NAME]),
        step=a.get(c.NODE_STEP),
        task_id=a.get(c.NODE_TASK_ID),
    )


def _genai_op(op: str, role: str) -> Callable[[Mapping[str, Any], str], Facts | None]:
    def match(a: Mapping[str, Any], name: str) -> Facts | None:
        if a.get(c.OPERATION) != op:
            return None
        facts = Facts(role, "genai")
        if role == TOOL:
            facts.name = str(a.get(c.TOOL_NAME, suffix(name)))
            facts.call_id = a.get(c.TOOL_CALL_ID)
            facts.langgraph_node = str_or_none(a.get(TL_ASSOC + "langgraph_node"))
            facts.task = str_or_none(a.get(TL_ASSOC + "langgraph_checkpoint_ns"))
        return facts

    return match


def _tl_workflow(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) not in ("workflow", "agent"):
        return None
    return Facts(
        ROOT,
        "openllmetry",
        name=str_or_none(a.get(TL_ENTITY) or a.get(TL_WORKFLOW)),
        thread_id=_thread(a, None),
        activates=True,
        graph_id=str_or_none(a.get(TL_WORKFLOW) or a.get(TL_ENTITY)),
    )


def _tl_task(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) != "task":
        return None
    entity = str_or_none(a.get(TL_ENTITY)) or suffix(name)
    lg_node = str_or_none(a.get(TL_ASSOC + "langgraph_node"))
    if lg_node is not None and lg_node != entity:
        return None  # a runnable inside a node, not the node
    ns = str_or_none(a.get(TL_ASSOC + "langgraph_checkpoint_ns"))
    return Facts(
        NODE,
        "openllmetry",
        name=entity,
        step=a.get(TL_ASSOC + "langgraph_step"),
        task_id=task_id_of(ns),
        task=ns,
        thread_id=_thread(a, None),
        langgraph_node=lg_node,
        activates=True,
    )


def _tl_tool(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(TL_KIND) != "tool":
        return None
    return Facts(
        TOOL,
        "openllmetry",
        name=str_or_none(a.get(TL_ENTITY)) or suffix(name),
        thread_id=_thread(a, None),
        langgraph_node=str_or_none(a.get(TL_ASSOC + "langgraph_node")),
        task=str_or_none(a.get(TL_ASSOC + "langgraph_checkpoint_ns")),
        step=a.get(TL_ASSOC + "langgraph_step"),
    )


def _oi(kind: str, role: str) -> Callable[[Mapping[str, Any], str], Facts | None]:
    def match(a: Mapping[str, Any], name: str) -> Facts | None:
        if a.get(OI_KIND) != kind:
            return None
        meta = _metadata(a)
        lg_node = str_or_none(meta.get("langgraph_node"))
        facts = Facts(
            role,
            "openinference",
            thread_id=_thread(a, meta),
            langgraph_node=lg_node,
            activates=lg_node is not None,
            task=str_or_none(meta.get("langgraph_checkpoint_ns")),
            step=meta.get("langgraph_step"),
        )
        if role == CHAT:
            facts.model = a.get(OI_MODEL)
            facts.input_tokens = int_or_none(a.get(OI_PROMPT_TOKENS))
            facts.output_tokens = int_or_none(a.get(OI_COMPLETION_TOKENS))
        elif role == RETRIEVAL:
            facts.documents = _oi_documents(a)
        elif role == TOOL:
            facts.name = str_or_none(a.get(OI_TOOL_NAME)) or name
            facts.call_id = a.get(OI_TOOL_CALL_ID)
        return facts

    return match


def _oi_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(OI_KIND) not in ("CHAIN", "AGENT", None) or OI_METADATA not in a:
        return None
    meta = _metadata(a)
    lg_node = str_or_none(meta.get("langgraph_node"))
    if lg_node is None or lg_node != name:
        return None
    ns = str_or_none(meta.get("langgraph_checkpoint_ns"))
    return Facts(
        NODE,
        "openinference",
        name=lg_node,
        step=meta.get("langgraph_step"),
        task_id=task_id_of(ns),
        task=ns,
        thread_id=_thread(a, meta),
        langgraph_node=lg_node,
        activates=True,
    )


def _oi_root(a: Mapping[str, Any], name: str) -> Facts | None:
    kind = a.get(OI_KIND)
    if kind not in ("CHAIN", "AGENT"):
        return None
    meta = _metadata(a)
    if meta.get("langgraph_node") is not None:
        return None  # a chain inside a node
    graphish = kind == "AGENT" or meta.get("ls_integration") == "langgraph" or name == "LangGraph"
    return Facts(
        ROOT,
        "openinference",
        name=name,
        thread_id=_thread(a, meta),
        activates=graphish,
        graph_id=name,
    )


def _genai_agent(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(c.OPERATION) != c.OP_INVOKE_AGENT:
        return None
    agent = str_or_none(a.get(c.AGENT_NAME)) or suffix(name)
    return Facts(
        ROOT,
        "genai",
        name=agent,
        thread_id=_thread(a, None),
        activates=True,
        graph_id=agent,
        topology=_workflow_topology(a),
    )


#: The mapping table, first match wins (docs/events.md "Mapping rules" repeats it).
#: A ``root`` row met inside a run (under its root or a node) is no root: a GenAI
#: ``invoke_agent`` there is a node (a sub-agent), any other root row an ordinary span.
RULES: tuple[Rule, ...] = (
    Rule("relay", ROOT, "`relay.turn.id` at start", _relay_root, c.TURN_ID),
    Rule("relay", NODE, "`relay.node.name`", _relay_node, c.NODE_NAME),
    Rule(
        "genai",
        TOOL,
        "`gen_ai.operation.name=execute_tool`",
        _genai_op(c.OP_TOOL, TOOL),
        c.OPERATION,
        (c.OP_TOOL,),
    ),
    Rule(
        "genai",
        CHAT,
        "`gen_ai.operation.name=chat`",
        _genai_op(c.OP_CHAT, CHAT),
        c.OPERATION,
        (c.OP_CHAT,),
    ),
    Rule(
        "genai",
        RETRIEVAL,
        "`gen_ai.operation.name=retrieval`",
        _genai_op(c.OP_RETRIEVAL, RETRIEVAL),
        c.OPERATION,
        (c.OP_RETRIEVAL,),
    ),
    Rule(
        "genai",
        GUARDRAIL,
        "`gen_ai.operation.name=apply_guardrail`",
        _genai_op(c.OP_GUARDRAIL, GUARDRAIL),
        c.OPERATION,
        (c.OP_GUARDRAIL,),
    ),
    Rule(
        "openllmetry",
        ROOT,
        "`traceloop.span.kind` `workflow` or `agent`",
        _tl_workflow,
        TL_KIND,
        ("workflow", "agent"),
    ),
    Rule(
        "openllmetry",
        NODE,
        "`traceloop.span.kind=task` (and `traceloop.entity.name` equals "
        "`traceloop.association.properties.langgraph_node` when that is set)",
        _tl_task,
        TL_KIND,
        ("task",),
    ),
    Rule("openllmetry", TOOL, "`traceloop.span.kind=tool`", _tl_tool, TL_KIND, ("tool",)),
    Rule(
        "openinference", CHAT, "`openinference.span.kind=LLM`", _oi("LLM", CHAT), OI_KIND, ("LLM",)
    ),
    Rule(
        "openinference",
        RETRIEVAL,
        "`openinference.span.kind=RETRIEVER`",
        _oi("RETRIEVER", RETRIEVAL),
        OI_KIND,
        ("RETRIEVER",),
    ),
    Rule(
        "openinference",
        TOOL,
        "`openinference.span.kind=TOOL`",
        _oi("TOOL", TOOL),
        OI_KIND,
        ("TOOL",),
    ),
    Rule(
        "openinference",
        GUARDRAIL,
        "`openinference.span.kind=GUARDRAIL`",
        _oi("GUARDRAIL", GUARDRAIL),
        OI_KIND,
        ("GUARDRAIL",),
    ),
    Rule(
        "openinference",
        NODE,
        "`metadata.langgraph_node` equals the span name (kind `CHAIN`)",
        _oi_node,
        OI_METADATA,
    ),
    Rule(
        "openinference",
        ROOT,
        "kind `CHAIN`/`AGENT` without `metadata.langgraph_node`",
        _oi_root,
        OI_KIND,
        ("CHAIN", "AGENT"),
    ),
    Rule(
        "genai",
        ROOT,
        "`gen_ai.operation.name=invoke_agent` (no `relay.turn.id`)",
        _genai_agent,
        c.OPERATION,
        (c.OP_INVOKE_AGENT,),
    ),
)


def _index(rules: tuple[Rule, ...]) -> tuple[tuple[str, dict[Any, tuple[Rule, ...]]], ...]:
    """The table keyed by what identifies a span: per identifying attribute (in the order
    the table first names it), its value -> the rows for it in table order (``None``:
    the rows for any value). Built once, when the module is imported; read-only."""
    keys: dict[str, dict[Any, tuple[Rule, ...]]] = {}
    for rule in rules:
        for value in rule.values or (None,):
            table = keys.setdefault(rule.key, {})
            table[value] = (*table.get(value, ()), rule)
    for table in keys.values():  # a value's rows include the any-value rows, in order
        for value in [v for v in table if v is not None]:
            table[value] = tuple(r for r in rules if r in table[value] or r in table.get(None, ()))
    return tuple(keys.items())


_BY_KEY = _index(RULES[2:])  # the first two (ours) classify tries before it
_ORDER = {rule: i for i, rule in enumerate(RULES)}


def classify(record: SpanRecord) -> Facts | None:
    """The facts of the first row of :data:`RULES` that matches, or None.

    Only the rows the span's identifying attributes point to are tried (``Rule.key`` and
    ``values``): one dict lookup per identifying attribute instead of every row's reader,
    with the table's order kept where a span points to rows of several keys."""
    attrs = record.attributes
    name = record.name
    if c.TURN_ID in attrs:  # the table's first two rows: their readers always match
        return _relay_root(attrs, name)
    if c.NODE_NAME in attrs:
        return _relay_node(attrs, name)
    rows: tuple[Rule, ...] = ()
    several = False
    for key, table in _BY_KEY:
        if (value := attrs.get(key)) is None:
            continue
        if found := table.get(value if type(value) is str else None) or table.get(None):
            several = bool(rows)
            rows = rows + found
    if several:
        rows = tuple(sorted(rows, key=_ORDER.__getitem__))
    for rule in rows:
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
        started = marker_attributes(record)
        return started is not None and c.TURN_ID in started
    facts = classify(record)
    return facts is not None and facts.activates


def placement(attrs: Mapping[str, Any]) -> Facts | None:
    """Where in the graph a span of another instrumentation runs, when its LangGraph
    metadata says (OpenInference ``metadata``, OpenLLMetry ``traceloop.association.*``):
    ``langgraph_node`` (the node it runs in), ``task`` (``langgraph_checkpoint_ns``),
    ``step``. Any span inside a node says it, a plain chain too; None when none does."""
    if OI_METADATA in attrs:
        meta = _metadata(attrs)
        node = meta.get("langgraph_node")
        ns = meta.get("langgraph_checkpoint_ns")
        step = meta.get("langgraph_step")
    else:
        meta = {}
        node = attrs.get(TL_ASSOC + "langgraph_node")
        ns = attrs.get(TL_ASSOC + "langgraph_checkpoint_ns")
        step = attrs.get(TL_ASSOC + "langgraph_step")
    if str_or_none(node) is None:
        return None
    return Facts(
        NODE,
        "placement",
        name=str(node),
        step=step,
        task=str_or_none(ns),
        task_id=task_id_of(str_or_none(ns)),
        thread_id=_thread(attrs, meta),
        langgraph_node=str(node),
        activates=True,
    )


def declared_topology(attrs: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The topology (and graph id) an agent declared on a span of another instrumentation:
    ``relay.graph.topology`` as an attribute, in OpenInference ``metadata`` or in
    OpenLLMetry's association properties (:func:`relay.langgraph.topology.
    topology_metadata`); ``(None, None)`` when none is there or it cannot be read."""
    meta = _metadata(attrs) if OI_METADATA in attrs else {}
    for where, prefix in ((attrs, ""), (meta, ""), (attrs, TL_ASSOC)):
        raw = where.get(prefix + c.GRAPH_TOPOLOGY)
        if raw is None:
            continue
        try:
            value = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None, None
        if isinstance(value, dict) and isinstance(value.get("nodes"), list):
            graph_id = where.get(prefix + c.GRAPH_ID)
            return {"nodes": value["nodes"], "edges": value.get("edges") or []}, str_or_none(
                graph_id
            )
    return None, None


# -- attribute readers ----------------------------------------------------------------


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
    seen = {key[len(prefix) :].split(".", 1)[0] for key in attrs if key.startswith(prefix)}
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
            edges.append({"source": source.strip(), "target": target.strip(), "conditional": False})
    return {"nodes": [{"id": str(n), "label": str(n)} for n in nodes], "edges": edges}
