"""``RELAY_AUTH=jwt``: ``Authorization: Bearer <JWT>``, verified by PyJWT.

Checked: the signature against the JWKS key the token's ``kid`` names (RS256 or ES256
only, and only with a key of the matching type: no ``none``, no HMAC with a public key),
``iss`` = ``RELAY_JWT_ISSUER``, ``aud`` holds ``RELAY_JWT_AUDIENCE``, ``exp`` (required)
and ``nbf``/``iat`` with ``RELAY_JWT_LEEWAY_S`` of clock skew, and a ``sub``: the user.
Each failure is a 401 whose ``WWW-Authenticate`` says ``error="invalid_token"`` (RFC 6750)
and whose message says which check failed, never the token.
"""

from __future__ import annotations

from collections.abc import Mapping

import jwt

from relay.auth.base import Unauthenticated, User
from relay.auth.jwks import JwksKeys, KeysUnavailable
from relay.auth.token import bearer

#: the signature algorithms taken, and the key type each needs
ALGORITHMS = {"RS256": "RSA", "ES256": "EC"}
_REALM = 'Bearer realm="span-relay"'
_REASONS: list[tuple[type[Exception], str]] = [
    (jwt.ExpiredSignatureError, "the token has expired"),
    (jwt.ImmatureSignatureError, "the token is not valid yet"),
    (jwt.InvalidAudienceError, "the token is for another audience"),
    (jwt.InvalidIssuerError, "the token is from another issuer"),
    (jwt.MissingRequiredClaimError, "the token lacks a required claim"),
    (jwt.InvalidSignatureError, "the token's signature does not verify"),
]


def _invalid(reason: str) -> Unauthenticated:
    return Unauthenticated(
        f"The bearer token was not accepted: {reason}.",
        f'{_REALM}, error="invalid_token", error_description="{reason}"',
    )


class JwtUser:
    mode = "jwt"

    def __init__(self, jwks: str, issuer: str, audience: str, leeway_s: float) -> None:
        self.keys = JwksKeys(jwks)
        self.issuer = issuer
        self.audience = audience
        self.leeway_s = leeway_s

    async def authenticate(self, headers: Mapping[str, str]) -> User:
        token = bearer(headers)
        if token is None:
            raise Unauthenticated("This API needs an 'Authorization: Bearer <JWT>' header.", _REALM)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise _invalid("it is not a JWT") from None
        algorithm = header.get("alg")
        kid = header.get("kid")
        if algorithm not in ALGORITHMS:
            raise _invalid(f"its algorithm is not one of {', '.join(ALGORITHMS)}")
        if kid is not None and not isinstance(kid, str):
            raise _invalid("its key id is not a string")
        try:
            key = await self.keys.key(kid)
        except KeysUnavailable:
            raise Unauthenticated(
                "The relay cannot check tokens right now (its key set "
                "is unavailable); retry shortly.",
                _REALM,
            ) from None
        if key is None:
            raise _invalid("it is signed with a key the relay does not know")
        if key.key_type != ALGORITHMS[algorithm] or key.algorithm_name != algorithm:
            raise _invalid(f"its key does not sign with {algorithm}")
        try:
            claims = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.InvalidTokenError as exc:
            reason = next(
                (why for kind, why in _REASONS if isinstance(exc, kind)), "it is malformed"
            )
            raise _invalid(reason) from None
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise _invalid("its subject is empty")
        return User(sub, claims)
