"""Where a span sits in the graph: the node it runs in, and the nodes around that one.

Our spans say what they are at start (a node span carries ``relay.node.name`` and
``relay.node.namespace``), so a child's node is its nearest node ancestor. Spans of
another instrumentation may say it only at their end (OpenInference in-process): until
then an open span that no rule recognised is a *maybe node*. Two things settle one:

- its own end, when a rule then recognises it as a node (``metadata.langgraph_node`` equal
  to its name), or not;
- the end of a descendant whose LangGraph metadata names the node it runs in and the
  checkpoint namespace (``"outer:t1|inner:t2"``): the enclosing maybe nodes named so, top
  down, are those nodes (:func:`claim_nodes`). So a node is known, and its
  ``node_started`` sent, before anything inside it, and a node span whose task an
  enclosing node already has (a compiled subgraph's own chain, named like the node) is
  an ordinary span, never a second node.

Events of a span whose node is not settled yet (``tool_started``, ``tool_completed``,
``text_delta``) wait under the nearest maybe node (:class:`~relay.mapping.state.Held`)
and go out, in their order, with their node's name, once it is settled (:func:`release`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay import conventions as c
from relay.events import Event
from relay.json_depth import loads as json_loads  # too deep: a ValueError, as unreadable
from relay.mapping import state as bounds
from relay.mapping.attributes import task_id_of
from relay.mapping.facts import NODE, ROOT, Facts
from relay.mapping.state import Held, MappingState, Open, Run
from relay.mapping.summary import claim
from relay.spans import SpanRecord

#: how far up a parent chain is followed (a guard against malformed, cyclic parents)
MAX_DEPTH = 256


def place(state: MappingState, run: Run, span_id: str | None) -> tuple[Open | None, str | None]:
    """The node of whatever sits under ``span_id`` (itself included), as ``(node, anchor)``:
    ``(node or None, None)`` when settled (None: outside any node), ``(None, anchor)``
    while ``anchor``, a maybe node on the way up, may still turn out to be the node."""
    sid = span_id
    for _ in range(MAX_DEPTH):
        if sid is None or sid == run.root_span_id:
            return None, None
        opened = state.spans.get(sid)
        if opened is None:
            return None, None
        if opened.is_node:
            return opened, None
        if opened.maybe_node:
            return None, sid
        sid = opened.parent
    return None, None


def enclosing(state: MappingState, run: Run, span_id: str | None) -> Open | None:
    """The nearest known node at or above ``span_id`` (maybe nodes passed over)."""
    sid = span_id
    for _ in range(MAX_DEPTH):
        if sid is None or sid == run.root_span_id:
            return None
        opened = state.spans.get(sid)
        if opened is None:
            return None
        if opened.is_node:
            return opened
        sid = opened.parent
    return None


def namespace_from_parents(state: MappingState, run: Run, parent_id: str | None) -> list[str]:
    """A node's namespace from the nodes the mapping knows around it, outermost first."""
    outer = enclosing(state, run, parent_id)
    return [*outer.namespace, str(outer.node)] if outer is not None else []


def namespace_attr(attrs: Mapping[str, Any]) -> list[str] | None:
    """``relay.node.namespace``: a string array (a tuple or a list, as OTel gives it) or a
    JSON array in a string; None when absent or unreadable."""
    raw = attrs.get(c.NODE_NAMESPACE)
    if isinstance(raw, str):
        try:
            raw = json_loads(raw) if raw.strip() else []
        except ValueError:
            return None
    if isinstance(raw, list | tuple) and all(isinstance(x, str) for x in raw):
        return list(raw)
    return None


def segments(task: str | None, node: str | None) -> list[tuple[str, str | None]]:
    """LangGraph's checkpoint namespace as ``(node, task)`` pairs, outermost first, each
    task the namespace up to that node: ``"outer:t1|inner:t2"`` -> ``[("outer",
    "outer:t1"), ("inner", "outer:t1|inner:t2")]``. Without one: the node, task unknown."""
    if not task:
        return [(node, None)] if node else []
    parts = task.split("|")
    return [(part.partition(":")[0], "|".join(parts[: i + 1])) for i, part in enumerate(parts)]


def _named(span_name: str, node: str) -> bool:
    """Whether a span is named for the node: OpenInference uses the node's name,
    OpenLLMetry ``execute_task {node}`` (``{node}.task`` before)."""
    return span_name in (node, f"{node}.task") or span_name.partition(" ")[2] == node


def _matches(opened: Open, node: str, task: str | None) -> bool:
    if opened.task is not None and task is not None:
        return opened.task == task
    return opened.node == node


#: a node just recognised: (its open span, its span id, step, task id)
Claimed = tuple[Open, str, Any, Any]


def claim_nodes(
    state: MappingState,
    run: Run,
    parent_id: str | None,
    where: list[tuple[str, str | None]],
    step: Any,
    own: tuple[str, Open] | None = None,
) -> list[Claimed]:
    """Recognise the nodes that ``where`` (a span's :func:`segments`) names among the
    maybe nodes above the span (and the span itself, ``own``, for its last segment),
    outermost first. ``step`` is the innermost node's. Returns those newly recognised."""
    chain: list[tuple[str, Open]] = []
    sid = parent_id
    for _ in range(MAX_DEPTH):
        if sid is None or sid == run.root_span_id:
            break
        opened = state.spans.get(sid)
        if opened is None:
            break
        chain.append((sid, opened))
        if opened.is_node:
            break
        sid = opened.parent
    chain.reverse()
    first = 0
    if chain and chain[0][1].is_node:  # the nearest known node: the segments below it
        known = chain.pop(0)[1]
        for i in range(len(where) - 1, -1, -1):
            if _matches(known, *where[i]):
                first = i + 1
                break
    task = where[-1][1] if where else None
    if own is not None and (task is None or run.tasks.get(task) != own[0]):
        chain.append(own)  # (else a child took its task: sent before it, over OTLP, the
        # chain of a subgraph took it for the node; not a second one)
    claimed: list[Claimed] = []
    pos = 0
    for i in range(first, len(where)):
        node, task = where[i]
        last = i == len(where) - 1
        for j in range(pos, len(chain)):
            span_id, opened = chain[j]
            # an enclosing node is a maybe node above, named for it; the span itself (its
            # rule says it is a node) only its own, innermost one
            mine = own is not None and opened is own[1]
            if not opened.is_node and (
                last if mine else opened.maybe_node and _named(opened.name, node)
            ):
                opened.is_node = True
                opened.maybe_node = False
                opened.node = node
                opened.task = task
                opened.namespace = [name for name, _ in where[:i]]
                if task is not None:
                    run.tasks[task] = opened.parent
                claim(state, span_id, opened)
                claimed.append((opened, span_id, step if last else None, task_id_of(task)))
                if i == 0 and task is not None and run.root_span_id is None:
                    run.root_span_id = opened.parent  # a top node's parent: the graph's root
                pos = j + 1
                break
    return claimed


def emit_or_hold(
    state: MappingState,
    run: Run,
    parent_id: str | None,
    type_: str,
    time_ns: int,
    fields: dict[str, Any],
    owner: Open | None = None,
) -> list[Event]:
    """The event of a span under ``parent_id``, with its node's name in ``fields["node"]``
    (kept as given outside any node); held while that node is not settled. ``owner``: the
    node, when known for good (:attr:`Open.owner`). A tentative run sends nothing it
    knows to be outside any node."""
    node, anchor = (owner, None) if owner is not None else place(state, run, parent_id)
    if anchor is not None:
        run.held.append(Held(anchor, type_, time_ns, fields))
        if len(run.held) > bounds.MAX_HELD:
            del run.held[0]
        return []
    if node is not None:
        fields["node"] = node.node
    return [run.event(type_, time_ns, fields)] if run.active else []


def release(state: MappingState, run: Run, changed: set[str]) -> list[Event]:
    """The held events whose anchor is among ``changed`` (recognised as a node, or ended as
    none) and whose node is settled now, in their order; the others wait on."""
    if not run.held or not run.active:
        return []
    out: list[Event] = []
    keep: list[Held] = []
    for held in run.held:
        if held.anchor in changed:
            node, anchor = place(state, run, held.anchor)
            if anchor is None:
                if node is not None:
                    held.fields["node"] = node.node
                out.append(run.event(held.type, held.time_ns, held.fields))
                continue
            held.anchor = anchor
        keep.append(held)
    run.held = keep
    return out


def release_all(run: Run) -> list[Event]:
    """What is still held when the run ends: out now, as it is (no node was found)."""
    if not run.held:
        return []
    held = run.held
    run.held = []
    return [run.event(h.type, h.time_ns, h.fields) for h in held] if run.active else []


# -- what a span is, where it sits ---------------------------------------------------


def _inside(state: MappingState, run: Run, parent_span_id: str | None) -> bool:
    """Whether a span with this parent sits under the run's root or one of its nodes."""
    if parent_span_id is None:
        return False
    return parent_span_id == run.root_span_id or place(state, run, parent_span_id)[0] is not None


_OTHER_INSTRUMENTATIONS = frozenset({"openinference", "openllmetry"})


def _ours(state: MappingState, run: Run, parent_id: str | None) -> bool:
    """A span under the run's root or under one of our node spans (or what they hold)."""
    parent = state.spans.get(parent_id or "")
    return parent_id == run.root_span_id or (parent is not None and parent.firm)


def effective(
    state: MappingState, run: Run, record: SpanRecord, facts: Facts | None
) -> Facts | None:
    """Resolve a ``root`` row by where the span sits (see :data:`~relay.mapping.rules.RULES`);
    in a run our instrumentation spans, another instrumentation's span is a plain span (the
    graph is not instrumented twice)."""
    if (
        facts is not None
        and run.instrumented
        and (
            facts.source in _OTHER_INSTRUMENTATIONS
            or facts.role == ROOT
            or not _ours(state, run, record.parent_span_id)
        )
    ):
        return None  # (GenAI spans of theirs too: ours sit under our root or our nodes)
    if facts is None or facts.role != ROOT or facts.source == "relay":
        return facts
    if record.span_id == run.root_span_id:
        return facts
    if _inside(state, run, record.parent_span_id):
        outer = place(state, run, record.parent_span_id)[0]
        if facts.source == "genai" and (outer is None or outer.node != facts.name):
            facts.role = NODE  # a sub-agent (not the run of a subgraph its node is named for)
            return facts
        return None
    if run.foreign and run.root_span_id is None:
        return facts
    return None
