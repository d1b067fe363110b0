"""Counting machine instructions with callgrind: what ``callgrind_turn`` and
``callgrind_replay`` share.

A counted child is this interpreter running ``-m module --child NAME ...`` under
``valgrind --tool=callgrind --toggle-collect=functools_reduce``: the child warms up,
then runs what it measures inside ``functools.reduce``, which nothing else in the
process calls, so only that is counted. The hash seed is fixed (the same dict and set
layouts every run), so a count repeats to the instruction whatever else the machine
runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence


def count(
    module: str, children: Sequence[tuple[str, list[str]]], at_once: int | None = None
) -> dict[str, int]:
    """The instructions each child counted: ``children`` are (name, its extra arguments);
    ``at_once`` of them run side by side (all when None)."""
    counts: dict[str, int] = {}
    step = at_once or len(children) or 1
    with tempfile.TemporaryDirectory(prefix="callgrind-") as tmp:
        for at in range(0, len(children), step):
            runs = {}
            for i, (name, args) in enumerate(children[at : at + step], at):
                out = os.path.join(tmp, f"{i}.out")
                runs[name] = (
                    out,
                    subprocess.Popen(
                        [
                            "valgrind",
                            "--tool=callgrind",
                            "--toggle-collect=functools_reduce",
                            f"--callgrind-out-file={out}",
                            sys.executable,
                            "-m",
                            module,
                            "--child",
                            name,
                            *args,
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        env={**os.environ, "PYTHONHASHSEED": "0"},
                    ),
                )
            for name, (out, proc) in runs.items():
                if proc.wait() != 0:
                    raise RuntimeError(f"valgrind failed for {name!r}")
                with open(out) as f:
                    totals = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
                if totals is None:
                    raise RuntimeError("no totals in the callgrind output")
                counts[name] = int(totals.group(1))
    return counts
