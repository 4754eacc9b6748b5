"""A live gateway for the client tests: gunicorn on a free loopback port, real Redis, real
embedded OPA engine, a real SQLite decision log, tokens signed with the test RSA key k1 and
verified through a loopback JWKS.

``ClientGateway`` wraps ``tests.support.gateway.GatewayProcess``, which writes gunicorn's
output to a file (a retry storm makes the gateway log more than a pipe holds; ``process.output()``
reads it). ``python -m tests.clients.gateway`` starts Redis, the JWKS and a gateway
on its own, prints one JSON line ``{"url", "tokens": {name: token}}`` and serves until its
standard input closes: the TypeScript tests (``clients/ai-sdk``) start it that way.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import requests

from tests.conftest import PROJECT_ROOT
from tests.support.calls import AUDIENCE, ISSUER, make_token
from tests.support.gateway import GatewayProcess
from tests.support.jwks_server import JwksServer
from tests.support.keys import K1, jwks
from tests.support.servers import RedisServer

#: The callers of the client tests: name -> (subject, roles), all of tenant ``acme``.
IDENTITIES: dict[str, tuple[str, list[str]]] = {
    "agent": ("agent-7", ["support_agent"]),
    "admin": ("admin-7", ["admin"]),
    "approver": ("approver-7", ["approver"]),
    "auditor": ("auditor-7", ["auditor"]),
    "holder": ("holder-7", ["account_holder"]),
}
TENANT = "acme"
METRICS_TOKEN = "client-tests-metrics-token"


def token_for(name: str, *, ttl_s: int = 3600) -> str:
    """A real RS256 token (key k1) for one of ``IDENTITIES``."""
    subject, roles = IDENTITIES[name]
    return make_token(subject, TENANT, roles, ttl_s=ttl_s)


def _client_policies(workdir: Path) -> Path:
    """The shipped policies with tenant acme's delete limits raised: the client tests delete as
    one subject, without a conversation id, many times over (the limits: docs/session.md)."""
    target = workdir / "policies"
    shutil.copytree(PROJECT_ROOT / "policies", target)
    tenant = target / "tenants" / TENANT / "data.json"
    data = json.loads(tenant.read_text())
    limits = data.setdefault("limits", {})
    limits.update(deletes_per_conversation=10_000, deletes_per_day=10_000)
    tenant.write_text(json.dumps(data))
    return target


class ClientGateway:
    """The gateway under gunicorn for client tests. ``env`` adds or overrides settings."""

    def __init__(self, *, redis_url: str, jwks_url: str, workdir: Path, workers: int = 1,
                 env: dict[str, str] | None = None) -> None:
        settings = {
            "TOOLGATE_POLICY_DIR": str(_client_policies(workdir)),
            "TOOLGATE_REDIS_URL": redis_url,
            "TOOLGATE_AUDIT_DSN": str(workdir / "decisions.sqlite"),
            "TOOLGATE_JWT_ALGORITHMS": "RS256",
            "TOOLGATE_JWT_ISSUER": ISSUER,
            "TOOLGATE_JWT_AUDIENCE": AUDIENCE,
            "TOOLGATE_JWT_JWKS_URL": jwks_url,
            "TOOLGATE_APPROVAL_KEYS": "k-client:" + "c" * 32,
            "TOOLGATE_METRICS_TOKEN": METRICS_TOKEN,
            "TOOLGATE_REDIS_SOCKET_TIMEOUT_MS": "1000",
            **(env or {}),
        }
        self.process = GatewayProcess(settings, workers=workers, threads=4)

    @property
    def url(self) -> str:
        return self.process.url

    def start(self) -> ClientGateway:
        self.process.start(timeout_s=60)
        return self

    def stop(self) -> None:
        self.process.stop(timeout_s=15)

    def errors_total(self, code: str) -> float:
        """``toolgate_errors_total{code=...}`` summed over the workers (0 before the first)."""
        from prometheus_client.parser import text_string_to_metric_families

        text = requests.get(self.url + "/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10).text
        total = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "toolgate_errors_total" and sample.labels.get("code") == code:
                    total += sample.value
        return total


def serve_until_stdin_closes() -> None:
    """Start Redis, the JWKS and a gateway; print ``{"url", "tokens"}``; stop all on EOF."""
    with tempfile.TemporaryDirectory(prefix="toolgate-client-gw-") as tmp:
        workdir = Path(tmp)
        redis = RedisServer(workdir / "redis").start()
        try:
            with JwksServer(jwks(K1)) as jwks_server:
                gateway = ClientGateway(redis_url=redis.url, jwks_url=jwks_server.jwks_url, workdir=workdir).start()
                try:
                    tokens = {name: token_for(name) for name in IDENTITIES}
                    print(json.dumps({"url": gateway.url, "tokens": tokens}), flush=True)
                    sys.stdin.read()
                finally:
                    gateway.stop()
        finally:
            redis.stop()


if __name__ == "__main__":
    serve_until_stdin_closes()
