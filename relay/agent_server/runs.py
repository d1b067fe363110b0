"""A span-relay turn as LangGraph's ``Run`` (langgraph_sdk.schema.Run), for the runs routes
(relay/http/agent_server_runs.py).

A run is a turn: its ``run_id`` is the turn id. A ``command.resume`` goes on with the paused
turn (its run id is that turn's), so a thread's runs are its turns, each once, newest
first. The status, as LangGraph's worker sets it:

- ``running`` while the turn runs (the relay has no queue: a run starts when it is
  accepted, so it is never ``pending``);
- ``success`` for a turn that answered or refused, and for one that paused on
  ``interrupt()`` (LangGraph's run succeeded; its thread is ``interrupted``);
- ``interrupted`` for a cancelled turn (LangGraph's cancel with ``action=interrupt``);
- ``timeout`` for a turn that ran past its time (``turn_timeout``);
- ``error`` for a failed turn, and for one its process died under that was not taken up
  again (``interrupted`` in the relay's own turn API).

What the relay does not keep of a run: its request (``kwargs``: its input, stream modes,
config) and its ``metadata``: both are ``{}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from relay.agent_server.assistants import assistant_id_of
from relay.agent_server.threads import iso
from relay.turns.records import TurnRecord

#: a turn's status as a LangGraph run's
RUN_STATUS = {
    "running": "running",
    "paused": "success",
    "answered": "success",
    "refused": "success",
    "cancelled": "interrupted",
    "error": "error",
    "interrupted": "error",
}
#: the run statuses a list may be filtered by
STATUSES = ("pending", "running", "error", "success", "timeout", "interrupted")


def run_status(record: TurnRecord) -> str:
    """The turn's status as LangGraph's run status (see the module docstring)."""
    if record.status == "error" and _error_code(record) == "turn_timeout":
        return "timeout"
    return RUN_STATUS.get(record.status, "error")


def _error_code(record: TurnRecord) -> str | None:
    try:
        response = json.loads(record.response) if record.response else None
    except ValueError:
        return None
    error = response.get("error") if isinstance(response, Mapping) else None
    return error.get("code") if isinstance(error, Mapping) else None


def run_json(record: TurnRecord) -> dict[str, Any]:
    """The turn as LangGraph's ``Run``."""
    graph = record.graph
    updated = record.ended_at or record.paused_at or record.started_at
    return {
        "run_id": record.turn_id,
        "thread_id": record.thread_id,
        "assistant_id": assistant_id_of(graph) if graph else None,
        "created_at": iso(record.started_at),
        "updated_at": iso(updated),
        "status": run_status(record),
        "metadata": {},
        "kwargs": {},
        "multitask_strategy": "reject",
    }


def run_terminal(status: str) -> bool:
    """Whether a run in LangGraph's ``status`` has ended (a join answers)."""
    return status not in ("pending", "running")
