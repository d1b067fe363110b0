"""The interrupts a foreign node span carries, read from LangGraph's exception.

LangGraph's ``interrupt()`` leaves a node as ``GraphInterrupt``; OpenInference records it
as an ``exception`` event on an OK span, OpenLLMetry as an error status and an
``exception`` event. Either way the message is the exception's ``str``: the repr of a
tuple of ``Interrupt(value=..., id='...')``. It is read with :func:`ast.parse` (which
only parses, never runs anything) and :func:`ast.literal_eval` on each value; a value
that is no Python literal (an object's repr) is kept as the text of its expression.
"""

from __future__ import annotations

import ast
from typing import Any

from relay.spans import SpanRecord

_PAUSES = ("GraphInterrupt", "NodeInterrupt")
#: how often a parse that CPython refused spuriously is tried (see :func:`_parse_tree`)
_PARSE_TRIES = 3


def interrupts_in(record: SpanRecord) -> list[dict[str, Any]]:
    """``[{id, value}]`` for each interrupt the span's exception names, in order."""
    found: list[dict[str, Any]] = []
    for event in record.events:
        attributes = event.get("attributes") or {}
        kind = str(attributes.get("exception.type", "")).rsplit(".", 1)[-1]
        if event.get("name") == "exception" and kind in _PAUSES:
            found += parse(str(attributes.get("exception.message", "")), record.span_id)
            break
    else:
        if record.status == "error" and any(p in record.status_message for p in _PAUSES):
            found += parse(record.status_message, record.span_id)
    return found


def parse(text: str, span_id: str) -> list[dict[str, Any]]:
    """The interrupts in an exception message; one ``{id: <span id>, value: text}`` when
    it names none (a ``NodeInterrupt`` with a plain message)."""
    text = text.strip()
    for prefix in _PAUSES:  # a status message may say "GraphInterrupt((Interrupt(...),))"
        if text.startswith(prefix + "("):
            text = text[len(prefix) :]
    tree = _parse_tree(text)
    if tree is None:
        return [{"id": span_id, "value": text}] if text else []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "Interrupt":
            fields = {k.arg: k.value for k in node.keywords if k.arg}
            for name, arg in zip(("value", "id"), node.args, strict=False):
                fields.setdefault(name, arg)
            interrupt_id = _literal(fields["id"]) if "id" in fields else None
            found.append(
                {
                    "id": str(interrupt_id) if interrupt_id is not None else span_id,
                    "value": _literal(fields["value"]) if "value" in fields else None,
                }
            )
    if not found:
        value = _literal(tree.body)
        if value not in ((), None, ""):  # GraphInterrupt(()) names none
            found.append({"id": span_id, "value": value})
    return found


def _parse_tree(text: str) -> ast.Expression | None:
    """The message as a Python expression, or None when it is none (or too deep to parse).

    CPython 3.11's AST constructor keeps its recursion depth in state that every thread
    shares, so a parse may fail with a spurious ``SystemError`` ("AST constructor recursion
    depth mismatch", python/cpython#106905) when another thread of the process (the
    agent's, a library's) parses at the same moment: such a parse is tried again."""
    for _ in range(_PARSE_TRIES):
        try:
            return ast.parse(text, mode="eval")
        except SystemError:
            continue
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    return None


def _name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return ast.unparse(node)
