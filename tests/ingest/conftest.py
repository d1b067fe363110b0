"""The span-store suite's process launcher (``launcher``: ``span-relay serve`` as real
subprocesses), for the trace-file import tests that store and replay what they import."""

from tests.store.conftest import launcher

__all__ = ["launcher"]
