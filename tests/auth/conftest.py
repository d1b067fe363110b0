"""The relay-only server fixtures of the interop tests (``make_relay``), for the test of a
received turn's owner."""

from tests.interop.conftest import make_relay, relay_env

__all__ = ["make_relay", "relay_env"]
