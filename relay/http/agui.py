"""``POST /agui``: any GraphAgent as an AG-UI 1.0 endpoint (``@ag-ui/client``'s HttpAgent).

The body is AG-UI's ``RunAgentInput`` (validated with the ``ag-ui-protocol`` models):
``threadId`` is our thread, ``messages``' last user message is the turn's message, and
``resume[]`` answers the interrupts of the thread's paused turn. There is no second agent
path: a run starts exactly as ``POST /chat`` or ``POST /chat/resume`` start theirs
(:meth:`relay.turns.runs.RunManager.start` with :meth:`GraphAgent.chat` or
:meth:`GraphAgent.resume`, whose ``{interrupt_id: answer}`` becomes LangGraph's
``Command(resume=...)``), and the answer is the same turn's log on the bus, written as
AG-UI events by :class:`relay.agui.AGUIEncoder`.

Idempotent runs: the turn of a chat run is ``uuid5(threadId, runId)``, so the same
``(threadId, runId)`` again attaches to that turn (same body) or is a ``409 run_conflict``
(another body); a resume run is keyed by its body's hash, as ``/chat/resume`` is.
``tools`` (frontend tools) reach the graph as ``configurable["client_tools"]``
(:func:`relay.client_tools_of`); a run whose ``role: "tool"`` messages answer the thread's
pending client-tool calls (by ``toolCallId``) resumes that turn, as ``resume[]`` does
(relay/http/agui_tools.py). ``state``, ``context`` and ``forwardedProps`` are accepted
and not used.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import ValidationError
from starlette.responses import Response

from relay import events
from relay.auth import User
from relay.delivery.agui import AGUIEncoder
from relay.delivery.negotiation import SSE
from relay.errors import ApiError
from relay.events import RUN_TERMINAL
from relay.http.agui_tools import agui_entries
from relay.http.chat import (
    configurable_of,
    on_disconnect_of,
)
from relay.http.chat_input import ID, digest
from relay.http.identity import user_of
from relay.http.langgraph_auth import authorize_chat, resume_authorizer
from relay.http.openapi import AGUI_OPENAPI
from relay.http.parts import RelayParts
from relay.http.requests import read_json_object
from relay.langgraph.agent import GraphAgent
from relay.langgraph.client_tool_limits import ClientTools
from relay.turns.admission import Admission, NewTurn, Pending, Resume
from relay.turns.records import TurnRecord, id_key
from relay.turns.recovery import terminal_event
from relay.turns.refusals import Refused

#: the namespace of turn ids derived from AG-UI (threadId, runId) pairs
AGUI_NAMESPACE = uuid.UUID("5b0e7a52-6f3c-4c57-9d8e-2a41c0a9e6b1")
_ACCEPTS = ("text/event-stream", "text/*", "*/*")


def turn_id_for(thread_id: str, run_id: str) -> str:
    """The turn a chat run of AG-UI starts: deterministic, so a retry finds it again, with
    its ids in any spelling (a UUID with or without hyphens, any case)."""
    return uuid.uuid5(AGUI_NAMESPACE, f"{id_key(thread_id)}\n{id_key(run_id)}").hex


def check_accepts(request: Request) -> None:
    """``406`` unless the request accepts ``text/event-stream`` (or says nothing)."""
    accept = request.headers.get("accept", "").lower()
    if accept.strip() and not any(a in accept for a in _ACCEPTS):
        raise ApiError(
            406,
            "not_acceptable",
            "POST /agui answers AG-UI events as text/event-stream; accept it.",
        )


def run_input_of(body: dict[str, Any]) -> Any:
    """The body as AG-UI's ``RunAgentInput``, its ``threadId`` and ``runId`` checked."""
    run_input = _run_input(body)
    if not ID.match(run_input.thread_id):
        raise ApiError(
            422,
            "invalid_thread_id",
            "'threadId' must be 1-128 characters of letters, digits, '_', '-', '.', ':'.",
        )
    run_id = run_input.run_id
    if not run_id or len(run_id) > 256:
        raise ApiError(422, "invalid_run_id", "'runId' must be 1-256 characters.")
    return run_input


class AguiRoute:
    """``POST /agui`` of ``agent``: ``RunAgentInput`` read, the run admitted
    (``admission``, shared with ``/chat``: duplicates attach, never rerun), AG-UI events
    out. ``tools``: the graph's client-executed tools (a run's limits)."""

    def __init__(
        self, relay: RelayParts, agent: GraphAgent, admission: Admission, tools: ClientTools
    ) -> None:
        self.relay = relay
        self.agent = agent
        self.admission = admission
        self.tools = tools

    def add_to(self, router: APIRouter, dependencies: Sequence[Any]) -> None:
        """Put the route on ``router``, behind ``dependencies`` (each a ``Depends``)."""
        router.add_api_route(
            "/agui",
            self.agui,
            methods=["POST"],
            dependencies=list(dependencies),
            tags=["agui"],
            openapi_extra=AGUI_OPENAPI,
            summary=f"Run {self.agent.name} for an AG-UI client",
        )

    async def agui(self, request: Request) -> Response:
        """Run the agent for an AG-UI client: ``RunAgentInput`` in, AG-UI events out."""
        agent = self.agent
        user = user_of(request)
        check_accepts(request)
        run_input = run_input_of(
            await read_json_object(request, self.relay.settings.max_body_bytes)
        )
        thread_id = run_input.thread_id
        run_id = run_input.run_id
        configurable = self.tools.configure(
            configurable_of(agent, request, user), tools=run_input.tools
        )
        entries = list(run_input.resume or ()) or await agui_entries(
            self.relay, agent, thread_id, run_input.messages, user
        )  # frontend tools
        if entries:
            return await self.resume(request, thread_id, run_id, entries, configurable, user)
        message = _last_user_message(run_input.messages)
        fingerprint = run_input.model_dump(mode="json", by_alias=True, exclude_none=True)
        fingerprint.update(threadId=id_key(thread_id), runId=id_key(run_id))  # any spelling
        return await self.chat(
            request, thread_id, run_id, message, digest({"agui": fingerprint}), configurable, user
        )

    async def chat(
        self,
        request: Request,
        thread_id: str,
        run_id: str,
        message: str,
        request_hash: str,
        configurable: dict[str, Any],
        user: User | None,
    ) -> Response:
        """A chat run: the turn ``(threadId, runId)`` names, started or attached to."""
        turn_id = turn_id_for(thread_id, run_id)
        # LangGraph's Auth: threads.create (a new thread), then threads.create_run
        run_kwargs = {"input": {"message": message}}
        await authorize_chat(self.relay, request, self.agent.name, thread_id, turn_id, run_kwargs)
        admitted = await self.admission.chat(
            NewTurn(
                message=message,
                request_hash=request_hash,
                configurable=configurable,
                user=user,
                turn_id=turn_id,
                thread_id=thread_id,
                conflict=Refused(
                    "conflict",
                    "run_conflict",
                    f"Run {run_id} of thread {thread_id} exists with a "
                    "different input; send a new runId for a new run.",
                ),
                resume_hint="answer its interrupts with resume[] first",
            )
        )
        return await self.answer(request, admitted.record, admitted.after, run_id)

    async def resume(
        self,
        request: Request,
        thread_id: str,
        run_id: str,
        entries: list[Any],
        configurable: dict[str, Any],
        user: User | None,
    ) -> Response:
        """A resume run: ``resume[]`` (or the tool messages) answer the interrupts of the
        thread's latest turn."""
        wire = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in entries]

        def request_hash(record: TurnRecord) -> str:
            return digest(
                {
                    "thread_id": id_key(record.thread_id),
                    "turn_id": record.turn_key,
                    "agui_run_id": id_key(run_id),
                    "resume": wire,
                }
            )

        admitted = await self.admission.resume(
            Resume(
                thread_id=thread_id,
                turn_id=None,  # the thread's latest turn
                answer=lambda pending: _resume_answers(entries, pending),
                request_hash=request_hash,
                configurable=configurable,
                user=user,
                authorize=resume_authorizer(
                    self.relay,
                    request,
                    self.agent.name,
                    wire,
                    ApiError(404, "unknown_thread", f"Thread {thread_id} has no run to resume."),
                ),
            )
        )
        return await self.answer(request, admitted.record, admitted.after, run_id, admitted.pending)

    async def answer(
        self,
        request: Request,
        record: TurnRecord,
        after: int,
        run_id: str,
        pending: Sequence[Pending] | None = None,
    ) -> Response:
        """The run's events as AG-UI: live from the bus, or its outcome when over."""
        relay = self.relay
        interrupts = (
            [{"id": p.id, "value": p.value} for p in pending]
            if pending is not None
            else _answered_interrupts(relay, record.turn_id, after)
        )
        encoder = AGUIEncoder(thread_id=record.thread_id, run_id=run_id, interrupts=interrupts)
        if relay.runs.running(record.turn_id) or relay.bus.has_turn(record.turn_id):
            return relay.streams.live(
                record.turn_id,
                after,
                SSE,
                stop_at=RUN_TERMINAL,
                on_disconnect=on_disconnect_of(request),
                encoder=encoder,
            )
        latest = await relay.turns.get(record.turn_id) or record
        return relay.streams.outcome(terminal_event(latest, after), after, SSE, encoder=encoder)


def agui_router(
    relay: RelayParts,
    agent: GraphAgent,
    admission: Admission,
    dependencies: list[Any],
    tools: ClientTools,
) -> APIRouter:
    """The agent's ``POST /agui`` (include it with a prefix): ``RunAgentInput`` read, the
    run admitted (``admission``, shared with ``/chat``: duplicates attach, never rerun),
    AG-UI events out. ``tools``: the graph's client-executed tools (a run's limits, the
    frontend tools' answers)."""
    router = APIRouter()
    AguiRoute(relay, agent, admission, tools).add_to(router, [Depends(d) for d in dependencies])
    return router


def _answered_interrupts(relay: RelayParts, turn_id: str, after: int) -> list[dict[str, Any]]:
    """The interrupts a resume run answered: its previous run's ``paused`` event, the
    event at ``after`` (where a tool call's arguments come from on a re-attach)."""
    if after <= 0:
        return []
    try:
        reader = relay.bus.reader(turn_id, after - 1)
        try:
            previous = reader.take(1)
        finally:
            reader.close()
    except Exception:  # retention dropped it: the arguments are then unknown
        return []
    if previous and previous[0].type == events.PAUSED:
        interrupts = previous[0].fields.get("interrupts")
        return interrupts if isinstance(interrupts, list) else []
    return []


def _run_input(body: dict[str, Any]) -> Any:
    from ag_ui.core import RunAgentInput

    try:
        return RunAgentInput.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        detail = f" ({where}: {errors[0]['msg']})" if where else ""
        raise ApiError(
            422, "invalid_run_input", f"The body is not an AG-UI RunAgentInput{detail}."
        ) from None


def _last_user_message(messages: Sequence[Any]) -> str:
    """The text of the last user message that has text (text parts joined; media parts
    are ignored)."""
    for message in reversed(messages):
        if getattr(message, "role", None) != "user":
            continue
        content = message.content
        if isinstance(content, str):
            text = content
        else:
            text = "".join(
                getattr(part, "text", "")
                for part in content
                if getattr(part, "type", None) == "text"
            )
        if text.strip():
            return text
    raise ApiError(
        422,
        "invalid_message",
        "'messages' must end with a user message that has text: it is the turn's message.",
    )


def _resume_answers(entries: Sequence[Any], pending: Sequence[Pending]) -> dict[str, Any]:
    """AG-UI resume entries as our ``{interrupt_id: answer}``. A cancelled approval is a
    rejection; the answers are then checked as ``/chat/resume`` checks them."""
    known = {p.id: p.value for p in pending}
    answers: dict[str, Any] = {}
    for entry in entries:
        if entry.interrupt_id not in known:
            raise ApiError(
                422,
                "invalid_resume",
                f"resume[] answers interrupt "
                f"{entry.interrupt_id}, which this thread does not wait on "
                f"(it waits on: {', '.join(sorted(known)) or 'nothing'}).",
            )
        if entry.status == "cancelled":
            value = known[entry.interrupt_id]
            kind = value.get("type") if isinstance(value, dict) else None
            answers[entry.interrupt_id] = (
                {"approved": False, "comment": "Cancelled by the client."}
                if kind == "approval"
                else {"error": "Cancelled by the client.", "token": value.get("token")}
                if kind == "client_tool" and isinstance(value, dict)
                else None
            )
        else:
            answers[entry.interrupt_id] = entry.payload
    if not answers:
        raise ApiError(422, "invalid_resume", "resume[] is empty.")
    return answers
