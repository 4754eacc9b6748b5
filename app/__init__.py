"""toolgate: a policy decision point for AI tool calls.

``create_app(settings=None, deps=None)`` is the one place where objects are built and wired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flask import Flask

from app.pipeline import Deps
from app.settings import Settings, load_settings

if TYPE_CHECKING:
    from app.contracts import ContractRegistry
    from app.engine.base import PolicyEngine


def build_deps(
    settings: Settings, *, engine: PolicyEngine | None = None, contracts: ContractRegistry | None = None
) -> Deps:
    """Build the pipeline's collaborators from settings (no network, no engine loaded yet).
    ``engine`` and ``contracts`` may be passed in already built (tests share one across apps)."""
    from app.audit import open_from_settings
    from app.auth import TokenVerifier
    from app.contracts import ContractRegistry
    from app.engine import build_engine
    from app.approvals import ApprovalService
    from app.grants import GrantSigner
    from app.idempotency import IdempotencyStore
    from app.redis_client import build_redis

    redis = build_redis(settings)  # the one Redis client of this process; share it
    decision_store = open_from_settings(settings)  # creates or migrates the schema if reachable
    return Deps(
        settings=settings,
        verifier=TokenVerifier(settings),
        contracts=contracts or ContractRegistry.load(settings.contracts_dir),
        engine=engine or build_engine(settings),
        idempotency=IdempotencyStore(
            redis, lease_s=settings.idempotency_lease_s, retention_s=settings.idempotency_retention_s
        ),
        approvals=ApprovalService(
            redis,
            GrantSigner(settings.approval_signing_keys),
            default_ttl_s=settings.approval_default_ttl_s,
            default_approver_roles=settings.approval_default_approver_roles,
            self_approve_roles=settings.approval_self_approve_roles,
        ),
        decision_log=decision_store,
        decision_reader=decision_store,
    )


def create_app(settings: Settings | None = None, deps: Deps | None = None) -> Flask:
    """The Flask app. ``settings`` defaults to the environment; ``deps`` to ``build_deps``.

    Raises ``SettingsError`` for invalid settings and ``ContractLoadError`` for a bad contract.
    """
    from app import web
    from app.logs import configure_logging
    from app.tracing import build_tracer

    settings = settings or (deps.settings if deps else load_settings())
    configure_logging(settings.log_level)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    # "/v1/executions//k/complete" must not be redirected to the record of key "k".
    app.url_map.merge_slashes = False
    app.json.sort_keys = False
    app.json.compact = True
    app.extensions["toolgate"] = deps or build_deps(settings)
    app.extensions["toolgate_tracer"] = build_tracer(settings)
    web.register(app)
    return app
