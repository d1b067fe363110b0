"""The bench harness: figures, statistics, bounded loops, the table and the JSON.

Every figure is measured against an anchor in the same run and reported as a median over
rounds with its spread (min..max of the per-round values), because the machines this runs
on are small and shared: an absolute number from one run says little, a ratio against an
anchor measured seconds before says more. Every loop is bounded twice, by count and by
time (:func:`rounds`).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the repo (or a patched copy of it)

#: Every figure key, in table order. Quick runs report the same keys at smaller sizes.
EXPECTED_KEYS: tuple[str, ...] = (
    "overhead.relay",
    "overhead.relay_cpu",
    "overhead.relay_us",
    "overhead.relay_subscribe",
    "overhead.subscribe_vs_reader",
    "overhead.subscribe_lag_p50",
    "overhead.reader_lag_p50",
    "overhead.relay_noreader",
    "overhead.floor",
    "overhead.floor_processor",
    "overhead.ainvoke_plain",
    "overhead.astream_updates",
    "overhead.astream_debug",
    "overhead.astream_tasks",
    "overhead.per_node_us",
    "per_event.sdk_span_us",
    "per_event.added_hot_us",
    "per_event.added_thread_us",
    "per_event.drain_us",
    "per_event.deliver_us",
    "per_event.deliver_latency_us",
    "latency.s1.p50",
    "latency.s1.p99",
    "latency.s100.p50",
    "latency.s100.p99",
    "latency.s1000.p50",
    "latency.s1000.p99",
    "latency.s1000.p50_ratio",
    "latency.s1000.p99_ratio",
    "latency.fan1000.p50",
    "latency.fan1000.p99",
    "latency.fan1000.p50_ratio",
    "latency.fan1000.p99_ratio",
    "idle.s1000",
    "idle.s10000",
    "bus.memory",
    "bus.memory_1",
    "bus.memory_long",
    "bus.redis",
    "ingest.otlp_http",
    "replay.map",
    "replay.map_encode",
    "replay.events",
    "replay.sqlite",
    "replay.first_event",
    "replay.sqlite_cpu",
    "replay.sqlite_steady",
    "replay.sqlite_list",
    "realistic.offline",
    "realistic.model_1s",
    "startup.import_relay_s",
    "startup.cli_help_s",
)

#: The soak's figures (``--only soak``: not in the default run; tests/bench/bench_soak.py).
SOAK_KEYS: tuple[str, ...] = (
    "soak.rss_first_wave",
    "soak.rss_per_wave_full",
    "soak.rss_growth_full",
    "soak.sqlite_growth_full",
    "soak.objects_growth_full",
    "soak.bus_retained",
)

#: The memory bench's figure (``--only memory``: not in the default run, it sends
#: hundreds of MiB of maximum-size bodies to a server of its own; tests/bench/bench_memory.py).
MEMORY_KEYS: tuple[str, ...] = ("memory.oversized_rss_mb",)
RECOVERY_KEYS: tuple[str, ...] = ("recovery.takeover_p50", "recovery.takeover_p99")

#: Figures that may be "n/a" because what they measure is not built yet (hooks).
MAY_BE_NA = frozenset(
    {
        "bus.redis",
        "ingest.otlp_http",
        "replay.events",
        "replay.sqlite",
        "replay.first_event",
        "replay.sqlite_cpu",
        "replay.sqlite_steady",
        "replay.sqlite_list",
    }
)


@dataclass
class Figure:
    key: str  # "<id>.<name>", unique
    label: str  # what the row measures, with its sizes
    value: float | None  # the median over rounds; None when n/a
    unit: str  # "x", "us", "ms", "KiB", "ev/s", "spans/s"
    lo: float | None = None  # spread: min over rounds
    hi: float | None = None  # spread: max over rounds
    rounds: int = 0
    anchor: str = ""  # what it is measured against
    anchor_value: float | None = None  # the anchor's median, in anchor_unit
    anchor_unit: str = ""
    target: str = ""  # e.g. "<= 1.03"
    limit: float | None = None  # the numeric threshold (value <= limit, or >= for rates)
    higher_is_better: bool = False
    status: str = "measured"  # measured | n/a
    note: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.key.split(".", 1)[0]

    def verdict(self, quick: bool) -> str:
        if self.status != "measured" or self.value is None:
            return "n/a"
        if quick or self.limit is None:
            return ""
        ok = self.value >= self.limit if self.higher_is_better else self.value <= self.limit
        return "ok" if ok else "OVER"


def na(key: str, label: str, unit: str, note: str, target: str = "") -> Figure:
    return Figure(key, label, None, unit, status="n/a", note=note, target=target)


# -- statistics -----------------------------------------------------------------------------


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else math.nan


def percentile(xs: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of an unsorted sample."""
    if not xs:
        return math.nan
    s = sorted(xs)
    k = max(0, min(len(s) - 1, math.ceil(p / 100 * len(s)) - 1))
    return s[k]


def summary(key: str, label: str, per_round: Sequence[float], unit: str, **kw: Any) -> Figure:
    """A figure from per-round values: median, min, max."""
    vals = [v for v in per_round if v is not None and math.isfinite(v)]
    if not vals:
        return Figure(key, label, math.nan, unit, rounds=0, **kw)
    return Figure(
        key, label, median(vals), unit, lo=min(vals), hi=max(vals), rounds=len(vals), **kw
    )


def rounds(count: int, budget_s: float, minimum: int = 1) -> Iterator[int]:
    """Round numbers 0.. until ``count`` rounds or ``budget_s`` seconds (at least ``minimum``)."""
    deadline = time.monotonic() + budget_s
    for i in range(count):
        if i >= minimum and time.monotonic() > deadline:
            return
        yield i


# -- reporting ------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return {
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": _loadavg(),
        "command": "python -m tests.bench " + " ".join(sys.argv[1:]),
        "root": str(ROOT),
    }


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _fmt(v: float | None, unit: str) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if unit == "x":
        return f"{v:.3f}x"
    if unit in ("ev/s", "spans/s"):
        return f"{v / 1000:.0f}k {unit}" if v >= 10_000 else f"{v:.0f} {unit}"
    if abs(v) >= 100:
        return f"{v:.0f} {unit}"
    if abs(v) >= 10:
        return f"{v:.1f} {unit}"
    return f"{v:.2f} {unit}"


def table(figures: Sequence[Figure], quick: bool) -> str:
    rows = [
        ("id", "figure", "value", "spread (min..max)", "rounds", "anchor", "target", "", "note")
    ]
    for f in figures:
        spread = ""
        if f.lo is not None and f.hi is not None and f.status == "measured":
            spread = f"{_fmt(f.lo, f.unit)} .. {_fmt(f.hi, f.unit)}"
        anchor = f.anchor
        if f.anchor_value is not None:
            anchor += f" = {_fmt(f.anchor_value, f.anchor_unit or f.unit)}"
        measured = f.status == "measured"
        value = _fmt(f.value, f.unit) if measured else "n/a"
        rows.append(
            (
                f.key,
                f.label,
                value,
                spread,
                str(f.rounds or ""),
                anchor,
                "" if quick else f.target,
                f.verdict(quick),
                f.note,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def as_json(figures: Sequence[Figure], meta: dict[str, Any]) -> dict[str, Any]:
    out = []
    for f in figures:
        d = asdict(f)
        d["verdict"] = f.verdict(meta.get("quick", False))
        for k in ("value", "lo", "hi", "anchor_value"):
            if isinstance(d[k], float) and not math.isfinite(d[k]):
                d[k] = None
        out.append(d)
    return {"machine": meta, "figures": out}


def stop_process(proc: subprocess.Popen[Any], grace_s: float, kill_wait_s: float) -> None:
    """SIGTERM a bench server and wait ``grace_s`` for it; past that, SIGKILL."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(kill_wait_s)
