"""toolgate: a policy decision point for AI tool calls.

``create_app(settings=None, deps=None)`` is the one place where objects are built and wired.
Nothing is imported here at module level, so ``import app.errors`` loads ``app`` and
``app.errors`` only; the layers below are imported when the app is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from flask import Flask

    from app.contracts.registry import ContractRegistry
    from app.decide.deps import Deps
    from app.engine.base import PolicyEngine
    from app.session.declarations import DeclarationsAudit
    from app.settings import Settings


def build_deps(
    settings: Settings,
    *,
    engine: PolicyEngine | None = None,
    contracts: ContractRegistry | None = None,
    capability_engine: PolicyEngine | None = None,
) -> Deps:
    """Build the collaborators from settings (no network, no engine loaded yet). ``engine``,
    ``capability_engine`` and ``contracts`` may be passed in already built (tests share them
    across apps).

    Raises ``SettingsError`` for an unusable key configuration and ``ContractLoadError`` for a
    bad contract.
    """
    from app.approvals.service import ApprovalService
    from app.audit.checkpoints import CheckpointingLog, CheckpointWriter, checkpoint_ring, checkpoint_sinks
    from app.audit.interfaces import DecisionLog
    from app.audit.stores import open_from_settings
    from app.auth.verifier import TokenVerifier
    from app.contracts.registry import ContractRegistry
    from app.decide.deps import Deps
    from app.decide.recorder import Recorder
    from app.engine import build_engine, build_shadow
    from app.idempotency.store import IdempotencyStore
    from app.policy.archive import PolicyArchive
    from app.policy.toolchain import opa_binary
    from app.provenance.store import ProvenanceStore
    from app.receipts.keys import key_document
    from app.receipts.signer import receipt_signer
    from app.redis_client import build_redis
    from app.session.reads import SessionReads
    from app.session.store import SessionStore

    redis = build_redis(settings)  # the one Redis client of this process; share it
    decision_store = open_from_settings(settings)  # creates or migrates the schema if reachable
    checkpoint_keys = checkpoint_ring(settings)
    decision_log: DecisionLog = decision_store
    if checkpoint_keys is not None:
        writer = CheckpointWriter(checkpoint_keys, checkpoint_sinks(settings, redis))
        decision_log = CheckpointingLog(decision_store, writer, interval_s=settings.checkpoint_interval_s)
    receipts = receipt_signer(settings)
    archive = PolicyArchive(decision_store)  # every activated policy revision, for policy explain
    _warn_about_signing_keys(settings, checkpoints=checkpoint_keys is not None, receipts=receipts is not None)
    engine = engine or build_engine(settings, on_activate=archive.keep)
    session_reads = SessionReads(engine, _declarations_audit(engine, opa_binary()))
    return Deps(
        settings=settings,
        verifier=TokenVerifier(settings),
        contracts=contracts or ContractRegistry.load(settings.contracts_dir),
        engine=engine,
        redis=redis,
        idempotency=IdempotencyStore.from_settings(redis, settings),
        approvals=ApprovalService.from_settings(redis, settings),
        sessions=SessionStore(redis, settings),
        decision_log=decision_log,
        decision_reader=decision_store,
        recorder=Recorder(decision_log, key_hash_secret=settings.audit_key_hash_secret.get_secret_value()),
        capability_engine=capability_engine
        or build_engine(settings.model_copy(update={"decision_path": settings.capability_path})),
        session_reads=session_reads,
        provenance=ProvenanceStore(redis, settings),
        receipts=receipts,
        published_keys=key_document(
            receipts.public_keys if receipts else None, checkpoint_keys.public if checkpoint_keys else None
        ),
        shadow=build_shadow(settings, on_activate=archive.keep),
    )


def _declarations_audit(engine: PolicyEngine, opa: Path | None) -> DeclarationsAudit:
    """The check of ``engine``'s ``session_reads`` declarations (``app.session.declarations``);
    an engine that cannot show its modules is never trusted."""
    from app.session.declarations import DeclarationsAudit

    modules = getattr(engine, "policy_modules", None)
    return DeclarationsAudit(modules if callable(modules) else lambda: None, opa)


def _warn_about_signing_keys(settings: Settings, *, checkpoints: bool, receipts: bool) -> None:
    """Say at start what signs the decision log's checkpoints and the receipts, when it is not
    a configured key."""
    import logging

    log = logging.getLogger("app")
    if settings.uses_dev_checkpoint_key:
        log.warning(
            "decision-log checkpoints are signed with the built-in development key; never use this in production",
            extra={"event": "insecure_dev_checkpoint_key"},
        )
    elif not checkpoints:
        log.warning(
            "TOOLGATE_CHECKPOINT_KEY_FILES is unset: no signed checkpoints, so audit verify cannot detect a truncated"
            " tail, a deleted tenant or a re-hashed chain",
            extra={"event": "checkpoints_off"},
        )
    if not receipts:
        log.info("TOOLGATE_RECEIPT_KEY_FILES is unset: decide responses carry no receipt", extra={"event": "receipts_off"})


def create_app(settings: Settings | None = None, deps: Deps | None = None) -> Flask:
    """The Flask app. ``settings`` defaults to the environment; ``deps`` to ``build_deps``.

    Raises ``SettingsError`` for invalid settings and ``ContractLoadError`` for a bad contract.
    """
    from flask import Flask

    from app import metrics, web
    from app.about import version
    from app.approvals.sweeper import ApprovalSweeper
    from app.logs import configure_logging
    from app.settings import load_settings
    from app.tracing import build_tracer

    settings = settings or (deps.settings if deps else load_settings())
    configure_logging(settings.log_level)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    # "/v1/executions//k/complete" must not be redirected to the record of key "k".
    app.url_map.merge_slashes = False
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.json.compact = True  # type: ignore[attr-defined]
    built = deps or build_deps(settings)
    app.extensions["toolgate"] = built
    app.extensions["toolgate_tracer"] = build_tracer(settings)
    metrics.BUILD_INFO.labels(version()).set(1)
    web.register(app)
    # Started by the server's worker (app/wsgi.py), not here: an app built in a test or a
    # command does not sweep behind its back.
    app.extensions["toolgate_sweeper"] = ApprovalSweeper(built.approvals, settings.approval_sweep_interval_s)
    return app
