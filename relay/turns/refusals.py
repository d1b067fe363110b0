"""Why the turn's rules refuse a start or a resume, said below HTTP.

The admission service (:mod:`relay.turns.admission`) raises these; :mod:`relay.http.errors`
answers each with its status (:data:`STATUS`) in the API's error envelope, so that the
service knows nothing of HTTP and a route nothing of the rules."""

from __future__ import annotations

from typing import Literal

Kind = Literal["not_found", "conflict", "invalid"]

#: the HTTP status of each kind of refusal
STATUS: dict[Kind, int] = {"not_found": 404, "conflict": 409, "invalid": 422}


class Refused(Exception):
    """A request the turn's rules refuse: its ``kind``, a stable ``code`` and a
    ``message`` safe to show."""

    def __init__(self, kind: Kind, code: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.message = message
