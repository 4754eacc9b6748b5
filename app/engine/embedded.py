"""The embedded policy engine: OPA's Go ``rego`` package in-process (opa-golib-python-bindings),
with hot reload.

Snapshots: the engine holds one immutable ``Snapshot`` (a verified, compiled bundle and its
revision) and replaces it as a whole. Evaluations borrow an OPA engine from a pool of at most
``pool_size`` per worker (the bindings serialize evaluations per engine, so an engine serves one
evaluation at a time; each holds the compiled policies, about 13 MiB with the shipped ones):
an engine made from an older snapshot is closed when it comes back instead of being lent again.
An evaluation borrows an engine together with the snapshot it was made from, evaluates on it and
returns that snapshot's revision in ``PolicyDecision.policy_revision``, so no evaluation mixes
two revisions and every decision names the revision that made it. The Go runtime starts on
first use, never in a gunicorn master before fork.

No call compiles a policy: the reload that activates a snapshot compiles its first engine and
prepares the decision query on it (about 150 ms for the shipped policies) before the snapshot
is published, while calls keep using the previous one. Further engines of that snapshot are
made one at a time by a background thread when every engine is busy and the pool has room;
meanwhile a call waits for an engine of the snapshot to come back (one evaluation).

Reload: with ``poll_interval_s`` > 0 a daemon thread per engine (per worker) polls the
``PolicySource`` (``app.engine.sources``). A changed bundle is verified (when a
``BundleVerifier`` is configured) and compiled in a scratch engine before it is published; a
bundle that fails either is refused: the last good snapshot stays active, the refusal is logged,
counted in ``toolgate_policy_reload_refusals_total`` and kept as ``last_refusal`` in
``status()`` (``/readyz`` details, ``GET /v1/policy/status``).

Every activated bundle is handed to ``on_activate`` (the revision archive,
``app.policy.archive``) so that a decision can be evaluated again under the revision that made
it. A ``shadow`` engine (the candidate policy of ``app.engine.shadow``) counts its reloads and
refusals in ``toolgate_shadow_reloads_total`` instead of the active engine's metrics, and its
callers use ``evaluate_raw``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app import metrics
from app.engine.base import PolicyModules, RawResult, normalize
from app.engine.sources import BundleUnavailable, PolicySource
from app.engine.status import WorkerStatusBoard
from app.errors import DependencyUnavailable
from app.models import PolicyDecision
from app.policy.bundle import PolicyBundle, PolicyLoadError, load_into
from app.policy.signing import BundleSignatureError, BundleVerifier

log = logging.getLogger(__name__)


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


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Snapshot:
    """One activated bundle: ``generation`` counts activations in this process (1, 2, ...)."""

    bundle: PolicyBundle
    generation: int
    activated_at: str

    @property
    def revision(self) -> str:
        return self.bundle.revision


@dataclass(frozen=True)
class Refusal:
    """A bundle that was not activated. ``kind``: ``signature``, ``compile`` (parse, compile or
    data error), ``unreadable`` (malformed tarball or file), ``unavailable`` (source not
    reachable). ``detail`` is the operator-facing message."""

    at: str
    kind: str
    detail: str
    revision: str | None = None

    def as_dict(self, *, with_detail: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "kind": self.kind, "revision": self.revision}
        if with_detail:
            out["detail"] = self.detail
        return out


def check_bundle(bundle: PolicyBundle, verifier: BundleVerifier | None, *, document: str | None = None) -> Any:
    """Verify (when ``verifier`` is set) and compile ``bundle`` in a scratch engine; returns
    ``data.<document>`` (``toolgate.catalog``) evaluated without input when ``document`` is
    given, None when it is not or the document is undefined. Raises ``BundleSignatureError``
    or ``PolicyLoadError`` (also for an evaluation error of ``document``)."""
    from opa_bindings import OpaEngine, OpaError, OpaUndefinedError

    if verifier is not None:
        verifier.verify(bundle)
    scratch = OpaEngine()
    try:
        load_into(scratch, bundle)
        if document is None:
            return None
        try:
            return scratch.eval_document(document)
        except OpaUndefinedError:
            return None
        except OpaError as exc:
            raise PolicyLoadError(f"data.{document} cannot be evaluated: {exc.message}") from None
    finally:
        scratch.close()


class EvaluationFailed(DependencyUnavailable):
    """The engine ran the query and OPA raised an evaluation error (a conflict, a builtin error
    under strict errors, a cancelled evaluation)."""


class EmbeddedEngine:
    """``PolicyEngine`` backed by a pool of in-process OPA engines over one snapshot.

    ``source``: where bundles come from; ``verifier``: required signature, or None;
    ``poll_interval_s``: reload period (0: load once); ``status_board``: where this worker's
    status is published; ``go_gc_percent`` / ``go_max_procs``: see ``configure_go_runtime``
    (None leaves the environment as it is); ``pool_size``: at most this many OPA engines (>= 1);
    ``on_activate``: called with each bundle once it is active (its failures are logged, never
    refuse the bundle); ``shadow``: see the module docstring.
    """

    name = "embedded"

    def __init__(
        self,
        source: PolicySource,
        decision_path: str,
        *,
        verifier: BundleVerifier | None = None,
        poll_interval_s: float = 0.0,
        status_board: WorkerStatusBoard | None = None,
        go_gc_percent: int | None = None,
        go_max_procs: int | None = None,
        pool_size: int = 2,
        on_activate: Callable[[PolicyBundle], object] | None = None,
        shadow: bool = False,
    ) -> None:
        if pool_size < 1:
            raise ValueError("pool_size must be at least 1")
        if go_gc_percent is not None and go_max_procs is not None:
            configure_go_runtime(go_gc_percent, go_max_procs)
        self._source = source
        self._document = decision_path.replace("/", ".")
        self._verifier = verifier
        self._poll_interval_s = poll_interval_s
        self._board = status_board or WorkerStatusBoard(None)
        self._pool_size = pool_size
        self._pool = threading.Condition()
        self._idle: list[tuple[int, Any]] = []  # (snapshot generation, engine), free to lend
        self._made = 0  # engines alive or being made: idle, lent or in the background builder
        self._building = False  # the background builder is making an engine
        self._lock = threading.Lock()
        self._reload_lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self._last_refusal: Refusal | None = None
        self._refusals = 0
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()
        self._on_activate = on_activate
        self._shadow = shadow
        self._kind = "shadow policy" if shadow else "policy"

    # -- snapshots -----------------------------------------------------------------------
    def _current(self) -> Snapshot:
        snapshot = self._snapshot
        if snapshot is None:
            with self._lock:
                if self._snapshot is None:
                    self._load_first()
                snapshot = self._snapshot
        if snapshot is None:
            refusal = self._last_refusal
            raise DependencyUnavailable(
                "policy engine is unavailable",
                log_detail=f"no policy bundle is active: {refusal.detail if refusal else 'not loaded'}",
            )
        return snapshot

    def _load_first(self) -> None:
        """Under ``_lock``: the first load, then the poller (so a failed first load is retried
        by the poller too)."""
        try:
            self.reload()
        finally:
            self._start_poller()

    def reload(self) -> bool:
        """Fetch the source once; activate a new bundle that verifies and compiles. Returns True
        when a new snapshot was activated, False when the source was unchanged or the bundle
        was refused (see ``status()``). Reloads are serialized."""
        with self._reload_lock:
            return self._reload()

    def _reload(self) -> bool:
        try:
            bundle = self._source.fetch()
        except BundleUnavailable as exc:
            if self._snapshot is None:
                self._refuse("unavailable", str(exc), None)
            else:  # transient; the active bundle stays and the next poll tries again
                log.warning("policy source unavailable: %s", exc, extra={"event": "policy_source_unavailable"})
            return False
        except PolicyLoadError as exc:
            self._refuse("unreadable", str(exc), None)
            return False
        if bundle is None:
            return False
        try:
            if self._verifier is not None:
                self._verifier.verify(bundle)
            engine = self._prepared_engine(bundle)
        except BundleSignatureError as exc:
            self._refuse("signature", str(exc), bundle.revision)
            return False
        except PolicyLoadError as exc:
            self._refuse("compile", str(exc), bundle.revision)
            return False
        previous = self._snapshot
        self._activate(Snapshot(bundle, (previous.generation if previous else 0) + 1, _now()), engine)
        log.info(
            "%s bundle %s activated (was %s)", self._kind, bundle.revision, previous.revision if previous else "none",
            extra={"event": "shadow_policy_activated" if self._shadow else "policy_activated", "revision": bundle.revision},
        )
        if self._shadow:
            metrics.SHADOW_RELOADS.labels("activated").inc()
        else:
            metrics.POLICY_RELOADS.inc()
        self._publish()
        self._archive(bundle)
        return True

    def _prepared_engine(self, bundle: PolicyBundle) -> Any:
        """A new engine holding ``bundle``, its decision query prepared by one evaluation on an
        empty input (its result or error dropped). Raises ``PolicyLoadError``."""
        from opa_bindings import OpaError

        from app.engine.native import JsonEngine

        engine = JsonEngine()
        try:
            load_into(engine, bundle)
        except BaseException:
            engine.close()
            raise
        with contextlib.suppress(OpaError):  # a policy that errs on an empty input is prepared all the same
            engine.eval_json(self._document, b"{}")
        return engine

    def _activate(self, snapshot: Snapshot, engine: Any) -> None:
        """Publish ``snapshot`` with ``engine`` (made from it) as its first idle engine; idle
        engines of older snapshots are closed."""
        with self._pool:
            if self._pool_size == 0:  # closed meanwhile: the snapshot is kept for status only
                stale = [engine]
            else:
                stale = [old for _, old in self._idle]
                self._made += 1 - len(stale)
                self._idle = [(snapshot.generation, engine)]
            self._snapshot = snapshot
            self._pool.notify_all()
        for old in stale:
            old.close()

    def _archive(self, bundle: PolicyBundle) -> None:
        if self._on_activate is None:
            return
        try:
            self._on_activate(bundle)
        except Exception:  # the archive is evidence for later; it never refuses a bundle
            log.exception("could not archive policy revision %s", bundle.revision,
                          extra={"event": "policy_archive_failed", "revision": bundle.revision})

    def _refuse(self, kind: str, detail: str, revision: str | None) -> None:
        self._last_refusal = Refusal(_now(), kind, detail, revision)
        self._refusals += 1
        if self._shadow:
            metrics.SHADOW_RELOADS.labels(kind).inc()
        else:
            if kind != "unavailable" or self._snapshot is None:
                metrics.ENGINE_ERRORS.labels("load").inc()
            metrics.POLICY_RELOAD_REFUSALS.labels(kind).inc()
        log.error(
            "%s bundle refused (%s), %s: %s", self._kind, kind,
            f"keeping {self._snapshot.revision}" if self._snapshot else "no bundle is active", detail,
            extra={"event": "shadow_policy_refused" if self._shadow else "policy_refused", "kind": kind,
                   "revision": revision},
        )
        self._publish()

    def _start_poller(self) -> None:
        if self._poll_interval_s <= 0 or self._poller is not None:
            return
        self._poller = threading.Thread(
            target=_poll, args=(weakref.ref(self), self._poll_interval_s, self._stop),
            name="toolgate-policy-reload", daemon=True,
        )
        self._poller.start()

    def close(self) -> None:
        """Stop the poller and close the idle engines (a lent one is closed when it is back)."""
        self._stop.set()
        with self._pool:
            idle, self._idle = self._idle, []
            self._made -= len(idle)
            self._pool_size = 0  # nothing more is lent or made
            self._pool.notify_all()
        for _, engine in idle:
            engine.close()

    @contextmanager
    def _engine(self) -> Iterator[tuple[Snapshot, Any]]:
        """Lend the current snapshot and an engine made from it for the block (see the module
        docstring). Raises ``DependencyUnavailable`` when no snapshot is active, no engine can
        be made or the engine is closed."""
        snapshot, engine = self._borrow()
        try:
            yield snapshot, engine
        finally:
            self._give_back(snapshot.generation, engine)

    def _borrow(self) -> tuple[Snapshot, Any]:
        snapshot = self._current()
        stale = []
        try:
            with self._pool:
                while True:
                    # Every snapshot is published with one engine made from it, so there is always
                    # one to wait for; the builder adds more while the pool has room.
                    snapshot = self._snapshot or snapshot
                    while self._idle:
                        generation, engine = self._idle.pop()
                        if generation == snapshot.generation:
                            return snapshot, engine
                        stale.append(engine)
                        self._made -= 1
                    if self._pool_size == 0:
                        raise DependencyUnavailable("policy engine is unavailable", log_detail="the engine is closed")
                    if self._made < self._pool_size and not self._building:
                        self._made += 1
                        self._building = True
                        threading.Thread(target=self._build, args=(snapshot,), name="toolgate-policy-engine",
                                         daemon=True).start()
                    self._pool.wait()
        finally:
            for engine in stale:
                engine.close()

    def _build(self, snapshot: Snapshot) -> None:
        """The background builder: one more engine of ``snapshot`` into the pool (its slot in
        ``_made`` is already taken), dropped when the snapshot is no longer current."""
        from opa_bindings import OpaError

        try:
            engine = self._prepared_engine(snapshot.bundle)
        except (OpaError, PolicyLoadError) as exc:  # it compiled before; only resources can fail here
            if not self._shadow:
                metrics.ENGINE_ERRORS.labels("load").inc()
            log.error("could not make a policy engine: %s", exc, extra={"event": "policy_engine_failed"})
            with self._pool:
                self._building = False
                self._made -= 1
                self._pool.notify_all()
            return
        with self._pool:
            self._building = False
        self._give_back(snapshot.generation, engine)

    def _give_back(self, generation: int, engine: Any) -> None:
        with self._pool:
            current = self._snapshot
            keep = self._pool_size > 0 and current is not None and current.generation == generation
            if keep:
                self._idle.append((generation, engine))
            else:
                self._made -= 1
            self._pool.notify_all()
        if not keep:
            engine.close()

    # -- PolicyEngine --------------------------------------------------------------------
    def evaluate(self, policy_input: dict[str, Any], *, traceparent: str | None = None) -> PolicyDecision:
        """Evaluate ``data.<decision_path>`` on the current snapshot; undefined -> deny, engine
        error -> 503. The decision carries the snapshot's revision."""
        try:
            raw = self.evaluate_raw(policy_input)
        except EvaluationFailed:
            metrics.ENGINE_ERRORS.labels("evaluation").inc()
            raise
        return normalize(raw.value, defined=raw.defined, policy_revision=raw.revision)

    def evaluate_raw(self, policy_input: dict[str, Any]) -> RawResult:
        """Evaluate ``data.<decision_path>`` on the current snapshot without normalizing or
        counting anything. Raises ``EvaluationFailed`` for an OPA evaluation error and
        ``DependencyUnavailable`` when no bundle is active or an engine cannot be made."""
        return self._evaluate(self._document, policy_input)

    def evaluate_document(self, path: str, policy_input: dict[str, Any]) -> RawResult:
        """Evaluate ``data.<path>`` (``toolgate/session_reads``) like ``evaluate_raw``."""
        return self._evaluate(path.replace("/", "."), policy_input)

    def _evaluate(self, document: str, policy_input: dict[str, Any]) -> RawResult:
        from opa_bindings import OpaError, OpaUndefinedError

        from app.engine.native import encode_input

        try:
            input_json = encode_input(policy_input)
            with self._engine() as (snapshot, engine):
                value = engine.eval_json(document, input_json)
        except OpaUndefinedError:
            return RawResult(None, False, snapshot.revision)
        except OpaError as exc:
            raise EvaluationFailed(
                "policy evaluation failed", log_detail=f"embedded OPA {exc.code}: {exc.message}"
            ) from exc
        return RawResult(value, True, snapshot.revision)

    @property
    def active_revision(self) -> str | None:
        """The revision of the active snapshot, None before the first (loads nothing)."""
        snapshot = self._snapshot
        return snapshot.revision if snapshot else None

    def revision(self) -> str:
        """The revision of the active snapshot (loading the first one if needed)."""
        return self._current().revision

    def policy_modules(self) -> PolicyModules | None:
        """The active snapshot's Rego modules, None before the first (loads nothing)."""
        snapshot = self._snapshot
        if snapshot is None:
            return None
        bundle = snapshot.bundle
        return PolicyModules(bundle.revision, {path: bundle.files[path] for path in bundle.modules})

    def probe(self) -> None:
        """Ready when a snapshot is active and an engine of the pool answers; raises
        ``DependencyUnavailable``."""
        from opa_bindings import OpaError

        try:
            with self._engine() as (_, engine):
                engine.eval_query("x := true")
        except OpaError as exc:
            raise DependencyUnavailable("policy engine is unavailable", log_detail=str(exc)) from exc

    def warm(self) -> None:
        """``probe``, then one evaluation of the decision document on an empty input, its
        result dropped: OPA prepares the query on an engine's first evaluation (about
        150 ms for the shipped policies), which a call must not pay (a shadow's deadline).
        Raises ``DependencyUnavailable`` like ``probe``."""
        self.probe()
        with contextlib.suppress(EvaluationFailed):  # a policy that errs on an empty input is prepared all the same
            self.evaluate_raw({})

    def status(self, *, with_detail: bool = True) -> dict[str, Any]:
        """``{"engine", "source", "revision", "generation", "activated_at", "poll_interval_s",
        "signature_required", "refusals", "last_refusal"}`` of this process; ``with_detail=False``
        leaves the refusal's message out (for unauthenticated readers)."""
        snapshot = self._snapshot
        refusal = self._last_refusal
        return {
            "engine": self.name,
            "source": self._source.description,
            "revision": snapshot.revision if snapshot else None,
            "generation": snapshot.generation if snapshot else 0,
            "activated_at": snapshot.activated_at if snapshot else None,
            "poll_interval_s": self._poll_interval_s,
            "signature_required": self._verifier is not None,
            "refusals": self._refusals,
            "last_refusal": refusal.as_dict(with_detail=with_detail) if refusal else None,
        }

    def workers(self) -> list[dict[str, Any]]:
        """Every live worker's published status (``WorkerStatusBoard.read_all``)."""
        if not self._board.own():
            self._publish()
        return self._board.read_all()

    def _publish(self) -> None:
        self._board.publish(self.status())


def _poll(ref: weakref.ref[EmbeddedEngine], interval_s: float, stop: threading.Event) -> None:
    """The reload loop: one ``reload()`` per interval until the engine is gone or closed."""
    while not stop.wait(interval_s):
        engine = ref()
        if engine is None:
            return
        try:
            engine.reload()
        except Exception:
            log.exception("policy reload failed", extra={"event": "policy_reload_failed"})
        del engine
