"""The embedded policy engine: OPA's Go ``rego`` package in-process (opa-golib-python-bindings).

One OPA engine per thread, created lazily on first use in that thread, so the Go runtime is
never started in a gunicorn master before fork and evaluations in different threads run in
parallel (the bindings serialize evaluations per engine). Policies are ``policy_dir/**/*.rego``
without ``*_test.rego``, plus ``data.json`` files with OPA bundle semantics. The policy
revision is a SHA-256 content hash of exactly those files.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from pathlib import Path
from typing import Any

from app import metrics
from app.errors import DependencyUnavailable
from app.models import PolicyDecision
from app.engine.base import normalize

log = logging.getLogger(__name__)


def policy_files(policy_dir: Path) -> list[Path]:
    """The files of the policy bundle: non-test ``*.rego`` and ``data.json``, sorted."""
    files = [
        p
        for p in policy_dir.rglob("*")
        if p.is_file() and ((p.suffix == ".rego" and not p.name.endswith("_test.rego")) or p.name == "data.json")
    ]
    return sorted(files, key=lambda p: p.relative_to(policy_dir).as_posix())


def content_revision(policy_dir: Path) -> str:
    """SHA-256 over the bundle files' relative paths and bytes: ``sha256:<16 hex>``."""
    digest = hashlib.sha256()
    for path in policy_files(policy_dir):
        rel = path.relative_to(policy_dir).as_posix().encode()
        data = path.read_bytes()
        digest.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big") + data)
    return "sha256:" + digest.hexdigest()[:16]


def configure_go_runtime(gc_percent: int, max_procs: int) -> None:
    """Set ``GOGC`` (and ``GOMAXPROCS`` when ``max_procs`` > 0; 0 leaves Go's default, one P
    per core) for the Go runtime inside opa-golib-python-bindings.

    Go reads them once, when the shared library loads (the first engine of the process), so
    call this before; later calls have no effect on a loaded runtime. With Go's default
    GOGC=100 an evaluation of the shipped policies cost about 545 µs of CPU on the 2-core
    reference machine (the collector runs beside it on the other core), 465 µs with GOGC=200,
    for about 3 MiB more RSS (README "Performance"). GOMAXPROCS=1 saved more CPU but
    serialized a worker's concurrent evaluations: p50 at half load rose by a third. Source:
    the Go runtime docs (https://pkg.go.dev/runtime, "Environment Variables").
    """
    os.environ["GOGC"] = str(int(gc_percent))
    if max_procs > 0:
        os.environ["GOMAXPROCS"] = str(int(max_procs))


class EmbeddedEngine:
    """``PolicyEngine`` backed by in-process OPA engines (one per thread).

    ``go_gc_percent`` / ``go_max_procs``: see ``configure_go_runtime`` (None leaves the
    environment as it is)."""

    name = "embedded"

    def __init__(
        self, policy_dir: Path, decision_path: str, *, go_gc_percent: int | None = None, go_max_procs: int | None = None
    ) -> None:
        if go_gc_percent is not None and go_max_procs is not None:
            configure_go_runtime(go_gc_percent, go_max_procs)
        self._policy_dir = Path(policy_dir)
        self._document = decision_path.replace("/", ".")
        self._local = threading.local()
        self._revision = content_revision(self._policy_dir)

    def _engine(self) -> Any:
        engine = getattr(self._local, "engine", None)
        if engine is None:
            from opa_bindings import OpaEngine, OpaError

            from app.policy_testing import load_bundle

            engine = OpaEngine()
            try:
                load_bundle(engine, self._policy_dir, include_tests=False)
            except (OpaError, OSError, ValueError) as exc:
                engine.close()
                metrics.ENGINE_ERRORS.labels("load").inc()
                raise DependencyUnavailable(
                    "policy engine is unavailable", log_detail=f"loading policies failed: {exc}"
                ) from exc
            self._local.engine = engine
        return engine

    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        """Evaluate ``data.<decision_path>``; undefined -> deny, engine error -> 503."""
        from opa_bindings import OpaError, OpaUndefinedError

        engine = self._engine()
        try:
            result = engine.eval_document(self._document, policy_input)
        except OpaUndefinedError:
            return normalize(None, defined=False)
        except OpaError as exc:
            metrics.ENGINE_ERRORS.labels("evaluation").inc()
            raise DependencyUnavailable(
                "policy evaluation failed", log_detail=f"embedded OPA {exc.code}: {exc.message}"
            ) from exc
        return normalize(result)

    def revision(self) -> str:
        """Content hash of the loaded policy and data files."""
        return self._revision

    def probe(self) -> None:
        """Load the engine in this thread if needed; raises ``DependencyUnavailable``."""
        from opa_bindings import OpaError

        try:
            self._engine().eval_query("x := true")
        except OpaError as exc:
            raise DependencyUnavailable("policy engine is unavailable", log_detail=str(exc)) from exc
