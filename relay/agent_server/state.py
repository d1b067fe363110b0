"""A thread as LangGraph's clients read it: a checkpoint as a ``ThreadState`` (the
snapshot of ``graph.aget_state`` / ``aget_state_history``), and a thread's ``status``
from its latest turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from relay.agent_server.jsonable import interrupt_json, jsonable

#: a turn's status -> the thread's (langgraph_sdk.schema.ThreadStatus)
THREAD_STATUS = {
    "running": "busy",
    "paused": "interrupted",
    "error": "error",
    "interrupted": "error",
}


def thread_status(turn_status: str | None) -> str:
    """``idle``, ``busy``, ``interrupted`` or ``error``, from the thread's latest turn
    (no turn, or one that answered, refused or was cancelled: ``idle``)."""
    return THREAD_STATUS.get(turn_status or "", "idle")


def checkpoint_of(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A ``RunnableConfig`` of a checkpoint as LangGraph's ``Checkpoint``."""
    if not config:
        return None
    configurable = config.get("configurable") or {}
    return {
        "thread_id": configurable.get("thread_id"),
        "checkpoint_ns": configurable.get("checkpoint_ns", ""),
        "checkpoint_id": configurable.get("checkpoint_id"),
        "checkpoint_map": configurable.get("checkpoint_map"),
    }


def _task(task: Any) -> dict[str, Any]:
    state = task.state
    return {
        "id": task.id,
        "name": task.name,
        "error": None if task.error is None else str(task.error),
        "interrupts": [interrupt_json(i) for i in task.interrupts],
        "checkpoint": checkpoint_of(state) if isinstance(state, Mapping) else None,
        "state": None if state is None or isinstance(state, Mapping) else thread_state(state),
        "result": jsonable(task.result),
    }


def thread_state(snapshot: Any) -> dict[str, Any]:
    """A ``StateSnapshot`` as LangGraph's ``ThreadState``."""
    return {
        "values": jsonable(snapshot.values),
        "next": list(snapshot.next),
        "checkpoint": checkpoint_of(snapshot.config),
        "metadata": jsonable(snapshot.metadata or {}),
        "created_at": snapshot.created_at,
        "parent_checkpoint": checkpoint_of(snapshot.parent_config),
        "tasks": [_task(t) for t in snapshot.tasks],
        "interrupts": [interrupt_json(i) for i in snapshot.interrupts],
    }


def step_updates(tasks: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``updates`` chunks of a finished step, one ``{node: what it wrote}`` per task a
    checkpoint ran next (their results, once the next checkpoint is saved), as LangGraph
    streams them. A task that failed, or was interrupted and not resumed, wrote no update;
    one that was resumed keeps its interrupts and has its result."""
    return [
        {t.name: jsonable(t.result)}
        for t in tasks
        if t.error is None and (t.result is not None or not t.interrupts)
    ]
