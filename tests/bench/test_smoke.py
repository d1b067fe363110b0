"""The benchmarks still run: ``python -m tests.bench --quick --json`` reports every figure,
and so does the soak (``--only soak``, not in the default run) at its tiny size.

No timing thresholds here (this machine is small and shared; the numbers are judged by
people reading ``python -m tests.bench``): only that each figure is present, numeric and
finite, or explicitly "n/a" for what is not built yet.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.__main__ import IDS
from tests.bench.harness import EXPECTED_KEYS, MAY_BE_NA, MEMORY_KEYS, SOAK_KEYS

ROOT = Path(__file__).resolve().parents[2]


def quick_bench(*ids: str) -> subprocess.CompletedProcess[str]:
    """``python -m tests.bench --quick --json --only IDS`` in a process of its own."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "tests.bench", "--quick", "--json", "--only", ",".join(ids)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
def test_quick_bench_reports_every_figure() -> None:
    """Every bench of the default run, in one process (each process of its own would
    import everything again: the suite's CPU is its budget)."""
    done = quick_bench(*IDS)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout)
    assert report["machine"]["quick"] is True
    figures = {f["key"]: f for f in report["figures"]}
    assert len(figures) == len(report["figures"]), "duplicate figure keys"
    missing = [k for k in EXPECTED_KEYS if k not in figures]
    assert not missing, f"figures missing from the report: {missing}"
    for key in EXPECTED_KEYS:
        figure = figures[key]
        if figure["status"] == "n/a":
            assert key in MAY_BE_NA, f"{key} is n/a: {figure['note']}"
            assert figure["note"], f"{key} is n/a without saying why"
            continue
        value = figure["value"]
        assert isinstance(value, int | float) and math.isfinite(value), (key, figure)
        assert figure["rounds"] >= 1, (key, figure)
        for bound in ("lo", "hi"):
            assert isinstance(figure[bound], int | float), (key, bound, figure)


@pytest.mark.slow
def test_quick_soak_reports_every_wave() -> None:
    done = quick_bench("soak")
    assert done.returncode == 0, done.stderr[-4000:]
    figures = {f["key"]: f for f in json.loads(done.stdout)["figures"]}
    assert sorted(figures) == sorted(SOAK_KEYS)
    for key in SOAK_KEYS:
        value = figures[key]["value"]
        assert figures[key]["status"] == "measured", (key, figures[key]["note"])
        assert isinstance(value, int | float) and math.isfinite(value), (key, figures[key])
    waves = figures["soak.rss_first_wave"]["params"]["per_wave"]
    assert [w["wave"] for w in waves] == [0, 1, 2]  # the start, then 2 waves of 5 turns
    assert all(w["rss_mib"] > 0 and "bus_finished" in w for w in waves)
    assert "soak wave  2:" in done.stderr  # one line per wave as it is measured


@pytest.mark.slow
def test_quick_memory_bench_reports_rss_before_peak_after() -> None:
    """Against a real ``span-relay serve``: every body of the burst answered with a 4xx
    or a 2xx (never a 5xx), and the three RSS numbers side by side."""
    done = quick_bench("memory")
    assert done.returncode == 0, done.stderr[-4000:]
    figures = {f["key"]: f for f in json.loads(done.stdout)["figures"]}
    assert sorted(figures) == sorted(MEMORY_KEYS)
    figure = figures["memory.oversized_rss_mb"]
    assert figure["status"] == "measured", figure["note"]
    params = figure["params"]
    assert 0 < params["before_mib"] <= params["peak_mib"]
    assert 0 < params["after_mib"] <= params["peak_mib"]
    assert figure["value"] == pytest.approx(params["after_mib"], abs=0.1)
    statuses = {int(k): n for k, n in params["statuses"].items()}
    assert statuses and all(s < 500 for s in statuses), statuses
    assert "before" in figure["note"] and "peak" in figure["note"] and "after" in figure["note"]
