"""The real AG-UI client (Node.js, ``@ag-ui/client`` 1.0, installed from the committed lock
file in tests/interop/agui/): where it lives and how a test runs its demo script. The
``agui_client`` fixture (tests/interop/conftest.py) installs it.

The app under test is the real one (``tests.conftest``'s ``make_server``: a real uvicorn on
127.0.0.1). Without Node.js 20+ (or its packages) the client tests skip, saying how to get
them; with ``CI=true`` they fail instead (tests/node_packages.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLIENT_DIR = Path(__file__).parent / "agui"


def run_client(
    client_dir: Path,
    base_url: str,
    *flows: str,
    out: Path,
    timeout: float = 120,
    on_delta: Callable[[], None] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Run demo.mjs against ``base_url``; its exit status and its JSON report.

    ``on_delta`` is called each time the client has delivered a TEXT_MESSAGE_CONTENT (the
    script writes a line to an inherited pipe, ACK_FD, as it does): a test lets the
    server go on from there."""
    env = {k: v for k, v in os.environ.items() if k != "SUPPRESS_TRANSFORMATION_WARNINGS"}
    if on_delta is None:
        result = subprocess.run(
            ["node", "demo.mjs", base_url, *flows, "--out", str(out)],
            cwd=client_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    else:
        read_fd, write_fd = os.pipe()

        def acks() -> None:
            with os.fdopen(read_fd) as lines:
                for _ in lines:
                    on_delta()

        reader = threading.Thread(target=acks, daemon=True)
        reader.start()
        try:
            result = subprocess.run(
                ["node", "demo.mjs", base_url, *flows, "--out", str(out)],
                cwd=client_dir,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={**env, "ACK_FD": str(write_fd)},
                pass_fds=(write_fd,),
            )
        finally:
            os.close(write_fd)  # the script is gone: the reader sees the end of the pipe
            reader.join(10)
    report = json.loads(out.read_text()) if out.exists() else {}
    return result, report
