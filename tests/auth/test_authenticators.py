"""The authenticators of relay/auth against tokens a real identity provider's library
signs (tests/auth/issuer.py): every check of ``RELAY_AUTH=jwt`` refused once, the
``proxy`` mode with and without its secret, and the settings each mode needs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from relay.auth import Unauthenticated, open_authenticator
from relay.auth.jwks import MAX_AGE_S, REFRESH_MIN_S, JwksKeys
from relay.auth.jwt_user import JwtUser
from relay.settings import ConfigError, RelaySettings
from tests.auth.issuer import AUDIENCE, ISSUER, Issuer, bearer


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def verifier(issuer: Issuer, tmp_path: Path) -> JwtUser:
    settings = RelaySettings.from_env(issuer.env(issuer.write_jwks(tmp_path / "jwks.json")))
    authenticator = open_authenticator(settings)
    assert isinstance(authenticator, JwtUser)
    return authenticator


def check(authenticator: Any, headers: dict[str, str]) -> Any:
    return asyncio.run(authenticator.authenticate(headers))


def refused(authenticator: Any, headers: dict[str, str]) -> Unauthenticated:
    with pytest.raises(Unauthenticated) as info:
        check(authenticator, headers)
    return info.value


@pytest.mark.parametrize("alg", ["RS256", "ES256"])
def test_a_good_token_is_its_subject(verifier: JwtUser, issuer: Issuer, alg: str) -> None:
    user = check(verifier, bearer(issuer.token("alice", alg=alg, email="a@example.test")))
    assert user.id == "alice"
    assert user.claims["email"] == "a@example.test" and user.claims["iss"] == ISSUER
    assert user.as_config() == {"id": "alice", "claims": dict(user.claims)}


@pytest.mark.parametrize(
    ("token_of", "reason"),
    [
        (lambda i: i.token(lifetime_s=-120), "expired"),
        (lambda i: i.token(aud="another-service"), "another audience"),
        (lambda i: i.token(iss="https://evil.example.test/"), "another issuer"),
        (
            lambda i: i.token(key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
            "signature does not verify",
        ),
        (
            lambda i: i.token(alg="ES256", key=ec.generate_private_key(ec.SECP256R1())),
            "signature does not verify",
        ),
        (lambda i: i.token(kid="no-such-key"), "key the relay does not know"),
        (lambda i: i.token(sub=None), "lacks a required claim"),
        (lambda i: i.token(exp=None), "lacks a required claim"),
        (lambda i: i.token(nbf=4102444800), "not valid yet"),
        (lambda i: "not.a.jwt", "not a JWT"),
        (
            lambda i: jwt.encode(
                {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": 4102444800},
                None,
                algorithm="none",
            ),
            "algorithm",
        ),
        # the classic confusion: HMAC keyed with the issuer's public key
        (
            lambda i: jwt.encode(
                {"sub": "alice", "iss": ISSUER, "aud": AUDIENCE, "exp": 4102444800},
                "a-shared-secret-of-32-bytes-long!",
                algorithm="HS256",
                headers={"kid": i.rsa_kid},
            ),
            "algorithm",
        ),
        # a key of one type named for the other's algorithm
        (lambda i: i.token(alg="ES256", kid=i.rsa_kid), "does not sign with ES256"),
    ],
)
def test_each_bad_token_is_a_401_that_says_why(
    verifier: JwtUser, issuer: Issuer, token_of: Any, reason: str
) -> None:
    error = refused(verifier, bearer(token_of(issuer)))
    assert reason in str(error)
    assert error.challenge.startswith('Bearer realm="span-relay", error="invalid_token"')


def test_clock_skew_is_allowed_up_to_the_leeway(verifier: JwtUser, issuer: Issuer) -> None:
    assert verifier.leeway_s == 30
    assert check(verifier, bearer(issuer.token(lifetime_s=-10))).id == "alice"
    refused(verifier, bearer(issuer.token(lifetime_s=-60)))


def test_no_credential_is_a_401_with_a_challenge(verifier: JwtUser) -> None:
    for headers in ({}, {"authorization": "Basic YWxpY2U6eA=="}, {"authorization": "Bearer "}):
        error = refused(verifier, headers)
        assert error.challenge == 'Bearer realm="span-relay"'


class _Jwks:
    """A JWKS served over HTTP on 127.0.0.1 (an identity provider's well-known URL)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.fetches = 0
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                served.fetches += 1
                data = json.dumps(served.body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/.well-known/jwks.json"


@pytest.fixture
def served(issuer: Issuer) -> Iterator[_Jwks]:
    jwks = _Jwks({"keys": [issuer.jwks()["keys"][1]]})  # the EC key only, at first
    yield jwks
    jwks.server.shutdown()


def test_a_jwks_url_is_fetched_once_and_again_for_a_rotated_key(
    issuer: Issuer, served: _Jwks
) -> None:
    verifier = open_authenticator(RelaySettings.from_env(issuer.env(served.url)))
    assert isinstance(verifier, JwtUser)
    now = [1000.0]
    verifier.keys = JwksKeys(served.url, clock=lambda: now[0])  # time moves when told

    async def scenario() -> None:
        assert (await verifier.authenticate(bearer(issuer.token(alg="ES256")))).id == "alice"
        assert (await verifier.authenticate(bearer(issuer.token("bob", alg="ES256")))).id == "bob"
        assert served.fetches == 1  # kept
        served.body = issuer.jwks()  # the issuer rotates in its RSA key
        with pytest.raises(Unauthenticated):  # looked again less than a minute ago: not yet
            await verifier.authenticate(bearer(issuer.token("carol")))
        now[0] += REFRESH_MIN_S
        assert (await verifier.authenticate(bearer(issuer.token("carol")))).id == "carol"
        assert served.fetches == 2  # an unknown kid looked once more
        with pytest.raises(Unauthenticated):  # made-up kids do not fetch on every request
            await verifier.authenticate(bearer(issuer.token(kid="made-up")))
        assert served.fetches == 2
        now[0] += MAX_AGE_S + 1  # an old copy is read again
        assert (await verifier.authenticate(bearer(issuer.token("dave")))).id == "dave"
        assert served.fetches == 3

    asyncio.run(scenario())


def test_an_unreachable_jwks_is_a_401_saying_so(issuer: Issuer) -> None:
    verifier = open_authenticator(
        RelaySettings.from_env(issuer.env("http://127.0.0.1:9/jwks.json"))
    )
    error = refused(verifier, bearer(issuer.token()))
    assert "key set is unavailable" in str(error)


# -- proxy ---------------------------------------------------------------------------------

SECRET = "s" * 24


def proxy(**env: str) -> Any:
    return open_authenticator(
        RelaySettings.from_env({"RELAY_AUTH": "proxy", "RELAY_PROXY_SECRET": SECRET, **env})
    )


def test_the_proxy_user_header_is_taken_only_with_the_secret() -> None:
    authenticator = proxy()
    user = check(authenticator, {"x-forwarded-user": "alice", "x-relay-proxy-secret": SECRET})
    assert user.id == "alice" and user.claims == {"sub": "alice"}
    for headers in (
        {"x-forwarded-user": "alice"},  # a client that reached the relay itself
        {"x-forwarded-user": "alice", "x-relay-proxy-secret": "s" * 23},
        {"x-relay-proxy-secret": SECRET},  # the proxy named nobody
        {"x-forwarded-user": "", "x-relay-proxy-secret": SECRET},
    ):
        assert refused(authenticator, headers).challenge == 'Proxy realm="span-relay"'


def test_the_proxy_user_header_is_a_setting() -> None:
    authenticator = proxy(RELAY_PROXY_USER_HEADER="X-Auth-Request-User")
    headers = {"x-auth-request-user": "bob", "x-relay-proxy-secret": SECRET}
    assert check(authenticator, headers).id == "bob"
    refused(authenticator, {"x-forwarded-user": "bob", "x-relay-proxy-secret": SECRET})


def test_the_shared_token_has_no_users() -> None:
    authenticator = open_authenticator(RelaySettings.from_env({"RELAY_API_TOKEN": "t0ken"}))
    assert authenticator.mode == "token"
    assert check(authenticator, {"authorization": "Bearer t0ken"}) is None
    refused(authenticator, {"authorization": "Bearer nope"})
    assert check(open_authenticator(RelaySettings.from_env({})), {}) is None


# -- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"RELAY_AUTH": "oauth"}, "RELAY_AUTH='oauth'"),
        ({"RELAY_AUTH": "token"}, "RELAY_API_TOKEN"),
        ({"RELAY_AUTH": "none", "RELAY_API_TOKEN": "x"}, "RELAY_AUTH=token"),
        ({"RELAY_AUTH": "jwt"}, "RELAY_JWT_JWKS, RELAY_JWT_ISSUER, RELAY_JWT_AUDIENCE"),
        (
            {
                "RELAY_AUTH": "jwt",
                "RELAY_JWT_JWKS": "/no/such/jwks.json",
                "RELAY_JWT_ISSUER": "i",
                "RELAY_JWT_AUDIENCE": "a",
            },
            "neither an http(s) URL nor a readable file",
        ),
        ({"RELAY_AUTH": "proxy"}, "RELAY_PROXY_SECRET"),
        ({"RELAY_AUTH": "proxy", "RELAY_PROXY_SECRET": "short"}, "16 characters"),
    ],
)
def test_each_mode_refuses_to_start_without_what_it_needs(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env(env)
    assert names in str(info.value)


def test_the_otlp_receiver_keeps_its_own_credential_with_users(
    issuer: Issuer, tmp_path: Path
) -> None:
    env = {**issuer.env(issuer.write_jwks(tmp_path / "jwks.json")), "RELAY_OTLP_HTTP": "1"}
    with pytest.raises(ConfigError) as info:
        RelaySettings.from_env(env)
    assert "RELAY_API_TOKEN" in str(info.value)
    settings = RelaySettings.from_env({**env, "RELAY_API_TOKEN": "collector-token"})
    assert settings.auth == "jwt" and settings.has_users
