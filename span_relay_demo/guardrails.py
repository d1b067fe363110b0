"""Guardrails: rules before the model (prompt injection, off-topic) and after it (redaction).

Plain, documented rules; each check returns a :class:`Decision` that the node records on an
``apply_guardrail`` span.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Decision:
    decision: str  # allow | block | redact
    reason: str
    text: str | None = None  # the redacted text, for "redact"


_INJECTION = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\bignore\b.{0,40}\b(instructions|rules|prompt)\b",
        r"\b(system|hidden|developer)\s+prompt\b",
        r"\bdisregard\b.{0,40}\b(instructions|rules)\b",
        r"\byou are now\b",
        r"\bjailbreak\b",
        r"\bact as\b.{0,30}\b(admin|developer|dan)\b",
    )
]

_OFF_TOPIC = [
    re.compile(p, re.IGNORECASE)
    for p in (
        r"\b(write|compose)\b.{0,20}\b(poem|song|essay|story)\b",
        r"\b(stock|crypto|bitcoin)\b.{0,20}\b(price|tip|advice)\b",
        r"\b(medical|legal)\s+advice\b",
    )
]

MAX_MESSAGE_CHARS = 4000


def check_input(message: str) -> Decision:
    if len(message) > MAX_MESSAGE_CHARS:
        return Decision("block", f"message longer than {MAX_MESSAGE_CHARS} characters")
    for pattern in _INJECTION:
        if pattern.search(message):
            return Decision("block", "prompt_injection")
    for pattern in _OFF_TOPIC:
        if pattern.search(message):
            return Decision("block", "off_topic")
    return Decision("allow", "")


_CARD = re.compile(r"\b\d(?:[ -]?\d){12,15}\b")
_EMAIL = re.compile(r"\b[\w.+-]+@(?!larkspur\.example\b)[\w-]+(\.[\w-]+)+\b")


def check_output(answer: str) -> Decision:
    redacted = _CARD.sub("[card number removed]", answer)
    redacted = _EMAIL.sub("[email removed]", redacted)
    if redacted != answer:
        return Decision("redact", "personal data in the answer", redacted)
    return Decision("allow", "")
