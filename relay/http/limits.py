"""A per-client rate limit for the run endpoints (``RELAY_RATE_LIMIT=N/S``: N requests
per S seconds per client address; off by default).

A token bucket per client, in memory, bounded: at most ``max_clients`` buckets, the least
recently seen forgotten first. Behind a proxy, the client address is what uvicorn's
``--proxy-headers`` resolves from ``X-Forwarded-For``.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict

from starlette.requests import Request

from relay.errors import ApiError


class RateLimit:
    def __init__(self, requests: int, per_s: float, max_clients: int = 10_000) -> None:
        self.capacity = float(requests)
        self.rate = requests / per_s
        self.max_clients = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @classmethod
    def parse(cls, spec: str) -> RateLimit:
        count, _, window = spec.partition("/")
        return cls(int(count), float(window or 60))

    def allow(self, client: str, now: float | None = None) -> float:
        """0 if allowed (a token is taken), else the seconds until one is available."""
        now = time.monotonic() if now is None else now
        tokens, seen = self._buckets.pop(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - seen) * self.rate)
        wait = 0.0
        if tokens >= 1:
            tokens -= 1
        else:
            wait = (1 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait

    async def __call__(self, request: Request) -> None:
        client = request.client.host if request.client else "unknown"
        wait = self.allow(client)
        if wait:
            raise ApiError(
                429,
                "rate_limited",
                f"Too many requests; try again in {math.ceil(wait)} s.",
                headers={"Retry-After": str(math.ceil(wait))},
            )


async def no_limit(request: Request) -> None:
    return None
