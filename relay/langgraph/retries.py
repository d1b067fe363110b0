"""LangGraph's ``RetryPolicy``, read ahead: will a node's failed attempt be run again?

LangGraph retries a node whose ``RetryPolicy`` matches the exception it raised, up to the
policy's ``max_attempts`` (``langgraph.pregel._retry``): the first policy whose
``retry_on`` matches decides, the node's own policies before the graph's. Such an attempt
is no failure of the turn: its node span ends ``retrying`` (relay.node.outcome), the next
attempt's carries ``relay.node.attempt``, and only the last attempt's failure is the
node's. :class:`RetryPolicies` is read once per graph (its nodes and its subgraphs'
nodes, by namespace); the instrumentation asks it as an attempt fails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (the enclosing nodes' names, the node's name) -> its retry policies, in LangGraph's order
Key = tuple[tuple[str, ...], str]


class RetryPolicies:
    """The retry policies of a compiled graph's nodes, its subgraphs' included."""

    def __init__(self, graph: Any) -> None:
        self._policies: dict[Key, tuple[Any, ...]] = {}
        self._read((), graph)
        try:
            subgraphs = list(graph.get_subgraphs(recurse=True))
        except Exception:  # a graph that cannot list them: its own nodes only
            subgraphs = []
        for namespace, subgraph in subgraphs:
            self._read(tuple(part for part in str(namespace).split("|") if part), subgraph)

    def _read(self, namespace: tuple[str, ...], graph: Any) -> None:
        nodes = getattr(graph, "nodes", None)
        default = _policies(getattr(graph, "retry_policy", None))
        if not isinstance(nodes, Mapping):
            return
        for name, node in nodes.items():
            own = _policies(getattr(node, "retry_policy", None))
            if own or default:
                self._policies[(namespace, str(name))] = own or default

    def __bool__(self) -> bool:
        return bool(self._policies)

    def of(self, namespace: Sequence[str], node: str) -> tuple[Any, ...]:
        """The policies of ``node`` in ``namespace`` (none: ``()``)."""
        return self._policies.get((tuple(namespace), node), ())


def will_retry(policies: Sequence[Any], error: BaseException, attempt: int) -> bool:
    """Whether LangGraph runs a node again after its ``attempt``-th attempt (1-based)
    raised ``error``, under ``policies``."""
    if not isinstance(error, Exception):
        return False
    for policy in policies:
        if _retries_on(policy, error):
            return attempt < int(getattr(policy, "max_attempts", 1))
    return False


def _retries_on(policy: Any, error: Exception) -> bool:
    """``langgraph.pregel._retry._should_retry_on``'s rule (a class, classes, or a
    predicate); a predicate that raises matches nothing."""
    retry_on: Any = getattr(policy, "retry_on", None)
    try:
        if isinstance(retry_on, Sequence):
            return isinstance(error, tuple(retry_on))
        if isinstance(retry_on, type) and issubclass(retry_on, Exception):
            return isinstance(error, retry_on)
        if callable(retry_on):
            return bool(retry_on(error))
    except Exception:
        return False
    return False


def _policies(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, Sequence):
        return tuple(value)
    return (value,)
