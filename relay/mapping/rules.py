"""What a span is: the instrumentation rule table, first match wins.

A span is a run root, a graph node, a tool, a model call, a retrieval or a guardrail (the
roles of :mod:`relay.mapping.facts`), or none of them. One table, :data:`RULES`, decides;
docs/events.md ("Mapping rules") repeats it. Our own conventions come first
(``relay.turn.id``, ``relay.node.name``, GenAI ``gen_ai.operation.name``), then OpenLLMetry
(``traceloop.*``), OpenInference (``openinference.span.kind``, ``metadata.langgraph_*``)
and the GenAI ``invoke_agent`` and ``invoke_workflow`` (``invoke_node``: a node). Each
row's reader turns the span's attributes into :class:`~relay.mapping.facts.Facts`, with the
other instrumentations' attribute names and readers of
:mod:`relay.mapping.foreign_attributes`; :func:`classify` finds the row and
:func:`can_start_run` says whether a span lets the mapping follow its trace. Nothing here
keeps state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from relay import conventions as c
from relay.mapping.attributes import (
    int_or_none,
    str_or_none,
    suffix,
    task_id_of,
)
from relay.mapping.facts import CHAT, GUARDRAIL, NODE, RETRIEVAL, ROOT, TOOL, Facts
from relay.mapping.foreign_attributes import (
    OI_COMPLETION_TOKENS,
    OI_KIND,
    OI_METADATA,
    OI_MODEL,
    OI_PROMPT_TOKENS,
    OI_TOOL_CALL_ID,
    OI_TOOL_NAME,
    TL_ASSOC,
    TL_ENTITY,
    TL_KIND,
    TL_WORKFLOW,
    oi_documents,
    oi_metadata,
    thread_of,
    workflow_topology,
)
from relay.mapping.markers import is_marker, started_span
from relay.spans import SpanRecord


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
        thread_id=thread_of(a, None),
        activates=True,
        graph_id=str_or_none(a.get(TL_WORKFLOW) or a.get(TL_ENTITY)),
        topology=workflow_topology(a),
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
        thread_id=thread_of(a, None),
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
        thread_id=thread_of(a, None),
        langgraph_node=str_or_none(a.get(TL_ASSOC + "langgraph_node")),
        task=str_or_none(a.get(TL_ASSOC + "langgraph_checkpoint_ns")),
        step=a.get(TL_ASSOC + "langgraph_step"),
    )


def _oi(kind: str, role: str) -> Callable[[Mapping[str, Any], str], Facts | None]:
    def match(a: Mapping[str, Any], name: str) -> Facts | None:
        if a.get(OI_KIND) != kind:
            return None
        meta = oi_metadata(a)
        lg_node = str_or_none(meta.get("langgraph_node"))
        facts = Facts(
            role,
            "openinference",
            thread_id=thread_of(a, meta),
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
            facts.documents = oi_documents(a)
        elif role == TOOL:
            facts.name = str_or_none(a.get(OI_TOOL_NAME)) or name
            facts.call_id = a.get(OI_TOOL_CALL_ID)
        return facts

    return match


def _oi_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(OI_KIND) not in ("CHAIN", "AGENT", None) or OI_METADATA not in a:
        return None
    meta = oi_metadata(a)
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
        thread_id=thread_of(a, meta),
        langgraph_node=lg_node,
        activates=True,
    )


def _oi_root(a: Mapping[str, Any], name: str) -> Facts | None:
    kind = a.get(OI_KIND)
    if kind not in ("CHAIN", "AGENT"):
        return None
    meta = oi_metadata(a)
    if meta.get("langgraph_node") is not None:
        return None  # a chain inside a node
    graphish = kind == "AGENT" or meta.get("ls_integration") == "langgraph" or name == "LangGraph"
    return Facts(
        ROOT,
        "openinference",
        name=name,
        thread_id=thread_of(a, meta),
        activates=graphish,
        graph_id=name,
    )


def _genai_workflow(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(c.OPERATION) != c.OP_INVOKE_WORKFLOW:
        return None
    workflow = str_or_none(a.get(c.WORKFLOW_NAME)) or suffix(name)
    return Facts(
        ROOT,
        "genai",
        name=workflow,
        thread_id=thread_of(a, None),
        activates=True,
        graph_id=workflow,
        topology=workflow_topology(a),
    )


def _genai_node(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(c.OPERATION) != c.OP_INVOKE_NODE:
        return None
    return Facts(NODE, "genai", name=suffix(name), thread_id=thread_of(a, None), activates=True)


def _genai_agent(a: Mapping[str, Any], name: str) -> Facts | None:
    if a.get(c.OPERATION) != c.OP_INVOKE_AGENT:
        return None
    agent = str_or_none(a.get(c.AGENT_NAME)) or suffix(name)
    return Facts(
        ROOT,
        "genai",
        name=agent,
        thread_id=thread_of(a, None),
        activates=True,
        graph_id=agent,
        topology=workflow_topology(a),
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
    Rule(
        "genai",
        ROOT,
        "`gen_ai.operation.name=invoke_workflow` (the graph: `gen_ai.workflow.name`)",
        _genai_workflow,
        c.OPERATION,
        (c.OP_INVOKE_WORKFLOW,),
    ),
    Rule(
        "genai",
        NODE,
        "`gen_ai.operation.name=invoke_node` (the node: the span name after `invoke_node`)",
        _genai_node,
        c.OPERATION,
        (c.OP_INVOKE_NODE,),
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
    our run root or its start marker, or a span (or the start a marker or Logfire's
    pending span stands for) that begins a foreign run."""
    attrs = record.attributes
    if c.TURN_ID in attrs:
        return True
    if is_marker(attrs):
        started = started_span(record)
        if started is None:
            return False
        record = started
        if c.TURN_ID in record.attributes:
            return True
    facts = classify(record)
    return facts is not None and facts.activates
