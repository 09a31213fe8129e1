"""A local OpenID Connect provider for tests: real RS256 tokens, on 127.0.0.1, in a thread.

It implements the parts of the authorization code flow a relying party touches, and
checks what a real provider checks, so a portal that skipped a step would fail here:

- ``/.well-known/openid-configuration`` and ``/jwks`` (one RSA key, with a ``kid``);
- ``/authorize`` approves at once whoever ``login_as`` named and redirects back with a
  single-use code (it refuses an unknown client or redirect URI);
- ``/token`` checks the client secret, the redirect URI and the PKCE verifier, and
  returns an ID token signed with the provider's key;
- ``/userinfo`` answers for a bearer access token.

Knobs for the refusal tests: ``id_token_claims`` overrides claims of the next ID token
(a wrong ``aud``, an ``exp`` in the past) and ``sign_with_stranger_key`` signs it with a
key the JWKS does not hold, under the same ``kid``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "gpu-portal"
CLIENT_SECRET = "portal-client-secret"
KID = "test-key-1"


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class OIDCProvider:
    def __init__(self) -> None:
        self.key = _new_key()
        self.stranger_key = _new_key()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self.reset()

    def start(self) -> OIDCProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def reset(self) -> None:
        self.user: dict[str, Any] | None = None
        self.codes: dict[str, dict[str, Any]] = {}
        self.access_tokens: dict[str, dict[str, Any]] = {}
        self.id_token_claims: dict[str, Any] = {}
        self.userinfo_claims: dict[str, Any] = {}
        self.sign_with_stranger_key = False
        self.discovery_issuer: str | None = None
        self.redirect_uris = {"http://testserver/oidc/callback/"}
        self.token_requests = 0

    def login_as(self, username: str, groups: list[str], **claims: Any) -> None:
        """Who the next /authorize approves: their claims, with ``sub`` derived from the username."""
        self.user = {
            "sub": f"sub-{username}",
            "preferred_username": username,
            "email": f"{username}@example.com",
            "groups": groups,
            **claims,
        }

    # -- what the endpoints do -------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.discovery_issuer or self.url,
            "authorization_endpoint": f"{self.url}/authorize",
            "token_endpoint": f"{self.url}/token",
            "userinfo_endpoint": f"{self.url}/userinfo",
            "jwks_uri": f"{self.url}/jwks",
            "response_types_supported": ["code"],
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
        }

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        if query.get("client_id") != CLIENT_ID or query.get("redirect_uri") not in self.redirect_uris:
            return 400, {}, {"error": "unauthorized_client"}
        if query.get("response_type") != "code" or "openid" not in query.get("scope", "").split():
            return 400, {}, {"error": "invalid_request"}
        if self.user is None:
            return 400, {}, {"error": "access_denied"}
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "user": dict(self.user),
            "nonce": query.get("nonce"),
            "redirect_uri": query["redirect_uri"],
            "challenge": query.get("code_challenge"),
            "method": query.get("code_challenge_method"),
        }
        location = f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query.get('state', '')})}"
        return 302, {"Location": location}, None

    def token(self, form: dict[str, str], basic: tuple[str, str] | None) -> tuple[int, dict[str, str], Any]:
        self.token_requests += 1
        client_id, client_secret = basic or (form.get("client_id"), form.get("client_secret"))
        if (client_id, client_secret) != (CLIENT_ID, CLIENT_SECRET):
            return 401, {}, {"error": "invalid_client"}
        grant = self.codes.pop(form.get("code", ""), None)  # single use
        if form.get("grant_type") != "authorization_code" or grant is None:
            return 400, {}, {"error": "invalid_grant"}
        if form.get("redirect_uri") != grant["redirect_uri"]:
            return 400, {}, {"error": "invalid_grant", "error_description": "redirect_uri differs"}
        if grant["challenge"]:
            verifier = form.get("code_verifier", "").encode()
            expected = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if grant["method"] != "S256" or expected != grant["challenge"]:
                return 400, {}, {"error": "invalid_grant", "error_description": "PKCE verification failed"}
        user = grant["user"]
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": user["sub"],
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + 300,
            "nonce": grant["nonce"],
            **user,
            **self.id_token_claims,
        }
        claims = {k: v for k, v in claims.items() if v is not None}
        key = self.stranger_key if self.sign_with_stranger_key else self.key
        id_token = jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})
        access_token = secrets.token_urlsafe(24)
        self.access_tokens[access_token] = {**user, **self.userinfo_claims}
        body = {"access_token": access_token, "token_type": "Bearer", "expires_in": 300, "id_token": id_token}
        return 200, {"Cache-Control": "no-store"}, body

    def userinfo(self, authorization: str) -> tuple[int, dict[str, str], Any]:
        scheme, _, token = authorization.partition(" ")
        claims = self.access_tokens.get(token) if scheme.lower() == "bearer" else None
        if claims is None:
            return 401, {"WWW-Authenticate": 'Bearer error="invalid_token"'}, {"error": "invalid_token"}
        return 200, {}, claims


def _handler(provider: OIDCProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if url.path == "/.well-known/openid-configuration":
                self._send(200, {}, provider.discovery())
            elif url.path == "/jwks":
                self._send(200, {}, provider.jwks())
            elif url.path == "/authorize":
                self._send(*provider.authorize(query))
            elif url.path == "/userinfo":
                self._send(*provider.userinfo(self.headers.get("Authorization", "")))
            else:
                self._send(404, {}, {"error": "not_found"})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            if urlsplit(self.path).path != "/token":
                self._send(404, {}, {"error": "not_found"})
                return
            basic = None
            scheme, _, value = self.headers.get("Authorization", "").partition(" ")
            if scheme.lower() == "basic":
                user, _, password = base64.b64decode(value).decode().partition(":")
                basic = (user, password)
            self._send(*provider.token(form, basic))

        def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
            data = b"" if body is None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
