"""``GET /healthz`` (process up) and ``GET /readyz`` (dependencies answer)."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, jsonify

from app.decide.deps import Deps
from app.errors import ToolgateError
from app.web.context import current_deps
from app.web.requests import request_id

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """Liveness: ``200 {"status": "ok"}`` while the process serves requests; a development
    gateway adds ``"development": true`` (what ``toolgate replay`` checks before it sends
    development tokens; production says nothing about itself)."""
    body: dict[str, object] = {"status": "ok", "request_id": request_id()}
    if current_deps().settings.env == "development":
        body["development"] = True
    return jsonify(body)


def _checks(deps: Deps) -> dict[str, Callable[[], None]]:
    """Named probes, each raising ``ToolgateError`` when not ready: the pipeline's own (policy
    engine, decision log) and Redis (``PING``)."""
    checks = dict(deps.readiness_checks())
    checks.setdefault("redis", deps.redis.ping)
    return checks


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Readiness: ``{"status": "ok"|"unavailable", "checks": {name: "ok"|"unavailable"},
    "details": {"policy_engine": {...}, "shadow_policy"?: {...}}}``; ``200`` when every check
    passes, ``503`` otherwise.
    Checks: the policy engine answers (embedded: a bundle is active; sidecar: ``/health?bundles``),
    the decision log, Redis. ``details.policy_engine`` is the engine's status without
    operator-only messages: the active revision, reloads, the last refused bundle's time and
    kind (embedded) or the sidecar's bundle state (``active_revision``, ``failing``).
    ``details.shadow_policy`` (with a candidate only) is the candidate's status the same way, plus
    its ``deadline_ms`` and ``workers``; it is no check: a shadow never makes a gateway unready."""
    deps = current_deps()
    checks = {}
    for name, probe in _checks(deps).items():
        try:
            probe()
            checks[name] = "ok"
        except ToolgateError:
            checks[name] = "unavailable"
    ok = all(v == "ok" for v in checks.values())
    details = {"policy_engine": deps.engine.status(with_detail=False)}
    if deps.shadow is not None:
        details["shadow_policy"] = deps.shadow.status()
    body = {"status": "ok" if ok else "unavailable", "checks": checks, "details": details, "request_id": request_id()}
    return jsonify(body), 200 if ok else 503
