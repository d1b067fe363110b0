"""relay/json_depth.py: the bracket scan agrees with the depth of the parsed value (brackets
in strings and escapes do not count), the limit is exact, and ``loads`` refuses a text
past it before parsing, in any of the encodings ``json.loads`` reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.json_depth import MAX_DEPTH, TooDeep, loads, too_deep


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def test_the_limit_is_exact() -> None:
    assert not too_deep("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert too_deep("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert loads('{"a": ' * (MAX_DEPTH - 1) + "{}" + "}" * (MAX_DEPTH - 1)) is not None
    with pytest.raises(TooDeep):
        loads(b"[" * 10_000 + b"]" * 10_000)


def test_brackets_in_strings_do_not_count() -> None:
    text = json.dumps(["[" * 5_000, '\\"[[[', "{" * 300])
    assert not too_deep(text)
    assert loads(text)[0] == "[" * 5_000


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16-le", "utf-16-be", "utf-32"])
def test_bytes_in_each_encoding(encoding: str) -> None:
    deep = ("[" * 200 + "]" * 200).encode(encoding)
    with pytest.raises(TooDeep):
        loads(deep)
    assert loads('["≛[", 1]'.encode(encoding)) == ["≛[", 1]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab≛', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(value=json_values, limit=st.integers(min_value=0, max_value=6))
def test_scan_agrees_with_parsed_depth(value: Any, limit: int) -> None:
    assert too_deep(json.dumps(value), limit) == (depth(value) > limit)
