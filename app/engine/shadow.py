"""The candidate policy of a shadow rollout, evaluated beside the active one with a deadline.

An operator names a candidate (``TOOLGATE_SHADOW_POLICY_DIR``, or ``TOOLGATE_SHADOW_POLICY_BUNDLE``:
a tarball or a bundle URL, read by the sources of ``app.engine.sources`` and verified with the
active policy's key). Each gateway worker runs it in its own embedded engine (whatever engine
decides: the candidate is always evaluated in-process), on a small thread pool:

- ``submit(policy_input)`` starts the evaluation on a free shadow worker and returns at once,
  so the candidate runs while the active policy evaluates the same input;
- ``PendingShadow.outcome()`` waits for it at most until ``deadline_ms`` after the start and
  returns a ``ShadowOutcome``: the candidate's decision, or an error (``timeout``,
  ``overloaded``, ``evaluation_error``, ``unavailable``, ``invalid_result``). It never raises.

An evaluation over the deadline is **abandoned**: the call records ``timeout`` and goes on. The
OPA engine of the bindings cannot be interrupted (an evaluation is one call into Go, without a
cancellation handle), so the abandoned evaluation runs to its end on its shadow worker, and its
result is dropped. Until then that worker is busy: with every shadow worker busy, a call does
not queue behind them, it records ``overloaded`` immediately. So a candidate that hangs (a slow
``http.send``, a huge comprehension) costs at most ``shadow_workers`` threads per gateway worker
and never more than ``deadline_ms`` of any answer's latency. The call into Go releases the GIL,
so the request threads keep running meanwhile; CPU the candidate burns is shared with them.
The shadow workers are daemon threads: a gateway worker that exits does not wait for an
abandoned evaluation (``concurrent.futures``' pool would join it at exit).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Protocol

from app.engine.base import InvalidPolicyResult, parse_decision, shadow_of
from app.engine.embedded import EvaluationFailed, RawResult
from app.errors import DependencyUnavailable
from app.models import ShadowError, ShadowOutcome

log = logging.getLogger(__name__)


def _failed(error: ShadowError, revision: str | None = None) -> ShadowOutcome:
    return ShadowOutcome(source="candidate", revision=revision, error=error)


class PendingShadow:
    """One started (or refused) candidate evaluation; ``outcome()`` gives its result."""

    def __init__(
        self, future: Future[ShadowOutcome] | None, deadline: float, *, refused: ShadowOutcome | None = None,
        revision: str | None = None,
    ) -> None:
        self._future = future
        self._deadline = deadline
        self._refused = refused
        self._revision = revision

    def discard(self) -> None:
        """Not wanted any more: cancelled when it has not started yet (its worker is freed at
        once), else run to its end and its result dropped."""
        if self._future is not None:
            self._future.cancel()

    def outcome(self) -> ShadowOutcome:
        """The candidate's outcome, waiting at most until the deadline (then ``timeout``)."""
        if self._future is None:
            assert self._refused is not None
            return self._refused
        try:
            return self._future.result(timeout=max(0.0, self._deadline - time.monotonic()))
        except FutureTimeout:
            return _failed("timeout", self._revision)
        except Exception:  # a shadow never fails its call, not even through a bug here
            log.exception("shadow evaluation raised", extra={"event": "shadow_failed"})
            return _failed("evaluation_error", self._revision)


class CandidateEngine(Protocol):
    """What the shadow step needs of the candidate's engine (``EmbeddedEngine`` with
    ``shadow=True``)."""

    @property
    def active_revision(self) -> str | None: ...

    def warm(self) -> None: ...

    def status(self, *, with_detail: bool = True) -> dict[str, Any]: ...

    def evaluate_raw(self, policy_input: dict[str, Any]) -> RawResult: ...

    def close(self) -> None: ...


class _DaemonPool:
    """``workers`` daemon threads running submitted calls in order, each into its ``Future``;
    each thread first runs ``warm()`` (outside any call)."""

    def __init__(self, workers: int, name: str, warm: Callable[[], None]) -> None:
        self._tasks: queue.SimpleQueue[tuple[Future[Any], Callable[[Any], Any], Any]] = queue.SimpleQueue()
        self._warm = warm
        for index in range(workers):
            threading.Thread(target=self._work, name=f"{name}-{index}", daemon=True).start()

    def submit(self, fn: Callable[[Any], Any], arg: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._tasks.put((future, fn, arg))
        return future

    def _work(self) -> None:
        self._warm()
        while True:
            future, fn, arg = self._tasks.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(arg))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiter, who turns it into an outcome
                future.set_exception(exc)


class ShadowEvaluator:
    """The candidate ``engine`` on ``workers`` threads, waited for ``deadline_ms``. Thread-safe.
    Each shadow worker loads the candidate into its own OPA engine and evaluates it once as soon
    as it starts (built in each gateway worker, after gunicorn's fork), so that the first calls
    do not spend their deadline compiling and preparing it; after a candidate reload, a worker's next evaluation builds its
    engine again (that one call may record a timeout)."""

    def __init__(self, engine: CandidateEngine, *, deadline_ms: int, workers: int) -> None:
        self.engine = engine
        self._deadline_s = deadline_ms / 1000
        self._workers = workers
        self._free = threading.BoundedSemaphore(workers)
        self._pool = _DaemonPool(workers, "toolgate-shadow", self._warm)

    def _warm(self) -> None:
        try:
            self.engine.warm()
        except DependencyUnavailable as exc:  # no candidate yet: the calls will say "unavailable"
            log.warning("shadow policy not loaded: %s", exc.log_detail, extra={"event": "shadow_unavailable"})
        except Exception:  # a worker that dies here would leave its semaphore slot unused forever
            log.exception("shadow worker warm-up failed", extra={"event": "shadow_failed"})

    def submit(self, policy_input: dict[str, Any]) -> PendingShadow:
        """Start evaluating ``policy_input`` (not copied: the caller must not change it) on a
        free shadow worker; with none free, the pending result is ``overloaded`` at once."""
        deadline = time.monotonic() + self._deadline_s
        revision = self.engine.active_revision
        if not self._free.acquire(blocking=False):
            return PendingShadow(None, deadline, refused=_failed("overloaded", revision))
        future = self._pool.submit(self._evaluate, policy_input)
        future.add_done_callback(lambda _: self._free.release())
        return PendingShadow(future, deadline, revision=revision)

    def _evaluate(self, policy_input: dict[str, Any]) -> ShadowOutcome:
        try:
            raw = self.engine.evaluate_raw(policy_input)
        except EvaluationFailed as exc:
            log.warning("shadow policy evaluation failed: %s", exc.log_detail, extra={"event": "shadow_failed"})
            return _failed("evaluation_error")
        except DependencyUnavailable as exc:
            log.warning("shadow policy unavailable: %s", exc.log_detail, extra={"event": "shadow_unavailable"})
            return _failed("unavailable")
        if not raw.defined:
            log.warning("shadow decision document is undefined", extra={"event": "shadow_result_invalid"})
            return _failed("invalid_result", raw.revision)
        try:
            return shadow_of(parse_decision(raw.value, raw.revision), "candidate")
        except InvalidPolicyResult as exc:
            log.warning("shadow result is not a decision: %s", exc, extra={"event": "shadow_result_invalid"})
            return _failed("invalid_result", raw.revision)

    def status(self) -> dict[str, Any]:
        """The candidate engine's status for ``/readyz`` (``EmbeddedEngine.status`` without
        operator-only messages) with the shadow's ``deadline_ms`` and ``workers``."""
        return {**self.engine.status(with_detail=False), "deadline_ms": round(self._deadline_s * 1000),
                "workers": self._workers}

    def close(self) -> None:
        """Stop the candidate's poller (the daemon shadow workers end with the process)."""
        self.engine.close()
