"""How deep JSON from outside may nest, checked before it is parsed.

Python's ``json`` parser recurses once per level: a body of 10,000 ``[`` is a
``RecursionError`` (a 500), and a value a few hundred levels deep that does parse can
still fail later, where the relay writes it again (orjson stops at 254 levels). So every
JSON text the relay reads from outside (request bodies, OTLP/JSON, trace files, the JSON
inside span attributes) goes through :func:`loads`, which refuses one nested deeper than
:data:`MAX_DEPTH` levels with :class:`TooDeep` (a ``ValueError``, as ``json.loads``'s own
errors are) before parsing it.

The check is a scan of the text's brackets outside its strings, in C loops (``str.count``,
``re``, ``itertools``): a text with at most :data:`MAX_DEPTH` brackets (most of them) is
never scanned further.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

#: the deepest nesting (arrays and objects inside each other) a JSON text may have
MAX_DEPTH = 128

#: a JSON string, escapes included (the unrolled form: no backtracking per character)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """A JSON text nests deeper than the limit."""

    def __init__(self, limit: int = MAX_DEPTH, what: str = "JSON") -> None:
        super().__init__(f"{what} nests deeper than {limit} levels: the relay reads no deeper")
        self.limit = limit


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether ``text``'s arrays and objects nest deeper than ``limit`` (brackets inside
    strings do not count; for a text that is not JSON, an answer that errs on the deep
    side)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return (
        next(filter(limit.__lt__, accumulate(map(_STEP.__getitem__, brackets))), None) is not None
    )


def loads(data: str | bytes | bytearray, limit: int = MAX_DEPTH, what: str = "JSON") -> Any:
    """``json.loads(data)``, but :class:`TooDeep` (naming ``what``) for a text that nests
    deeper than ``limit``. Bytes are decoded as ``json.loads`` decodes them (UTF-8, -16
    or -32, found from the first bytes); a ``UnicodeDecodeError`` is a ``ValueError``."""
    text = (
        data
        if isinstance(data, str)
        else bytes(data).decode(json.detect_encoding(data), "surrogatepass")
    )
    if too_deep(text, limit):
        raise TooDeep(limit, what)
    try:
        return json.loads(text)
    except RecursionError:  # (the scan above keeps it from happening)
        raise TooDeep(limit, what) from None
