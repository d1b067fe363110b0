"""A foreign resume, linked to the turn it resumes.

Our own resume says which turn it continues (``relay.turn.id`` on its root). Another
instrumentation's resume is a new trace that says nothing of the kind, but its spans let
it be known: it runs on the thread of a turn that paused, and either its input is a
resume command (LangGraph's ``Command(resume=...)``, which OpenInference writes as
``input.value`` and OpenLLMetry as ``traceloop.entity.input``) or it runs one of the
tasks that paused again (LangGraph reruns the interrupted task under the same task id,
so its ``langgraph_checkpoint_ns`` matches). Such a run continues the paused turn: same
turn id, ``run_kind`` ``resume``, the same discovered graph, and ``human_wait_ms`` on its
``turn_completed``. Anything else on that thread is a new turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from relay.mapping.attributes import json_attr
from relay.mapping.facts import Facts
from relay.mapping.foreign_attributes import OI_INPUT, TL_INPUT
from relay.mapping.state import MappingState, Run
from relay.spans import SpanRecord


def link_resume(state: MappingState, run: Run, record: SpanRecord, facts: Facts) -> None:
    """Make ``run`` the resume of its thread's paused foreign turn, when it is one."""
    if not run.thread_id or not state.paused:
        return
    paused = state.paused.get(run.thread_id)
    if paused is None:
        return
    task = top_task(facts.task)
    if not (is_resume_input(record.attributes) or (task is not None and task in paused.tasks)):
        return
    del state.paused[run.thread_id]
    run.turn_id = paused.turn_id
    run.kind = "resume"
    run.discovery = paused.discovery
    run.paused_ns = paused.paused_ns
    run.message = paused.message
    run.topology = run.topology or paused.topology
    run.graph_id = run.graph_id or paused.graph_id


def awaits_resume(state: MappingState, thread_id: str | None, attrs: Mapping[str, Any]) -> bool:
    """A foreign root on a thread whose turn is paused, that carries no input (GenAI's
    ``invoke_agent`` as OpenLLMetry writes it): whether it resumes is for its first node
    to say."""
    return (
        bool(thread_id)
        and thread_id in state.paused
        and not any(key in attrs for key in (OI_INPUT, TL_INPUT))
    )


def top_task(task: str | None) -> str | None:
    """The top-level task of a checkpoint namespace: ``"review:t1|check:t2"`` ->
    ``"review:t1"``."""
    return task.split("|", 1)[0] if task else None


def is_resume_input(attrs: Mapping[str, Any]) -> bool:
    """True when the span's input is a LangGraph ``Command`` that resumes."""
    for key in (OI_INPUT, TL_INPUT):
        value, _ = json_attr(attrs, key, None)
        if isinstance(value, dict) and isinstance(value.get("inputs"), dict):
            value = value["inputs"]  # OpenLLMetry: {"inputs": ..., "tags": ...}
        if isinstance(value, dict) and value.get("resume") is not None and "goto" in value:
            return True
    return False
