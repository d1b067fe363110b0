"""The keys a JWT is verified against: a JWKS file (``RELAY_JWT_JWKS=/path/jwks.json``)
or URL (``https://issuer/.well-known/jwks.json``), parsed by PyJWT.

Loaded on first use and kept; a token that names a key id the set does not have makes it
look again (an issuer rotated its keys), at most once per :data:`REFRESH_MIN_S`, so a
stream of tokens with made-up key ids costs one fetch a minute, not one each. A URL is
fetched in a worker thread (the event loop never waits on it) and also re-read once the
copy is :data:`MAX_AGE_S` old. While it cannot be fetched, the keys already held serve.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import jwt

log = logging.getLogger("relay.auth")

REFRESH_MIN_S = 60.0
MAX_AGE_S = 3600.0
FETCH_TIMEOUT_S = 5.0
MAX_JWKS_BYTES = 1024 * 1024


class KeysUnavailable(Exception):
    """No key set could be read (yet): the token cannot be checked."""


def is_url(source: str) -> bool:
    return source.startswith(("https://", "http://"))


class JwksKeys:
    def __init__(self, source: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self.clock = clock
        self._keys: dict[str | None, jwt.PyJWK] = {}
        self._loaded_at: float | None = None
        self._tried_at = float("-inf")
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None) -> jwt.PyJWK | None:
        """The key ``kid`` names (None: the set's only key), or None when the set has
        none such, even after looking again."""
        now = self.clock()
        stale = self._loaded_at is None or (
            is_url(self.source) and now - self._loaded_at > MAX_AGE_S
        )
        found = self._find(kid)
        if found is not None and not stale:
            return found
        if stale or now - self._tried_at >= REFRESH_MIN_S:
            await self._refresh()
        if self._loaded_at is None:
            raise KeysUnavailable(f"the key set {self.source} could not be read")
        return self._find(kid)

    def _find(self, kid: str | None) -> jwt.PyJWK | None:
        if kid is None:
            return next(iter(self._keys.values())) if len(self._keys) == 1 else None
        return self._keys.get(kid)

    async def _refresh(self) -> None:
        async with self._lock:
            now = self.clock()
            if now - self._tried_at < 1.0:  # another request just did
                return
            self._tried_at = now
            try:
                text = await asyncio.to_thread(self._read)
                keys = jwt.PyJWKSet.from_json(text).keys
            except Exception as exc:  # unreachable, not JSON, no usable key
                log.warning("auth: could not read the JWKS %s: %s", self.source, exc)
                return
            self._keys = {k.key_id: k for k in keys}
            self._loaded_at = now

    def _read(self) -> str:
        if not is_url(self.source):
            return Path(self.source).read_text("utf-8")
        request = urllib.request.Request(self.source, headers={"Accept": "application/json"})
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:
            body: bytes = response.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise ValueError(f"over {MAX_JWKS_BYTES} bytes")
        return body.decode("utf-8")
