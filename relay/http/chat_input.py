"""What a run request says, checked: its fields (an unknown one, a ``threadId`` typo say,
is refused, not ignored), ids, the message or the graph's own input, the idempotency
fingerprint. Every bad field is a 422 with a message that names it (DESIGN.md §5). The
resume answers are checked against the thread's pending interrupts below HTTP
(relay/langgraph/resume_answers.py)."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from relay.errors import ApiError

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
