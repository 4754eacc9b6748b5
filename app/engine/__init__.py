"""Policy engines: one interface, two implementations chosen by settings (DESIGN §1, §3).

- ``embedded``: the OPA Go engine in-process (``app.engine.embedded``), reading a policy
  directory, a bundle file or a bundle URL (``app.engine.sources``), with hot reload.
- ``opa``: an OPA sidecar over the REST Data API (``app.engine.opa_http``).

Beside either, a shadow candidate (``app.engine.shadow``, ``build_shadow``) is evaluated
in-process on the same input and recorded, never acted upon.

Both return a normalized ``PolicyDecision`` (``app.engine.normalize``) carrying the revision
that evaluated it, and raise ``DependencyUnavailable`` when no decision can be made.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.engine.base import PolicyEngine
from app.engine.shadow import ShadowEvaluator
from app.engine.sources import (
    BundleFileSource,
    BundleUrlSource,
    DirectorySource,
    PolicySource,
)
from app.engine.status import WorkerStatusBoard
from app.policy.bundle import MAX_BUNDLE_BYTES, PolicyBundle
from app.policy.signing import BundleVerifier
from app.settings import Settings


def build_source(settings: Settings) -> PolicySource:
    """``TOOLGATE_POLICY_BUNDLE`` (an http(s) URL or a tarball path) if set, else the policy
    directory with the pushed tenant data (``TOOLGATE_TENANT_DATA_DIR``) over it."""
    where = settings.policy_bundle
    if where is None:
        return DirectorySource(settings.policy_dir, tenant_data_dir=settings.tenant_data_dir)
    return _bundle_source(where, settings)


def _bundle_source(where: str, settings: Settings) -> PolicySource:
    if where.startswith(("http://", "https://")):
        return BundleUrlSource(where, timeout_s=settings.policy_bundle_timeout_ms / 1000, max_bytes=MAX_BUNDLE_BYTES)
    return BundleFileSource(Path(where))


def build_verifier(settings: Settings) -> BundleVerifier | None:
    """The bundle verifier when a verification key is configured, else None."""
    if settings.policy_verification_key is None:
        return None
    return BundleVerifier(
        key=settings.policy_verification_key.get_secret_value(),
        algorithm=settings.policy_verification_algorithm,
        key_id=settings.policy_verification_key_id,
        scope=settings.policy_verification_scope,
    )


Archive = Callable[[PolicyBundle], object]


def build_engine(settings: Settings, *, on_activate: Archive | None = None) -> PolicyEngine:
    """The engine selected by ``settings.engine``; the embedded one hands every bundle it
    activates to ``on_activate`` (the revision archive). Nothing is loaded and no thread is
    started until first use, so this is safe to call in a gunicorn master before fork."""
    board = WorkerStatusBoard(settings.policy_status_dir)
    if settings.engine == "opa":
        from app.engine.opa_http import OpaSidecarEngine

        return OpaSidecarEngine(settings, status_board=board)
    from app.engine.embedded import EmbeddedEngine

    return EmbeddedEngine(
        build_source(settings),
        settings.decision_path,
        verifier=build_verifier(settings),
        poll_interval_s=settings.policy_poll_interval_s,
        status_board=board,
        go_gc_percent=settings.engine_go_gc_percent,
        go_max_procs=settings.engine_go_max_procs,
        pool_size=settings.engine_pool_size,
        on_activate=on_activate,
    )


def build_shadow(settings: Settings, *, on_activate: Archive | None = None) -> ShadowEvaluator | None:
    """The shadow candidate of ``TOOLGATE_SHADOW_POLICY_DIR`` or ``TOOLGATE_SHADOW_POLICY_BUNDLE``
    (None when neither is set): an embedded engine of its own, polled like the active policy,
    verified with the same key, whose bundles go to ``on_activate`` too."""
    from app.engine.embedded import EmbeddedEngine

    if settings.shadow_policy_dir is not None:
        # The candidate sees the same pushed tenant data as the active policy.
        source: PolicySource = DirectorySource(settings.shadow_policy_dir, tenant_data_dir=settings.tenant_data_dir)
    elif settings.shadow_policy_bundle is not None:
        source = _bundle_source(settings.shadow_policy_bundle, settings)
    else:
        return None
    engine = EmbeddedEngine(
        source,
        settings.decision_path,
        verifier=build_verifier(settings),
        poll_interval_s=settings.policy_poll_interval_s,
        on_activate=on_activate,
        shadow=True,
    )
    return ShadowEvaluator(engine, deadline_ms=settings.shadow_deadline_ms, workers=settings.shadow_workers)


__all__ = ["PolicyEngine", "ShadowEvaluator", "build_engine", "build_shadow", "build_source", "build_verifier"]
