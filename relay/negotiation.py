"""Accept-header negotiation for the run endpoints (DESIGN.md §5).

``text/event-stream`` -> SSE, ``application/x-ndjson`` -> NDJSON, and everything that
admits JSON (``application/json``, ``application/*``, ``*/*``, no header) -> the
ChatResponse JSON. q-values rank the choices; ties prefer JSON (the unchanged contract).
An Accept that admits none of the three is a 406.
"""

from __future__ import annotations

JSON = "application/json"
SSE = "text/event-stream"
NDJSON = "application/x-ndjson"
OFFERED = (JSON, SSE, NDJSON)  # order = preference on equal q


class NotAcceptable(ValueError):
    pass


def negotiate(accept: str | None) -> str:
    if accept is None or not accept.strip():
        return JSON
    best: tuple[float, int, str] | None = None
    for raw in accept.split(","):
        media, q = _parse(raw)
        if media is None or q <= 0:
            continue
        for rank, offered in enumerate(OFFERED):
            specificity = _matches(media, offered)
            if specificity < 0:
                continue
            key = (q, specificity * 10 - rank, offered)
            if best is None or key[:2] > best[:2]:
                best = key
    if best is None:
        raise NotAcceptable(
            f"Accept {accept!r} admits none of {', '.join(OFFERED)}; ask for one of them"
        )
    return best[2]


def _parse(raw: str) -> tuple[str | None, float]:
    parts = [p.strip() for p in raw.split(";")]
    media = parts[0].lower()
    if "/" not in media:
        return None, 0.0
    q = 1.0
    for param in parts[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return None, 0.0
    return media, q


def _matches(pattern: str, offered: str) -> int:
    """-1 for no match, else how specific the match is (0 = */*, 1 = type/*, 2 = exact)."""
    if pattern == "*/*":
        return 0
    ptype, _, psub = pattern.partition("/")
    otype, _, osub = offered.partition("/")
    if ptype != otype:
        return -1
    if psub == "*":
        return 1
    return 2 if psub == osub else -1
