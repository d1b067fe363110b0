"""The other instrumentations' attribute names, and the small readers of their attributes.

OpenInference (``openinference.span.kind``, ``metadata``, ``session.id``, ...), OpenLLMetry
(``traceloop.*``), Logfire (``logfire.span_type``, its pending spans) and the older GenAI
names (``gen_ai.usage.prompt_tokens``, ``gen_ai.workflow.nodes``, ...) are written here
once, as string literals on purpose (as for GenAI in :mod:`relay.conventions`). The rule
table (:mod:`relay.mapping.rules`) reads them to decide what a span is; the engine, the
answers, the summary, the links, the short paths and the phase order reuse the names and
the readers: where a span runs in the graph (:func:`placement`), the topology an agent
declared (:func:`declared_topology`), OpenInference's ``metadata`` (:func:`oi_metadata`), a
span's thread (:func:`thread_of`), a retrieval's documents (:func:`oi_documents`) and
OpenLLMetry's workflow (:func:`workflow_topology`). Pure functions; nothing here keeps
state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay.json_depth import loads as json_loads  # too deep: a ValueError, as unreadable
from relay.mapping.attributes import str_or_none, task_id_of
from relay.mapping.facts import NODE, Facts

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
#: OpenLLMetry's other form: one JSON object, ``{"nodes": [...], "edges": [[[sources],
#: [targets]], ...]}``
GENAI_WORKFLOW_STRUCTURE = "gen_ai.workflow.structure"
GENAI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GENAI_INPUT_MESSAGES = "gen_ai.input.messages"
#: Logfire: a span it exports when a span starts (zero-length, a child of that span,
#: with its start attributes), ``logfire.span_type = "pending_span"``
LF_SPAN_TYPE = "logfire.span_type"
LF_PENDING = "pending_span"
LF_PENDING_PARENT = "logfire.pending_parent_id"  # the started span's parent (16 hex)


def placement(attrs: Mapping[str, Any]) -> Facts | None:
    """Where in the graph a span of another instrumentation runs, when its LangGraph
    metadata says (OpenInference ``metadata``, OpenLLMetry ``traceloop.association.*``):
    ``langgraph_node`` (the node it runs in), ``task`` (``langgraph_checkpoint_ns``),
    ``step``. Any span inside a node says it, a plain chain too; None when none does."""
    if OI_METADATA in attrs:
        meta = oi_metadata(attrs)
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
        thread_id=thread_of(attrs, meta),
        langgraph_node=str(node),
        activates=True,
    )


def declared_topology(attrs: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The topology (and graph id) an agent declared on a span of another instrumentation:
    ``relay.graph.topology`` as an attribute, in OpenInference ``metadata`` or in
    OpenLLMetry's association properties (:func:`relay.langgraph.topology.
    topology_metadata`); ``(None, None)`` when none is there or it cannot be read."""
    meta = oi_metadata(attrs) if OI_METADATA in attrs else {}
    for where, prefix in ((attrs, ""), (meta, ""), (attrs, TL_ASSOC)):
        raw = where.get(prefix + c.GRAPH_TOPOLOGY)
        if raw is None:
            continue
        try:
            value = json_loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None, None
        if isinstance(value, dict) and isinstance(value.get("nodes"), list):
            graph_id = where.get(prefix + c.GRAPH_ID)
            return {"nodes": value["nodes"], "edges": value.get("edges") or []}, str_or_none(
                graph_id
            )
    return None, None


# -- attribute readers ----------------------------------------------------------------


def oi_metadata(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """OpenInference's ``metadata`` attribute as a dict (a mapping, or the JSON text of an
    object); empty when it is missing or cannot be read."""
    raw = attrs.get(OI_METADATA)
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return {}
    try:
        value = json_loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def thread_of(attrs: Mapping[str, Any], meta: Mapping[str, Any] | None) -> str | None:
    """The thread a span runs on: ``thread_id`` in its OpenInference ``metadata`` (``meta``),
    else OpenInference's ``session.id``, OpenLLMetry's associated ``thread_id`` or GenAI's
    conversation id; None when none says."""
    if meta and meta.get("thread_id") is not None:
        return str(meta["thread_id"])
    for key in (OI_SESSION, TL_ASSOC + "thread_id", c.CONVERSATION_ID):
        if attrs.get(key) is not None:
            return str(attrs[key])
    return None


def oi_documents(attrs: Mapping[str, Any]) -> int | None:
    """How many documents an OpenInference retrieval lists (``retrieval.documents.<i>.*``);
    None when it lists none."""
    prefix = "retrieval.documents."
    seen = {key[len(prefix) :].split(".", 1)[0] for key in attrs if key.startswith(prefix)}
    return len(seen) if seen else None


def workflow_topology(attrs: Mapping[str, Any]) -> dict[str, Any] | None:
    """OpenLLMetry's LangGraph topology as a topology: ``gen_ai.workflow.structure`` (one
    JSON object: ``nodes``, and ``edges`` as ``[[sources], [targets]]`` pairs), else
    ``gen_ai.workflow.nodes`` / ``.edges`` ("a -> b"); None when neither is there or can
    be read. Nodes an edge names that the list leaves out (``__start__``, ``__end__``) are
    added, ``__start__`` first and the others last."""
    pairs: list[tuple[str, str]] = []
    raw = attrs.get(GENAI_WORKFLOW_STRUCTURE)
    if raw is not None:
        try:
            value = json_loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return None
        if not isinstance(value, Mapping) or not isinstance(value.get("nodes"), list):
            return None
        nodes = [str(n) for n in value["nodes"]]
        for edge in value.get("edges") or ():
            if isinstance(edge, list | tuple) and len(edge) == 2:
                sources, targets = (e if isinstance(e, list | tuple) else [e] for e in edge)
                pairs += [(str(s), str(t)) for s in sources for t in targets]
    else:
        listed = attrs.get(GENAI_WORKFLOW_NODES)
        if not isinstance(listed, list | tuple) or not listed:
            return None
        nodes = [str(n) for n in listed]
        for text in attrs.get(GENAI_WORKFLOW_EDGES) or ():
            source, sep, target = str(text).partition("->")
            if sep:
                pairs.append((source.strip(), target.strip()))
    if not nodes:
        return None
    for source, target in pairs:
        for node in (source, target):
            if node in nodes:
                continue
            if node == "__start__":
                nodes.insert(0, node)
            else:
                nodes.append(node)
    return {
        "nodes": [{"id": n, "label": n} for n in nodes],
        "edges": [{"source": s, "target": t, "conditional": False} for s, t in pairs],
    }
