"""``GET /healthz`` (process up) and ``GET /readyz`` (dependencies answer)."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.errors import ToolgateError
from app.web.context import current_deps
from app.web.requests import request_id

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz() -> Response:
    """Liveness: ``200 {"status": "ok"}`` while the process serves requests."""
    return jsonify({"status": "ok", "request_id": request_id()})


@bp.get("/readyz")
def readyz() -> tuple[Response, int]:
    """Readiness: ``{"status": "ok"|"unavailable", "checks": {name: "ok"|"unavailable"}}``;
    ``200`` when every check passes, ``503`` otherwise. Checks: the policy engine answers,
    the decision log answers."""
    checks = {}
    for name, probe in current_deps().readiness_checks().items():
        try:
            probe()
            checks[name] = "ok"
        except ToolgateError:
            checks[name] = "unavailable"
    ok = all(v == "ok" for v in checks.values())
    body = {"status": "ok" if ok else "unavailable", "checks": checks, "request_id": request_id()}
    return jsonify(body), 200 if ok else 503
