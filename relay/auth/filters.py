"""LangGraph's filter dicts (what an ``@auth.on`` handler may return), matched against the
metadata the relay keeps: exact values, ``$eq``, ``$contains`` (one element, or a subset),
several keys as AND. A filter the relay cannot check (a key it does not keep, an operator
LangGraph does not define) is :class:`UnsupportedFilter`: its caller fails closed, never
open. :func:`matches_metadata` is the Agent Server routes' match against a resource's
whole metadata (any key, and ``$or``/``$and`` too). No LangGraph import: the routes use it
whatever the auth mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: the thread metadata the relay keeps, and so the keys a filter on threads may name
KEPT_METADATA = ("owner", "graph_id", "assistant_id")


class UnsupportedFilter(Exception):
    """A filter the relay cannot check (a key it does not keep, an unknown operator)."""


def matches(
    filters: Mapping[str, Any],
    metadata: Mapping[str, Any],
    keys: Sequence[str] | None = None,
) -> bool:
    """Whether a thread's ``metadata`` passes a LangGraph filter (``{"key": value}``,
    ``{"key": {"$eq": value}}``, ``{"key": {"$contains": value or [values]}}``; several
    keys: all of them). :class:`UnsupportedFilter` for a key the relay does not keep
    (``keys``, by default :data:`KEPT_METADATA`) or an operator LangGraph does not define:
    the caller fails closed."""
    kept = KEPT_METADATA if keys is None else tuple(keys)
    for key, wanted in filters.items():
        if key not in kept:
            raise UnsupportedFilter(
                f"a filter on metadata {key!r}: the relay keeps only {', '.join(kept)}"
            )
        have = metadata.get(key)
        if isinstance(wanted, Mapping):
            for operator, operand in wanted.items():
                if operator == "$eq":
                    if have != operand:
                        return False
                elif operator == "$contains":
                    if not isinstance(have, list | tuple):
                        return False
                    needed = operand if isinstance(operand, list) else [operand]
                    if not all(item in have for item in needed):
                        return False
                else:
                    raise UnsupportedFilter(f"a filter operator {operator!r} on {key!r}")
        elif have != wanted:
            return False
    return True


#: how deep LangGraph lets ``$or``/``$and`` nest in a filter
MAX_FILTER_NESTING = 2


def matches_metadata(filters: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    """Whether a resource's whole ``metadata`` (a thread row's, an assistant's) passes a
    LangGraph filter, as the Agent Server matches one: each key equal (``value`` or
    ``{"$eq": value}``) or holding (``{"$contains": value or [values]}``, a list
    holding each) and present; ``{"$or": [f, g, ...]}`` (at least two) any of them,
    ``{"$and": [...]}`` all, nested at most :data:`MAX_FILTER_NESTING` deep; the keys
    together: all of them. A filter otherwise (:func:`check_filter`) is
    :class:`UnsupportedFilter`, whatever the metadata: the caller fails closed."""
    check_filter(filters)
    return _matches(filters, metadata)


def check_filter(filters: Mapping[str, Any], depth: int = 0) -> None:
    """:class:`UnsupportedFilter` unless ``filters`` is one :func:`matches_metadata`
    can match: any other operator, an ``$or``/``$and`` that is not a list of two
    filters or more, or one nested deeper than LangGraph allows."""
    if depth > MAX_FILTER_NESTING:
        raise UnsupportedFilter(f"a filter nested over {MAX_FILTER_NESTING} levels")
    for key, wanted in filters.items():
        if key in ("$or", "$and"):
            if not isinstance(wanted, list) or len(wanted) < 2:
                raise UnsupportedFilter(f"{key} that is not a list of two filters or more")
            for group in wanted:
                if not isinstance(group, Mapping):
                    raise UnsupportedFilter(f"{key} with a member that is not a filter")
                check_filter(group, depth + 1)
        elif isinstance(wanted, Mapping):
            if len(wanted) != 1:
                raise UnsupportedFilter(f"a filter on {key!r} with {len(wanted)} operators")
            operator = next(iter(wanted))
            if operator not in ("$eq", "$contains"):
                raise UnsupportedFilter(f"a filter operator {operator!r} on {key!r}")


def _matches(filters: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    for key, wanted in filters.items():
        if key in ("$or", "$and"):
            results = [_matches(group, metadata) for group in wanted]
            if not (any(results) if key == "$or" else all(results)):
                return False
            continue
        if key not in metadata:
            return False
        have = metadata[key]
        if isinstance(wanted, Mapping):
            operator, operand = next(iter(wanted.items()))
            if operator == "$eq":
                if have != operand:
                    return False
            elif not isinstance(have, list):  # $contains
                return False
            else:
                needed = operand if isinstance(operand, list) else [operand]
                if not all(item in have for item in needed):
                    return False
        elif have != wanted:
            return False
    return True
