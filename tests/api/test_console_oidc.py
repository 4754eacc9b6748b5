"""The console's OpenID Connect sign-in (authorization code + PKCE) against a loopback
provider (tests/support/oidc_provider.py), through the real app: the happy path, and every
refusal (state, PKCE verifier, nonce, audience, issuer, missing tenant) leaves no session.
Also the console's settings rules and security headers."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
import requests

from app.settings import SettingsError, load_settings
from tests.support.oidc_provider import OidcProvider


@pytest.fixture
def provider():
    with OidcProvider() as running:
        yield running


@pytest.fixture
def console(make_app, provider):
    app = make_app(console_oidc_issuer=provider.issuer, console_oidc_client_id=provider.client_id,
                   console_oidc_client_secret=provider.client_secret, console_public_url="http://localhost",
                   console_secure_cookies=False)
    return app.test_client()


def _authorize(client) -> tuple[str, dict[str, str]]:
    """Start the sign-in; follow the provider's redirect; returns (callback path, its query)."""
    start = client.get("/console/oidc/login")
    assert start.status_code == 302
    location = start.headers["Location"]
    query = parse_qs(urlparse(location).query)
    assert query["code_challenge_method"] == ["S256"] and query["nonce"] and query["state"]
    assert "code_verifier" not in location
    back = requests.get(location, allow_redirects=False, timeout=5)
    callback = urlparse(back.headers["Location"])
    assert callback.path == "/console/oidc/callback"
    return callback.path, {k: v[0] for k, v in parse_qs(callback.query).items()}


def test_sign_in_with_the_identity_provider(console, provider):
    path, args = _authorize(console)
    done = console.get(path, query_string=args)
    assert done.status_code == 302 and done.headers["Location"].endswith("/console/inbox")
    cookie = done.headers.getlist("Set-Cookie")
    assert any(c.startswith("tg_console=") and "HttpOnly" in c and "SameSite=Lax" in c for c in cookie)
    page = console.get("/console/inbox")
    assert page.status_code == 200 and "u-oidc · acme · approver, auditor" in page.text
    assert "code_verifier" in provider.token_requests[-1]
    assert console.get("/console/audit").status_code == 200


@pytest.mark.parametrize("tamper", [{"nonce": "other"}, {"aud": "another-client"}, {"iss": "https://evil.example"},
                                    {"tenant": None}, {"exp": 1}])
def test_an_id_token_that_does_not_fit_is_refused(console, provider, tamper):
    provider.tamper = tamper
    path, args = _authorize(console)
    refused = console.get(path, query_string=args)
    assert refused.status_code == 403
    assert console.get("/console/inbox").status_code == 302  # no session


def test_a_callback_with_another_state_or_without_the_login_is_refused(console, provider, make_app):
    path, args = _authorize(console)
    assert console.get(path, query_string={**args, "state": "forged"}).status_code == 403
    fresh = make_app(console_oidc_issuer=provider.issuer, console_oidc_client_id=provider.client_id,
                     console_oidc_client_secret=provider.client_secret, console_public_url="http://localhost",
                     console_secure_cookies=False).test_client()
    assert fresh.get(path, query_string=args).status_code == 403  # a code without this browser's login cookie


def test_a_code_redeemed_with_another_logins_verifier_is_refused(console, provider):
    path, first = _authorize(console)
    _authorize(console)  # a second login replaces the login cookie (state and PKCE verifier)
    assert console.get(path, query_string=first).status_code == 403


def test_console_headers_and_settings(client):
    page = client.get("/console/sign-in")
    csp = page.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp and "'unsafe-inline'" not in csp
    assert page.headers["X-Frame-Options"] == "DENY" and page.headers["Cache-Control"] == "no-store"
    assert client.post("/console/sign-in/dev", data={"subject": "x", "tenant": "t"}).status_code == 404  # off by default
    with pytest.raises(SettingsError, match="development sign-in is refused"):
        load_settings(env="production", console_dev_sign_in=True, jwt_hs256_secret="s" * 40, jwt_issuer="https://i",
                      jwt_audience="a", audit_key_hash_secret="h" * 40)
    with pytest.raises(SettingsError, match="OpenID Connect"):
        load_settings(console_oidc_issuer="https://idp.example")


def test_the_development_sign_in_needs_its_login_token(make_app):
    client = make_app(console_dev_sign_in=True, console_secure_cookies=False).test_client()
    refused = client.post("/console/sign-in/dev", data={"subject": "u-1", "tenant": "acme", "roles": "approver"})
    assert refused.status_code == 403
    page = client.get("/console/sign-in").text
    token = page.split('name="login_token" value="')[1].split('"')[0]
    ok = client.post("/console/sign-in/dev", data={"login_token": token, "subject": "u-1", "tenant": "acme", "roles": "approver"})
    assert ok.status_code == 302 and client.get("/console/inbox").status_code == 200
