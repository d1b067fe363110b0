"""What a run request says, checked: its fields (an unknown one, a ``threadId`` typo say,
is refused, not ignored), ids, the message or the graph's own input, the idempotency
fingerprint. Every bad field is a 422 with a message that names it (DESIGN.md §5).
:func:`chat_body` and :func:`resume_body` check a whole ``/chat`` and ``/chat/resume``
body. The resume answers are checked against the thread's pending interrupts below HTTP
(relay/langgraph/resume_answers.py)."""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from relay.errors import ApiError
from relay.turns.records import id_key

if TYPE_CHECKING:
    from relay.langgraph.agent import GraphAgent

ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
#: the fields of a ``/chat`` body and of a ``/chat/resume`` body
CHAT_FIELDS = ("message", "input", "thread_id", "turn_id")
RESUME_FIELDS = ("thread_id", "turn_id", "resume")


def known_fields(body: Mapping[str, Any], known: Sequence[str], route: str) -> None:
    """``422 unknown_field`` naming every field of ``body`` that is not one of ``known``
    (and the field each was probably meant to be): a misspelt ``threadId`` would
    otherwise start a new thread without a word."""
    unknown = sorted(set(body) - set(known))
    if not unknown:
        return
    named = []
    for name in unknown:
        guess = _guess(name, known)
        named.append(f"{name!r} (did you mean {guess!r}?)" if guess else repr(name))
    raise ApiError(
        422,
        "unknown_field",
        f"Unknown field{'s' if len(unknown) > 1 else ''} in the {route} body: {', '.join(named)}. "
        f"It takes {', '.join(repr(k) for k in known)}.",
    )


def _guess(name: str, known: Sequence[str]) -> str | None:
    """The known field ``name`` was probably meant to be: the same letters in another
    case or separator (``threadId``, ``thread-id``), else a close spelling."""
    squeezed = {k.replace("_", ""): k for k in known}
    same = squeezed.get(name.lower().replace("_", "").replace("-", ""))
    if same is not None:
        return same
    close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.75)
    return close[0] if close else None


def digest(value: Any) -> str:
    """The idempotency fingerprint of a request body."""
    canonical = json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def id_field(body: Mapping[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None:
        if required:
            raise ApiError(422, f"invalid_{name}", f"'{name}' is required.")
        return None
    if not isinstance(value, str) or not ID.match(value):
        raise ApiError(
            422,
            f"invalid_{name}",
            f"'{name}' must be 1-128 characters of letters, digits, '_', '-', '.', ':'.",
        )
    return value


def turn_id_field(body: Mapping[str, Any]) -> str | None:
    """The client's turn id (a UUID in any spelling), kept as the client spelled it: the
    id it reads back and reconnects with."""
    value = body.get("turn_id")
    if value is None:
        return None
    try:
        if not isinstance(value, str) or not ID.match(value):
            raise ValueError(value)
        uuid.UUID(value)  # hyphens or not, any case
    except ValueError:
        raise ApiError(
            422,
            "invalid_turn_id",
            "'turn_id' must be a UUID (it is the turn's "
            "idempotency key); leave it out to get a random one.",
        ) from None
    return value


def message_or_input(body: Mapping[str, Any]) -> tuple[str, Any]:
    """``(message, graph input or None)``: a body has a non-empty ``message`` or the
    graph's own ``input`` object, not both."""
    message = body.get("message")
    graph_input = body.get("input")
    if "input" in body and "message" in body:
        raise ApiError(422, "invalid_message", "Send 'message' or 'input', not both.")
    if "input" in body:
        if not isinstance(graph_input, dict):
            raise ApiError(
                422, "invalid_input", "'input' must be an object: the graph's own input."
            )
        return json.dumps(graph_input, ensure_ascii=False, default=str)[:2000], graph_input
    if not isinstance(message, str) or not message.strip():
        raise ApiError(
            422,
            "invalid_message",
            "'message' must be a non-empty string: the "
            "user's message (or send 'input', the graph's own input object).",
        )
    return message, None


@dataclasses.dataclass(frozen=True, slots=True)
class ChatBody:
    """A ``/chat`` body, checked: the message (or the graph's own input), the thread and
    the client's turn id, and the request's idempotency fingerprint."""

    message: str
    graph_input: Any
    thread_id: str | None
    turn_id: str | None
    request_hash: str

    @property
    def run_kwargs(self) -> dict[str, Any]:
        """The run's input as LangGraph's ``Auth`` sees it (``threads.create_run``)."""
        return {
            "input": self.graph_input if self.graph_input is not None else {"message": self.message}
        }


@dataclasses.dataclass(frozen=True, slots=True)
class ResumeBody:
    """A ``/chat/resume`` body, checked: the paused turn, the answer and the request's
    idempotency fingerprint."""

    thread_id: str
    turn_id: str
    answer: Any
    request_hash: str


def chat_body(body: Mapping[str, Any], agent: GraphAgent) -> ChatBody:
    """The ``/chat`` body checked (422 for a bad field; ``input_required`` when the graph
    takes its own input and the body has a message)."""
    known_fields(body, CHAT_FIELDS, "/chat")
    message, graph_input = message_or_input(body)
    refusal = agent.message_refusal() if graph_input is None else None
    if refusal is not None:
        raise ApiError(422, "input_required", refusal)
    thread_id = id_field(body, "thread_id")
    client_turn_id = turn_id_field(body)
    thread_key = id_key(thread_id) if thread_id else None
    request_hash = digest(
        {"message": message, "thread_id": thread_key}
        if graph_input is None
        else {"input": graph_input, "thread_id": thread_key}
    )
    return ChatBody(message, graph_input, thread_id, client_turn_id, request_hash)


def resume_body(body: Mapping[str, Any]) -> ResumeBody:
    """The ``/chat/resume`` body checked (422 for a bad or missing field)."""
    known_fields(body, RESUME_FIELDS, "/chat/resume")
    thread_id = id_field(body, "thread_id", required=True)
    turn_id = id_field(body, "turn_id", required=True)
    if "resume" not in body:
        raise ApiError(
            422,
            "invalid_resume",
            "'resume' is required: the answer to the interrupt, or {interrupt_id: answer}.",
        )
    assert thread_id is not None and turn_id is not None
    answer = body["resume"]
    request_hash = digest(
        {"thread_id": id_key(thread_id), "turn_id": id_key(turn_id), "resume": answer}
    )
    return ResumeBody(thread_id, turn_id, answer, request_hash)
