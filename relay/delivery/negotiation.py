"""Accept-header negotiation for the run endpoints (DESIGN.md §5).

``text/event-stream`` -> SSE, ``application/x-ndjson`` -> NDJSON, and everything that
admits JSON (``application/json``, ``application/*``, ``*/*``, no header) -> the
ChatResponse JSON. q-values rank the choices (a type's q is that of the most specific
range naming it, and q=0 excludes it); at equal q a named type beats a wildcard, then
JSON wins (the unchanged contract).
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
    ranges = [
        (media, q) for media, q in (_parse(raw) for raw in accept.split(",")) if media is not None
    ]
    best: tuple[float, int, int, str] | None = None
    for rank, offered in enumerate(OFFERED):
        # a type's quality comes from the most specific range that matches it (RFC 9110
        # §12.5.1): `application/json;q=0, */*` excludes JSON and admits the others
        matches = [
            (specificity, q)
            for media, q in ranges
            if (specificity := _matches(media, offered)) >= 0
        ]
        if not matches:
            continue
        specificity, q = max(matches, key=lambda m: m[0])
        if q <= 0:
            continue
        # on equal q, a type the client names beats one it only admits by a wildcard;
        # then the order of OFFERED (JSON first: the unchanged contract)
        key = (q, specificity, -rank, offered)
        if best is None or key[:3] > best[:3]:
            best = key
    if best is None:
        raise NotAcceptable(
            f"Accept {accept!r} admits none of {', '.join(OFFERED)}; ask for one of them"
        )
    return best[3]


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
            if not 0.0 <= q <= 1.0:  # nan, inf, out of range: a malformed range, ignored
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


def stream_media(accept: str | None) -> str:
    """The framing of a turn's stream (``GET /turns/{id}/events``): NDJSON when asked for
    and SSE is not, else SSE."""
    accept = accept or ""
    return NDJSON if NDJSON in accept and SSE not in accept else SSE
