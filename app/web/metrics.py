"""``GET /metrics``: the Prometheus text exposition of every gateway worker (``app.metrics``).

The endpoint is protected by ``settings.metrics_token``: it answers only a request carrying
``Authorization: Bearer <metrics_token>`` (compared in constant time). Without a configured
token the endpoint is off and answers 404, so a default deployment exposes nothing on the
public port. Prometheus sends the token with ``authorization: {credentials: ...}`` in its
scrape config.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, Response, request

from app import metrics
from app.errors import NotFound, Unauthenticated
from app.web.context import current_deps

bp = Blueprint("metrics", __name__)


def _authorized(expected: str, headers: list[str]) -> bool:
    """True when exactly one ``Authorization`` header is ``Bearer <expected>`` (any scheme case)."""
    if len(headers) != 1:
        return False
    scheme, _, token = headers[0].partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode(), expected.encode())


@bp.get("/metrics")
def scrape() -> Response:
    """Prometheus exposition (``text/plain; version=0.0.4``), summed over all workers.

    Errors: 404 ``NOT_FOUND`` when no ``metrics_token`` is configured; 401 ``UNAUTHENTICATED``
    when the bearer token is missing or wrong.
    """
    token = current_deps().settings.metrics_token
    if token is None:
        raise NotFound("no such endpoint")
    presented = request.headers.getlist("Authorization")
    if not _authorized(token.get_secret_value(), presented):
        raise Unauthenticated(log_detail="metrics scrape without the metrics token", presented=bool(presented))
    body, content_type = metrics.render_latest()
    return Response(body, status=200, content_type=content_type)
