"""The turn record's client-tool rounds, written with a paused run's end
(relay.turns.run_end.end_changes, relay.turns.response.client_tool_round)."""

from __future__ import annotations

from typing import Any

import pytest

from relay.turns.response import ChatResponse, client_tool_round
from relay.turns.run_end import Outcome, end_changes


def paused(*values: Any) -> ChatResponse:
    return ChatResponse(
        thread_id="th",
        turn_id="t1",
        trace_id="a" * 32,
        status="paused",
        interrupts=[{"id": f"i{n}", "value": v} for n, v in enumerate(values)],
    )


def call(round_: Any) -> dict[str, Any]:
    return {"type": "client_tool", "name": "local_time", "call_id": "c", "round": round_}


@pytest.mark.parametrize(
    ("values", "rounds"),
    [
        ([call(2)], 2),
        ([call(1), call(3), {"type": "approval"}], 3),  # the highest of the pause's calls
        ([{"type": "approval", "round": 9}], 0),  # not a client tool: its 'round' is not one
        ([call(None), call("x"), "a bare value"], 0),  # unreadable rounds count as none
        ([], 0),
    ],
)
def test_the_round_of_a_pause(values: list[Any], rounds: int) -> None:
    assert client_tool_round(paused(*values).interrupts) == rounds


def test_a_pause_on_client_tools_records_its_round_and_any_other_leaves_it() -> None:
    changes = end_changes(Outcome(paused(call(2))), last_seq=7, shutting_down=False)
    assert changes["status"] == "paused" and changes["client_tool_round"] == 2
    approval = end_changes(Outcome(paused({"type": "approval"})), 9, False)
    assert "client_tool_round" not in approval  # the count the turn has stays
    answered = ChatResponse(
        thread_id="th",
        turn_id="t1",
        trace_id="a" * 32,
        status="answered",
        interrupts=[{"value": call(4)}],
    )
    assert "client_tool_round" not in end_changes(Outcome(answered), 11, False)
