"""The side-by-side table: figure | span-relay | peer | ratio (ours/peer) | who is ahead;
and what a run says about its machine (date, load, the peer's pins)."""

from __future__ import annotations

import argparse
import os
import platform
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from tests.bench.peer import servers
from tests.bench.peer.figures import pct


def arguments(prog: str, doc: str | None, seed: int, argv: list[str] | None) -> argparse.Namespace:
    """The options every side-by-side run takes: ``--quick``, ``--json``, ``--markdown``,
    ``--seed`` (``seed`` its default)."""
    parser = argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run at small sizes")
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")
    parser.add_argument("--markdown", action="store_true", help="the table in Markdown")
    parser.add_argument("--seed", type=int, default=seed, help="the reconnect cut points")
    return parser.parse_args(argv)


def log(text: str) -> None:
    print(f"# {text} ...", file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    pins = [
        line
        for line in servers.REQUIREMENTS.read_text().splitlines()
        if line.startswith(("langgraph", "langchain-core"))
    ]
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
        "peer": pins,
    }


@dataclass
class Row:
    figure: str
    ours: float | None
    peer: float | None
    unit: str
    better: str  # "lower", "higher" or "" (reported, not ranked)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.peer is None or self.peer == 0:
            return None
        return self.ours / self.peer

    @property
    def ahead(self) -> str:
        if self.ours is None or self.peer is None or not self.better:
            return "-"
        if self.ours == self.peer:
            return "even"
        ours_wins = self.ours < self.peer if self.better == "lower" else self.ours > self.peer
        return "span-relay" if ours_wins else "peer"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ratio": self.ratio, "ahead": self.ahead}


def rows(
    seq: dict[str, dict[str, dict[str, Any]]],
    conc: dict[str, dict[str, Any]],
    idle: dict[str, dict[str, Any]],
    resumed: dict[str, dict[str, Any]],
    broken: dict[str, int],
    workers: int,
    idle_n: int,
) -> list[Row]:
    out: list[Row] = []

    def both(label: str, get: Any, unit: str, better: str, where: dict[str, Any]) -> None:
        out.append(Row(label, get(where["span-relay"]), get(where["peer"]), unit, better))

    for graph, title in (("trivial", "4-node turn"), ("tokens", "70-token turn")):
        s = seq[graph]
        for key, what in (
            ("first_byte_ms", "first byte"),
            ("first_token_ms", "first token"),
            ("turn_ms", "whole turn"),
        ):
            if graph == "trivial" and key == "first_token_ms":
                continue
            for q in (50, 99):
                both(f"{title}: {what} p{q}", lambda d, k=key, q=q: pct(d[k], q), "ms", "lower", s)
        both(f"{title}: server CPU per turn", lambda d: d["cpu_ms_per_turn"], "ms", "lower", s)
        both(f"{title}: bytes on the wire", lambda d: d["bytes_per_turn"], "B", "lower", s)
        both(f"{title}: events", lambda d: d["events_per_turn"], "", "", s)
    c = f"{workers} concurrent 70-token turns"
    both(f"{c}: turns/s", lambda d: d["turns_per_s"], "/s", "higher", conc)
    for q in (50, 99):
        both(
            f"{c}: first byte p{q}", lambda d, q=q: pct(d["first_byte_ms"], q), "ms", "lower", conc
        )
    for q in (50, 99):
        both(
            f"{c}: first token p{q}",
            lambda d, q=q: pct(d["first_token_ms"], q),
            "ms",
            "lower",
            conc,
        )
    both(
        f"memory per idle joined stream ({idle_n})",
        lambda d: d["kib_per_stream"],
        "KiB",
        "lower",
        idle,
    )
    n = resumed["span-relay"]["cuts"]
    both(f"reconnect at {n} random cuts: events lost", lambda d: d["lost"], "", "lower", resumed)
    both(
        f"reconnect at {n} random cuts: events duplicated",
        lambda d: d["duplicated"],
        "",
        "lower",
        resumed,
    )
    both(
        "distinct SSE ids per event",
        lambda d: d["distinct_ids"] / max(1, d["events"]),
        "",
        "higher",
        resumed,
    )
    out.append(
        Row(
            "turns not served whole (status, error event, tokens)",
            broken["span-relay"],
            broken["peer"],
            "",
            "lower",
        )
    )
    return out


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "B":
        return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value:.0f} B"
    if abs(value) >= 100 or value == int(value):
        text = f"{value:.0f}"
    elif abs(value) >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}".strip()


def table(rows_: list[Row], markdown: bool = False) -> str:
    head = ("figure", "span-relay", "peer", "ratio", "who is ahead")
    body = [
        (
            r.figure,
            _fmt(r.ours, r.unit),
            _fmt(r.peer, r.unit),
            "n/a" if r.ratio is None else f"{r.ratio:.2f}x",
            r.ahead,
        )
        for r in rows_
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        return "\n".join(lines)
    widths = [max(len(str(c[i])) for c in (head, *body)) for i in range(len(head))]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(
        [
            fmt.format(*head),
            fmt.format(*("-" * w for w in widths)),
            *(fmt.format(*cells) for cells in body),
        ]
    )
