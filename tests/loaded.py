"""Run the test suite on a loaded machine: does it still pass when the cores are busy?

    .venv/bin/python -m tests.loaded [--runs N] [--load-procs P] [-- PYTEST_ARGS...]

Runs ``pytest -q -p no:cacheprovider [PYTEST_ARGS]`` N times (default 3) while P
background processes (default 2: both cores of the project's machines) spin a CPU loop
with a little memory churn, and prints for each run the passed/failed counts, its
duration and the ids of the tests that failed; the exit status is non-zero if any run
failed. Not part of ``make test``: the suite promises to pass on a loaded 2-core machine
(DESIGN.md §10: where an order in time matters, a test makes it happen instead of timing
it), and this is how to check that promise, e.g. after touching a streaming test::

    .venv/bin/python -m tests.loaded --runs 2 -- tests/interop tests/http

The load is bounded: never more than P processes, started when a run starts and killed
when it ends (also when this script is interrupted); each also stops on its own once its
parent is gone or after ``--load-limit-s`` (default 3600 s), so a killed script leaves
nothing spinning.
"""

from __future__ import annotations

import argparse
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# One load process: a CPU loop that also allocates and drops memory (up to 16 MiB), so that
# the caches and the allocator are as busy as the cores. It ends by itself when its parent
# has gone (this script killed hard) or after its time limit.
LOAD = """
import os, sys, time
deadline = time.monotonic() + float(sys.argv[1])
parent = os.getppid()
junk = []
while time.monotonic() < deadline and os.getppid() == parent:
    for _ in range(20_000):
        pass
    junk.append(bytearray(64 * 1024))
    if len(junk) >= 256:
        junk.clear()
"""

SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (\S+)")
COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)\b")


@dataclass
class Run:
    number: int
    returncode: int
    duration_s: float
    counts: Counter[str] = field(default_factory=Counter)
    failed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def line(self, runs: int) -> str:
        counts = (
            ", ".join(f"{n} {what}" for what, n in sorted(self.counts.items())) or "no result line"
        )
        verdict = "ok" if self.ok else f"FAILED (pytest exit {self.returncode})"
        return f"run {self.number}/{runs}: {verdict}: {counts} in {self.duration_s:.1f} s"


class Load:
    """At most ``procs`` spinning processes, for as long as the ``with`` block lasts."""

    def __init__(self, procs: int, limit_s: float) -> None:
        self.procs = procs
        self.limit_s = limit_s
        self.started: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> Load:
        for _ in range(self.procs):
            self.started.append(
                subprocess.Popen(
                    [sys.executable, "-c", LOAD, str(self.limit_s)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
        for proc in self.started:
            proc.wait()
        self.started.clear()


def run_pytest(number: int, args: list[str]) -> Run:
    """One pytest run, its output passed through as it comes; what it reported."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    run = Run(number, returncode=-1, duration_s=0.0)
    try:
        assert proc.stdout is not None
        last = ""
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            if match := SUMMARY_LINE.match(line):
                run.failed.append(match.group(2))
            if line.strip():
                last = line
        run.returncode = proc.wait()
    finally:
        if proc.poll() is None:  # interrupted: the run goes with us
            proc.kill()
            proc.wait()
    run.duration_s = time.monotonic() - started
    for n, what in COUNT.findall(last):
        run.counts["errors" if what == "error" else what] += int(n)
    return run


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up like Ctrl-C: load and pytest run stopped


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    argv = sys.argv[1:] if argv is None else argv
    ours, pytest_args = (
        (argv[: argv.index("--")], argv[argv.index("--") + 1 :]) if "--" in argv else (argv, [])
    )
    parser = argparse.ArgumentParser(
        prog="python -m tests.loaded",
        description="Run pytest several times while background processes load the CPU.",
        epilog="Arguments after -- go to pytest (default: the whole suite).",
    )
    parser.add_argument("--runs", type=int, default=3, help="pytest runs (default 3)")
    parser.add_argument(
        "--load-procs", type=int, default=2, help="background CPU-loop processes (default 2)"
    )
    parser.add_argument(
        "--load-limit-s",
        type=float,
        default=3600.0,
        help="a load process stops by itself after this (default 3600)",
    )
    args = parser.parse_args(ours)
    if args.runs < 1 or args.load_procs < 0 or args.load_limit_s <= 0:
        parser.error("--runs must be >= 1, --load-procs >= 0, --load-limit-s > 0")

    runs: list[Run] = []
    try:
        for number in range(1, args.runs + 1):
            print(
                f"== run {number}/{args.runs} under {args.load_procs} load process(es): "
                f"pytest -q -p no:cacheprovider {' '.join(pytest_args)}".rstrip(),
                flush=True,
            )
            with Load(args.load_procs, args.load_limit_s):
                run = run_pytest(number, pytest_args)
            runs.append(run)
            print(run.line(args.runs), flush=True)
            for test_id in run.failed:
                print(f"  failed: {test_id}", flush=True)
    except KeyboardInterrupt:  # the load and the pytest run were stopped on the way out
        print("\ninterrupted", file=sys.stderr)
        return 130

    print(
        f"\n== {sum(r.ok for r in runs)} of {len(runs)} run(s) passed "
        f"under {args.load_procs} load process(es)"
    )
    for run in runs:
        print("  " + run.line(args.runs))
    flaky = Counter(test_id for run in runs for test_id in run.failed)
    for test_id, times in flaky.most_common():
        print(f"  failed in {times} of {len(runs)} run(s): {test_id}")
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
