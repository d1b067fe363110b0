"""span-relay: an agent's OpenTelemetry spans drive its live UI.

The public surface is small: :class:`Relay` (bus, store, processor, router from the
environment), the span processor, and the event contract in :mod:`relay.events`.
"""

from relay.facade import Relay
from relay.processor import RelaySpanProcessor
from relay.settings import ConfigError, RelaySettings

__all__ = ["ConfigError", "Relay", "RelaySettings", "RelaySpanProcessor"]
