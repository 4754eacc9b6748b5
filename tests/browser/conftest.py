"""Browser tests: Debian's headless Chromium (``/usr/bin/chromium``, installed by
``scripts/install.sh``) driven by Playwright against a live gateway (gunicorn behind the nginx
proxy it ships, as deployed) with a real
Redis, the embedded OPA engine over a test-only policy, and an SQLite decision log. The
console signs in with the development sign-in (the OIDC flow is covered by
``tests/api/test_console_oidc.py`` against a loopback identity provider). Screenshots go to
``var/test-artifacts/browser/`` (ignored by git); ``TOOLGATE_DOCS_SCREENSHOTS=1`` also writes
the ones the docs show to ``docs/img/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.approval_policies import write_policy
from tests.support.gateway import GatewayProcess
from tests.support.proxy import ProxyProcess

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = PROJECT_ROOT / "var" / "test-artifacts" / "browser"
#: The browser's own time zone: the console shows times in UTC and in this zone (no summer time,
#: a half-hour offset: a conversion that ignores it shows).
VIEWER_ZONE = "Asia/Kolkata"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


@dataclass(frozen=True)
class Served:
    """The proxy's URL (what browsers and tool services talk to)."""

    url: str


def serve(redis_url: str, tmp: Path, env: dict[str, str]) -> Iterator[Served]:
    """A gateway (one worker) behind the proxy, with the development sign-in, an SQLite
    decision log in ``tmp`` and ``env`` on top (e.g. the policy folder)."""
    process = GatewayProcess({
        "TOOLGATE_REDIS_URL": redis_url,
        "TOOLGATE_AUDIT_DSN": str(tmp / "decisions.sqlite"),
        "TOOLGATE_APPROVAL_KEYS": "k-browser:" + "b" * 40,
        "TOOLGATE_CONSOLE_DEV_SIGN_IN": "true",
        "TOOLGATE_CONSOLE_SECURE_COOKIES": "false",  # plain HTTP on loopback
        "TOOLGATE_APPROVAL_SWEEP_INTERVAL_S": "0",
        **env,
    }, workers=1, threads=4).start()
    proxy = ProxyProcess(f"127.0.0.1:{process.port}", tmp / "proxy").start()
    yield Served(proxy.url)
    proxy.stop()
    process.stop()


@pytest.fixture(scope="module")
def gateway(redis_server, tmp_path_factory) -> Iterator[Served]:
    """The gateway over the test-only approval policy (tests/support/approval_policies.py)."""
    tmp = tmp_path_factory.mktemp("console")
    policy = write_policy(tmp / "policy", {"grant_scopes": ["once", "duration"], "max_grant_ttl_s": 3600})
    yield from serve(redis_server.url, tmp, {"TOOLGATE_POLICY_DIR": str(policy)})


@pytest.fixture(scope="module")
def shipped_gateway(redis_server, tmp_path_factory) -> Iterator[Served]:
    """The gateway over the shipped policies and contracts (the settings' defaults)."""
    yield from serve(redis_server.url, tmp_path_factory.mktemp("console-shipped"), {})


@pytest.fixture(scope="module")
def browser(tmp_path_factory) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run bash scripts/install.sh")
    user_data = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(user_data), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, accept_downloads=True,
            viewport=DESKTOP, timezone_id=VIEWER_ZONE, locale="en-GB",
        )
        yield context
        context.close()


@pytest.fixture
def screenshot():
    """``screenshot(page, name, docs=False, full_page=True)``: a PNG of the page (of the viewport
    only without ``full_page``) in the artifacts folder (and in ``docs/img/`` when asked and
    ``TOOLGATE_DOCS_SCREENSHOTS=1``)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(page, name: str, docs: bool = False, full_page: bool = True) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        if docs and os.environ.get("TOOLGATE_DOCS_SCREENSHOTS") == "1":
            page.screenshot(path=str(PROJECT_ROOT / "docs" / "img" / f"{name}.png"), full_page=full_page)
        return path

    return take


def page_width_at_phone_size(page) -> int:
    """The page's width in CSS pixels (``scrollWidth`` of the document) once the viewport is a
    phone's (390 px); the viewport stays a phone's until ``page.set_viewport_size(DESKTOP)``."""
    page.set_viewport_size(PHONE)
    return page.evaluate("document.documentElement.scrollWidth")
