"""LangGraph's filter dicts as the relay matches them against a thread's metadata: exact
values, ``$eq``, ``$contains`` (one element, or a subset), several keys as AND; a key the
relay does not keep or an unknown operator cannot be checked (the caller fails closed)."""

from __future__ import annotations

from typing import Any

import pytest

from relay.auth.filters import UnsupportedFilter, matches, matches_metadata

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


#: a thread row's whole metadata, as the Agent Server routes match it
ROW = {"owner": "alice", "project": "apollo", "tags": ["a", "b"], "n": 1}


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({}, True),
        ({"project": "apollo", "owner": {"$eq": "alice"}}, True),
        ({"project": "gemini"}, False),
        ({"missing": None}, False),  # a key the metadata lacks: no match, even for None
        ({"tags": {"$contains": "a"}}, True),
        ({"tags": {"$contains": ["a", "b"]}}, True),
        ({"tags": {"$contains": ["a", "c"]}}, False),
        ({"$or": [{"owner": "bob"}, {"project": "apollo"}]}, True),
        ({"$or": [{"owner": "bob"}, {"project": "gemini"}]}, False),
        ({"$and": [{"owner": "alice"}, {"n": 1}]}, True),
        ({"$and": [{"owner": "alice"}, {"n": 2}]}, False),
        ({"$or": [{"owner": "bob"}, {"n": 1}], "project": "gemini"}, False),
        ({"$or": [{"$and": [{"owner": "alice"}, {"n": 1}]}, {"owner": "bob"}]}, True),
    ],
)
def test_filters_on_a_thread_rows_metadata(filters: dict[str, Any], expected: bool) -> None:
    assert matches_metadata(filters, ROW) is expected


@pytest.mark.parametrize(
    "filters",
    [
        {"owner": {"$regex": "a.*"}},
        {"owner": {"$eq": "alice", "$ne": "bob"}},
        {"$or": [{"owner": "alice"}]},  # fewer than two
        {"$and": "owner"},
        {"$or": [{"owner": "bob"}, {"$or": [{"n": 1}, {"$or": [{"n": 1}, {"n": 2}]}]}]},
        # checked whole: an earlier key that fails does not hide a later one's operator
        {"owner": "bob", "project": {"$in": ["apollo"]}},
    ],
)
def test_a_filter_the_agent_server_would_not_apply_is_refused(filters: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedFilter):
        matches_metadata(filters, ROW)
