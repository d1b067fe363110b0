"""LangGraph's filter dicts as the relay matches them against a thread's metadata: exact
values, ``$eq``, ``$contains`` (one element, or a subset), several keys as AND; a key the
relay does not keep or an unknown operator cannot be checked (the caller fails closed)."""

from __future__ import annotations

from typing import Any

import pytest

from relay.auth.filters import UnsupportedFilter, matches

THREAD = {"owner": "alice", "graph_id": "agent", "assistant_id": "agent"}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, True),
        ({"owner": "alice"}, True),
        ({"owner": "bob"}, False),
        ({"owner": {"$eq": "alice"}}, True),
        ({"owner": {"$eq": "bob"}}, False),
        ({"owner": "alice", "graph_id": "agent"}, True),
        ({"owner": "alice", "graph_id": "other"}, False),
        ({"owner": {"$contains": "alice"}}, False),  # a string is not a list
    ],
)
def test_filters_on_a_thread(filters: dict[str, Any], expected: bool) -> None:
    assert matches(filters, THREAD) is expected


def test_contains_on_a_list_value() -> None:
    metadata = {"owner": ["alice", "bob"]}
    assert matches({"owner": {"$contains": "bob"}}, metadata)
    assert matches({"owner": {"$contains": ["bob", "alice"]}}, metadata)
    assert not matches({"owner": {"$contains": ["bob", "carol"]}}, metadata)


def test_a_thread_without_an_owner_matches_no_owner_filter() -> None:
    assert not matches({"owner": "alice"}, {"graph_id": "agent"})


@pytest.mark.parametrize(
    "filters",
    [{"tenant": "acme"}, {"owner": {"$ne": "bob"}}, {"owner": "alice", "org": "x"}],
)
def test_what_cannot_be_checked_is_unsupported(filters: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFilter):
        matches(filters, THREAD)
