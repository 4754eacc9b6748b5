"""A small OpenID Connect provider on loopback for the console's sign-in tests: discovery,
an authorization endpoint that signs in ``user`` at once (no login page), a token endpoint
that checks the code, the redirect URI, the client and the PKCE S256 verifier, and a JWKS. ID
tokens are RS256 (key K2) with ``iss``, ``aud`` (the client id), ``sub``, tenant, roles,
``nonce``, ``iat`` and ``exp``. ``tamper`` changes the next ID token's claims (tests of refusals).

It stands in for a real identity provider (none can run here); the console's client side
(Authlib, PyJWT) is the real one.
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
from urllib.parse import parse_qs, urlencode, urlparse

from tests.support.keys import K2, jwks


class OidcProvider:
    def __init__(self, client_id: str = "toolgate-console", client_secret: str = "console-secret-of-enough-length") -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.user: dict[str, Any] = {"sub": "u-oidc", "tenant": "acme", "roles": ["approver", "auditor"]}
        self.tamper: dict[str, Any] = {}
        self.codes: dict[str, dict[str, str]] = {}
        self.token_requests: list[dict[str, str]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path == "/.well-known/openid-configuration":
                    self._json(200, provider.metadata())
                elif url.path == "/jwks":
                    self._json(200, jwks(K2))
                elif url.path == "/authorize":
                    args = {k: v[0] for k, v in parse_qs(url.query).items()}
                    ok = (args.get("response_type") == "code" and args.get("client_id") == provider.client_id
                          and args.get("code_challenge_method") == "S256" and args.get("code_challenge"))
                    if not ok:
                        self._json(400, {"error": "invalid_request"})
                        return
                    code = secrets.token_urlsafe(16)
                    provider.codes[code] = args
                    self.send_response(302)
                    self.send_header("Location", args["redirect_uri"] + "?" + urlencode({"code": code, "state": args.get("state", "")}))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                form = {k: v[0] for k, v in parse_qs(body).items()}
                provider.token_requests.append(form)
                issued = provider.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "")
                challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                if (issued is None or form.get("grant_type") != "authorization_code" or form.get("client_id") != provider.client_id
                        or form.get("client_secret") != provider.client_secret or form.get("redirect_uri") != issued["redirect_uri"]
                        or challenge != issued["code_challenge"]):
                    self._json(400, {"error": "invalid_grant"})
                    return
                now = int(time.time())
                claims = {"iss": provider.issuer, "aud": provider.client_id, "iat": now, "exp": now + 300,
                          "nonce": issued.get("nonce"), **provider.user, **provider.tamper}
                self._json(200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "expires_in": 300,
                                 "id_token": K2.token(claims)})

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def metadata(self) -> dict[str, Any]:
        return {"issuer": self.issuer, "authorization_endpoint": self.issuer + "/authorize",
                "token_endpoint": self.issuer + "/token", "jwks_uri": self.issuer + "/jwks",
                "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
                "id_token_signing_alg_values_supported": ["RS256"]}

    def __enter__(self) -> OidcProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
