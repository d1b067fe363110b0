"""README.md is the wheel's long description (pyproject.toml's ``readme``): on a package
index page a relative link (``docs/library.md``) leads nowhere. Every link of the README is
absolute (``https://...``) or an anchor of one of its own headings; files of the source tree
are named as text (``docs/library.md``), not linked."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"(`+).*?\1", re.S)
_INLINE = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)")  # [text](target), ![alt](target)
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)  # [label]: target
_HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']*)["']""", re.I)
_AUTOLINK = re.compile(r"<([a-z][a-z0-9+.-]*:[^>\s]*)>", re.I)
_ABSOLUTE = re.compile(r"^(https?://|mailto:)", re.I)


def links(markdown: str) -> list[str]:
    """Every link target of ``markdown``, outside code blocks and code spans."""
    text = _CODE.sub("", _FENCE.sub("", markdown))
    found: list[str] = []
    for pattern in (_INLINE, _REFERENCE, _HTML, _AUTOLINK):
        found += pattern.findall(text)
    return found


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub (and a package index that renders them) gives the headings."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6}\s+(.+?)\s*#*\s*$", _FENCE.sub("", markdown), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken(markdown: str) -> list[str]:
    """The links of ``markdown`` that a package index page cannot follow."""
    own = anchors(markdown)
    return [
        target
        for target in links(markdown)
        if not _ABSOLUTE.match(target) and not (target.startswith("#") and target[1:] in own)
    ]


def test_the_readme_is_the_long_description() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["readme"] == "README.md"


def test_the_readme_holds_no_relative_link() -> None:
    assert broken(README.read_text()) == []


def test_the_check_sees_every_kind_of_link() -> None:
    sample = (
        "# Title\n## Security: users and their turns\n"
        "see [the library](docs/library.md), ![shot](img/a.png), [ok](#title),\n"
        "[also ok](#security-users-and-their-turns), [gone](#nowhere), "
        '<a href="deploy/RUNBOOK.md">x</a>, [web](https://example.org/x)\n'
        "`[code](not/a/link.md)` and <https://example.org/> and <./local.md>\n\n"
        "```\n[in a block](also/not.md)\n```\n"
        "[ref]: ../elsewhere.md\n"
    )
    assert broken(sample) == [
        "docs/library.md",
        "img/a.png",
        "#nowhere",
        "../elsewhere.md",
        "deploy/RUNBOOK.md",
    ]
