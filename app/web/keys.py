"""``GET /.well-known/toolgate-keys``: the public keys that verify decision receipts and
decision-log checkpoints (``app.receipts.keys``), for verifiers working offline."""

from __future__ import annotations

from flask import Blueprint, Response, jsonify

from app.models import PublishedKeys
from app.web.context import current_deps

bp = Blueprint("keys", __name__)

#: Verifiers may cache the key set this long (seconds); a rotation publishes the new key
#: before it signs, so a cached set never misses a key in use for longer than this.
CACHE_S = 300


@bp.get("/.well-known/toolgate-keys")
def published_keys() -> Response:
    """``PublishedKeys`` ``{"keys": [JWK], "checkpoint_keys": [JWK]}`` (no authentication;
    public keys only; a list is empty when that kind of signature is off)."""
    body = PublishedKeys.model_validate(current_deps().published_keys)
    response = jsonify(body.model_dump(mode="json"))
    response.headers["Cache-Control"] = f"public, max-age={CACHE_S}"
    return response
