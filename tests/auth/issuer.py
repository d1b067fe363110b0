"""A token issuer of the tests' own: RSA and EC P-256 keys made with ``cryptography``, their
JWKS (a file, or served at a URL), and JWTs signed with PyJWT, as an identity provider
would issue them. Nothing here is the relay's code: the relay verifies what this signs."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa

ISSUER = "https://id.example.test/"
AUDIENCE = "span-relay"


class Issuer:
    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.rsa_kid = f"rsa-{uuid.uuid4().hex[:8]}"
        self.ec_kid = f"ec-{uuid.uuid4().hex[:8]}"

    def jwks(self) -> dict[str, Any]:
        keys = []
        pairs: list[tuple[str, Any, str, Any]] = [
            (self.rsa_kid, self.rsa, "RS256", jwt.algorithms.RSAAlgorithm),
            (self.ec_kid, self.ec, "ES256", jwt.algorithms.ECAlgorithm),
        ]
        for kid, key, alg, algorithm in pairs:
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            jwk.update(kid=kid, alg=alg, use="sig")
            keys.append(jwk)
        return {"keys": keys}

    def write_jwks(self, path: Path) -> Path:
        path.write_text(json.dumps(self.jwks()))
        return path

    def token(
        self,
        sub: str | None = "alice",
        *,
        alg: str = "RS256",
        kid: str | None = "",
        key: Any = None,
        lifetime_s: float = 300,
        **claims: Any,
    ) -> str:
        """A signed JWT; ``kid=""`` names the issuer's key of ``alg``, None names none;
        ``key`` signs with another key (a forgery); ``claims`` override or add."""
        now = time.time()
        payload: dict[str, Any] = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "iat": int(now),
            "exp": int(now + lifetime_s),
        }
        if sub is not None:
            payload["sub"] = sub
        payload.update(claims)
        payload = {k: v for k, v in payload.items() if v is not None}
        if key is None:
            key = self.rsa if alg == "RS256" else self.ec
        headers = {}
        if kid == "":
            headers["kid"] = self.rsa_kid if alg == "RS256" else self.ec_kid
        elif kid is not None:
            headers["kid"] = kid
        return jwt.encode(payload, key, algorithm=alg, headers=headers)

    def env(self, jwks: Path | str) -> dict[str, str]:
        """The relay's settings that trust this issuer."""
        return {
            "RELAY_AUTH": "jwt",
            "RELAY_JWT_JWKS": str(jwks),
            "RELAY_JWT_ISSUER": ISSUER,
            "RELAY_JWT_AUDIENCE": AUDIENCE,
        }


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}
