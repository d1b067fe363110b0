"""The Node.js test clients' packages, exactly as their lock files pin them.

Two suites drive real Node.js programs: the OpenTelemetry exporters of tests/interop/node
and the AG-UI client of tests/interop/agui. :func:`node_project` checks Node.js 20+ and
npm, and runs ``npm ci`` in the client's folder only when a package its lock names is
missing or at another version (``tests/system-deps.sh`` has usually installed them
already). ``npm ci`` empties ``node_modules`` first, so it runs under a file lock: xdist
workers that need the same client at once install it once, and never under a client
that another worker is running.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import service_missing

REPO = Path(__file__).resolve().parents[1]


def node_project(directory: Path, what: str) -> Path:
    """``directory``, with Node.js 20+ on the PATH and its packages installed as locked;
    what is missing skips the test (fails it with CI=true), saying how to get it."""
    install = f"npm ci --prefix {directory.relative_to(REPO)}"
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        service_missing("Node.js 20+ and npm", f"apt-get install nodejs npm, then {install}")
    assert node is not None and npm is not None
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    if int(version.strip().lstrip("v").split(".")[0] or 0) < 20:
        service_missing("Node.js 20+", f"found {version.strip()}")
    with _exclusive(directory):
        if not installed_as_locked(directory):
            result = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=directory,
                capture_output=True,
                text=True,
                timeout=300,
            )
            if result.returncode != 0:
                service_missing(what, f"{install}  ({result.stderr[-400:]})")
    return directory


def installed_as_locked(directory: Path) -> bool:
    """Every package ``package-lock.json`` names is under ``node_modules`` at its version
    (an optional one, for another platform, may be absent)."""
    lock = json.loads((directory / "package-lock.json").read_text())
    for path, meta in lock.get("packages", {}).items():
        if not path.startswith("node_modules/") or "version" not in meta:
            continue
        manifest = directory / path / "package.json"
        if not manifest.exists():
            if meta.get("optional"):
                continue
            return False
        if json.loads(manifest.read_text()).get("version") != meta["version"]:
            return False
    return True


@contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """Held by one process of the machine at a time, for this folder."""
    key = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"span-relay-npm-{key}.lock"
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
