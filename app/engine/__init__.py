"""Policy engines: one interface, two implementations chosen by settings (DESIGN §1, §3).

- ``embedded``: the OPA Go engine in-process (``app.engine.embedded``).
- ``opa``: an OPA sidecar over the REST Data API (``app.engine.opa_http``).

Both return a normalized ``PolicyDecision`` (``app.engine.normalize``) and raise
``DependencyUnavailable`` when no decision can be made.
"""

from __future__ import annotations

from app.engine.base import PolicyEngine
from app.settings import Settings


def build_engine(settings: Settings) -> PolicyEngine:
    """The engine selected by ``settings.engine``. Nothing is loaded until first use, so this
    is safe to call in a gunicorn master before fork."""
    if settings.engine == "opa":
        from app.engine.opa_http import OpaSidecarEngine

        return OpaSidecarEngine(settings)
    from app.engine.embedded import EmbeddedEngine

    return EmbeddedEngine(
        settings.policy_dir, settings.decision_path,
        go_gc_percent=settings.engine_go_gc_percent, go_max_procs=settings.engine_go_max_procs,
    )


__all__ = ["PolicyEngine", "build_engine"]
