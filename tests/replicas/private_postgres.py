"""A PostgreSQL cluster of the test's own, to stop and start at will: never the machine's
shared one (on 5432), which other tests and people use.

``initdb`` into a fresh temporary folder (trust auth, no fsync: it is thrown away), a
free port on 127.0.0.1, the Unix socket in that folder (``-k``), ``pg_ctl`` to start and
stop it. Run as root, every command runs as the ``postgres`` user (PostgreSQL refuses to
run as root), and the folder is made its own. :meth:`PrivatePostgres.destroy` stops it
(immediately) and removes the folder, whatever state it is in.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import free_port

#: where Debian/Ubuntu put the server binaries (one folder per major version)
BINARY_GLOB = "/usr/lib/postgresql/*/bin"


class MissingPostgres(RuntimeError):
    """No PostgreSQL server binaries here, or no user to run them as."""


def find_bindir() -> Path:
    """The newest folder with initdb and pg_ctl (``PG_BINDIR`` overrides)."""
    candidates = [os.environ["PG_BINDIR"]] if os.environ.get("PG_BINDIR") else []
    candidates += sorted(
        glob.glob(BINARY_GLOB),
        key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(str(Path(on_path).parent))
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    raise MissingPostgres(
        f"no initdb/pg_ctl in {BINARY_GLOB} or on PATH (apt-get install postgresql)"
    )


class PrivatePostgres:
    def __init__(self) -> None:
        self.bindir = find_bindir()
        self._as_user: list[str] = []
        owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:  # PostgreSQL will not run as root
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                raise MissingPostgres(
                    "running as root and there is no 'postgres' user to run the server as"
                ) from None
            runuser = shutil.which("runuser")
            self._as_user = [runuser, "-u", "postgres", "--"] if runuser else []
            if not self._as_user and shutil.which("su") is None:
                raise MissingPostgres("running as root with neither runuser nor su")
        # not under pytest's tmp_path (or a long TMPDIR): its parents are private to root
        # (postgres could not enter), and a Unix socket path must stay under ~100 chars
        self.root = Path(
            tempfile.mkdtemp(prefix="relay-pg-", dir="/tmp" if os.path.isdir("/tmp") else None)
        )
        if owner is not None:
            os.chown(self.root, owner.pw_uid, owner.pw_gid)
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = free_port()
        self.running = False

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if os.geteuid() == 0 and not self._as_user:  # su only takes a shell command line
            import shlex

            command = ["su", "postgres", "-c", shlex.join(command)]
        else:
            command = [*self._as_user, *command]
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, cwd=self.root
        )
        if result.returncode != 0:
            tail = self.log.read_text()[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({result.returncode}): "
                f"{result.stdout}{result.stderr}{tail}"
            )
        return result

    def init(self) -> PrivatePostgres:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        return self

    def start(self) -> PrivatePostgres:
        """Start (again) on the same port, and wait until it accepts connections."""
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
            timeout=90,
        )
        self.running = True
        return self

    def stop(self, mode: str = "immediate") -> None:
        """``immediate``: the server's processes quit at once, no shutdown checkpoint, every
        session cut, as when its machine goes away; the next start recovers from WAL."""
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")
        self.running = False

    def destroy(self) -> None:
        """Stop it if it may be running, then remove its folder (for teardown: never
        raises, and runs whether the test passed or not)."""
        try:
            if self.data.exists() and (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        except Exception:  # already down, or pg_ctl failed: kill what the pid file says
            self._kill_from_pidfile()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def _kill_from_pidfile(self) -> None:
        """Last resort: SIGKILL our postmaster, only if the pid file's process is still
        the server of this data folder (a stale pid may belong to anything by now)."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            if str(self.data).encode() in cmdline:
                os.kill(pid, 9)
        except Exception:
            pass
