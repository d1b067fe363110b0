"""A resume's answers checked against the thread's pending interrupts (DESIGN.md §5): at
most one answer per interrupt, an approval answered with ``{"approved": bool}``, a
human-in-the-loop request (LangChain's middleware) with one allowed decision per action.
A bad answer is a ``422 invalid_resume`` that says what is expected."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from relay.errors import ApiError

if TYPE_CHECKING:
    from relay.langgraph.agent import PendingInterrupt

_DECISIONS = ("approve", "edit", "reject")


def match_interrupts(resume: Any, pending: Sequence[PendingInterrupt]) -> dict[str, Any]:
    """The resume payload as ``{interrupt_id: answer}``, checked against what is pending:
    at most one answer per interrupt, for any of them (as LangGraph takes it: the
    interrupts left unanswered stay pending, and the turn pauses again on them); an
    approval (``{"type": "approval"}``) is answered with ``{"approved": bool}``, a
    human-in-the-loop request (``action_requests``) with one allowed decision per action."""
    ids = {p.id for p in pending}
    if isinstance(resume, dict) and resume and set(resume) <= ids:
        answers = dict(resume)
    elif len(pending) == 1:
        answers = {pending[0].id: resume}
    else:
        raise ApiError(
            422,
            "invalid_resume",
            "This turn waits on several interrupts; send "
            "'resume' as {interrupt_id: answer} for one or more of: "
            f"{', '.join(sorted(ids))}.",
        )
    for item in pending:
        if item.id in answers:
            check_answer(item.value, answers[item.id])
    return answers


def check_answer(value: Any, answer: Any) -> None:
    """One answer checked against the interrupt's ``value`` (an approval, a
    human-in-the-loop request; any other value takes any answer)."""
    if not isinstance(value, Mapping):
        return
    if value.get("type") == "approval":
        if not isinstance(answer, dict) or not isinstance(answer.get("approved"), bool):
            raise ApiError(
                422,
                "invalid_resume",
                "An approval is answered with "
                '{"approved": true} or {"approved": false, "comment": "..."}.',
            )
        if "comment" in answer and not isinstance(answer["comment"], str):
            raise ApiError(422, "invalid_resume", "'comment' must be a string.")
    requests = value.get("action_requests")
    if isinstance(requests, list):
        _check_decisions(value, requests, answer)


def _check_decisions(value: Mapping[str, Any], requests: list[Any], answer: Any) -> None:
    """LangChain's human-in-the-loop middleware: ``{"decisions": [...]}``, one per action
    request, each of a type its review config allows."""
    decisions = answer.get("decisions") if isinstance(answer, dict) else None
    if not isinstance(decisions, list) or len(decisions) != len(requests):
        raise ApiError(
            422,
            "invalid_resume",
            f"This interrupt asks for {len(requests)} "
            'decision(s): answer {"decisions": [{"type": "approve"}, ...]}, one '
            "per action request, in order.",
        )
    allowed = {
        str(r.get("action_name")): r.get("allowed_decisions") or list(_DECISIONS)
        for r in value.get("review_configs") or []
        if isinstance(r, Mapping)
    }
    for request, decision in zip(requests, decisions, strict=True):
        kind = decision.get("type") if isinstance(decision, dict) else None
        name = str(request.get("name")) if isinstance(request, Mapping) else ""
        ok = allowed.get(name, list(_DECISIONS))
        if kind not in ok:
            raise ApiError(
                422,
                "invalid_resume",
                f"The decision on {name or 'an action'} "
                f"must be one of {', '.join(ok)}, not {kind!r}.",
            )
