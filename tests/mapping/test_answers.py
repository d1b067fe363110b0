"""The answer of a run another instrumentation traced, from every message format its root's
output holds (relay/mapping/answers.py)."""

from __future__ import annotations

import json

import pytest

from relay.mapping.answers import answer_of

AI = "It is sunny in Paris."


@pytest.mark.parametrize(
    "output",
    [
        {
            "messages": [
                {"type": "human", "data": {"content": "Weather?"}},
                {"type": "ai", "data": {"content": AI, "tool_calls": []}},
            ]
        },  # message_to_dict
        {
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": AI},
            ]
        },
        {
            "messages": [
                {
                    "type": "ai",
                    "content": [
                        {"type": "text", "text": "It is sunny "},
                        {"type": "text", "text": "in Paris."},
                    ],
                }
            ]
        },
        {
            "outputs": {
                "messages": [
                    {"lc": 1, "type": "constructor", "kwargs": {"content": AI, "type": "ai"}}
                ]
            }
        },
        {"answer": AI},
    ],
)
def test_answers_from_every_message_format(output: dict) -> None:
    assert answer_of({"output.value": json.dumps(output)}) == AI


def test_no_output_is_no_answer() -> None:
    assert answer_of({}) == ""
