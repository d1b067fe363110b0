"""Memory given back after large request bodies: glibc's mmap and trim thresholds fixed
at 1 MiB, and ``malloc_trim(0)`` once such a request is answered.

A request body at its limit (RELAY_IMPORT_MAX_BYTES is 32 MiB, RELAY_OTLP_MAX_BYTES 8
MiB) and what is parsed from it take tens to hundreds of MiB for a moment. CPython frees
all of it when the request is done, but glibc's malloc keeps what was freed in its heaps
(one per thread that allocated: the event loop's, and the worker threads' of
``asyncio.to_thread``) for reuse, and gives back only a heap's free top past
M_TRIM_THRESHOLD, a threshold glibc itself raises (with the mmap threshold, up to 32 MiB)
each time a large block is freed. So after one burst of maximum-size bodies the process
kept what the burst made it allocate (issue 31: 122 MB before, 247-291 MB after, for
good). ``malloc_trim(0)`` hands the free pages of every heap back to the kernel, from the
middle of a heap too.

:class:`GiveBack`, made once per app, fixes the thresholds (:func:`fix_thresholds`:
blocks of 1 MiB or more, a large body and its copies, are mappings of their own, unmapped
when freed), and counts the body bytes each request reads; once a request that read at
least :data:`LARGE_BODY_BYTES` is answered, it runs ``malloc_trim(0)`` in a worker thread
(it walks every heap: milliseconds on a large one), one at a time, a request that ends
while one runs asking for one more after it: what was freed in the middle of a heap goes
back too. Small requests never trim. Measured against the alternatives
(``MALLOC_ARENA_MAX=2``: no better than nothing; each of the two alone):
docs/performance.md, "Memory after oversized requests". Where there is no glibc (musl,
macOS) there is neither: nothing is done.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger("relay")

#: a request that read at least this many body bytes is followed by a trim
LARGE_BODY_BYTES = 1024 * 1024


#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD and M_MMAP_THRESHOLD
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: both thresholds, fixed: a block this large or larger is its own mapping, unmapped when
#: freed; a heap whose free top is this large is trimmed at once
THRESHOLD_BYTES = 1024 * 1024


def _libc() -> Any:
    """The C library, when it is glibc (it has ``malloc_trim``); else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError, TypeError):
        return None
    return libc


_LIBC = _libc()


def _malloc_trim() -> Callable[[], None] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none."""
    if _LIBC is None:
        return None
    libc = _LIBC

    def run() -> None:
        libc.malloc_trim(0)

    return run


#: the trim, or None (no glibc)
TRIM = _malloc_trim()


def fix_thresholds() -> bool:
    """Fix glibc's mmap and trim thresholds at :data:`THRESHOLD_BYTES` (``mallopt``, as
    ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` would before the start): a
    maximum-size body and its copies are mappings of their own, given back the moment
    they are freed, instead of growing a heap (glibc's dynamic threshold would otherwise
    rise to 32 MiB after the first one). Lowers the peak of a burst too (measured:
    docs/performance.md). Process-wide, so done once, by :class:`GiveBack`; blocks under
    1 MiB (everything but large bodies) are served as before. Whether it was done."""
    if _LIBC is None:
        return False
    mmap_ok = _LIBC.mallopt(_M_MMAP_THRESHOLD, THRESHOLD_BYTES)
    trim_ok = _LIBC.mallopt(_M_TRIM_THRESHOLD, THRESHOLD_BYTES)
    return bool(mmap_ok and trim_ok)


class Trimmer:
    """Runs ``trim`` in a worker thread, one at a time: a request for one while one runs
    is answered by one more run after it (never a queue of them)."""

    def __init__(self, trim: Callable[[], None]) -> None:
        self.trim = trim
        self._running: asyncio.Task[None] | None = None
        self._again = False
        #: how many trims have run (for the tests)
        self.runs = 0

    def request(self) -> None:
        if self._running is not None and not self._running.done():
            self._again = True
            return
        self._running = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await asyncio.to_thread(self.trim)
            except Exception:  # never a request's problem
                log.exception("relay: malloc_trim failed")
            self.runs += 1
            if not self._again:
                return


class GiveBack:
    """ASGI middleware: after a request that read :data:`LARGE_BODY_BYTES` or more of
    body, once it is answered, memory is given back (:class:`Trimmer`). Without glibc it
    passes every request through untouched."""

    def __init__(
        self,
        app: Any,
        trim: Callable[[], None] | None = TRIM,
        threshold: int = LARGE_BODY_BYTES,
    ) -> None:
        self.app = app
        self.threshold = threshold
        self.trimmer = Trimmer(trim) if trim is not None else None
        if trim is TRIM:  # the real allocator (not a test's stand-in)
            fix_thresholds()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.trimmer is None:
            await self.app(scope, receive, send)
            return
        read = 0

        async def counting() -> Any:
            nonlocal read
            message = await receive()
            if message["type"] == "http.request":
                read += len(message.get("body", b""))
            return message

        try:
            await self.app(scope, counting, send)
        finally:
            if read >= self.threshold:
                self.trimmer.request()
