"""Do it and record it (DESIGN §2 step 7, §6): every call that must leave a decision record
(decide, approval answers, execution reports, operator resolutions) runs through
``Recorder.run``, so no outcome, refusal or failure leaves without its record."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import TypeVar

from app import metrics
from app.audit.interfaces import DecisionLog
from app.audit.records import AuditEvent, AuditRecord, hash_idempotency_key
from app.decide.phases import Phases
from app.errors import DependencyUnavailable, ToolgateError

T = TypeVar("T")

#: Builds the record of a call from its outcome: ``(result, None)`` on success, ``(None, error)``
#: for a ``ToolgateError``, ``(None, None)`` for an unexpected exception (an INTERNAL_ERROR).
#: None: this outcome leaves no record (an operator's refused resolution, which changed nothing).
Describe = Callable[[T | None, ToolgateError | None], AuditEvent | None]


class Recorder:
    """Appends the records of calls to the decision log (``log``). ``key_hash_secret`` keys the
    stored hashes of idempotency keys (``hash_idempotency_key``)."""

    def __init__(self, log: DecisionLog, *, key_hash_secret: str) -> None:
        self._log = log
        self._key_hash_secret = key_hash_secret

    def key_hash(self, key: str) -> str:
        """The stored form of an idempotency key (HMAC-SHA256, hex)."""
        return hash_idempotency_key(self._key_hash_secret, key)

    def run(
        self,
        action: Callable[[], T],
        describe: Describe[T],
        *,
        phases: Phases | None = None,
        recorded: Callable[[AuditRecord], None] | None = None,
        unrecorded: Callable[[T], None] | None = None,
    ) -> T:
        """Run ``action`` and append ``describe(result, error)`` whatever its outcome, before
        anything is returned; the append is timed as phase ``log`` when ``phases`` is given.

        Returns ``action``'s result and re-raises its exception. When the record cannot be
        written the call fails with ``DependencyUnavailable`` (503) instead, after
        ``unrecorded(result)`` undid what a successful action must not keep (e.g. a reserved
        idempotency key). ``recorded(record)`` is called once the record is committed.
        """
        result: T | None = None
        error: ToolgateError | None = None
        succeeded = False
        try:
            result = action()
            succeeded = True
            return result
        except ToolgateError as exc:
            error = exc
            raise
        finally:
            with phases.measure("log") if phases is not None else nullcontext():
                event = describe(result, error)
                record = self._append(event, (lambda: unrecorded(result)) if succeeded and unrecorded else None)  # type: ignore[arg-type]
            if record is not None and recorded is not None:
                recorded(record)

    def _append(self, event: AuditEvent | None, undo: Callable[[], None] | None) -> AuditRecord | None:
        """Append ``event`` (nothing for None); on failure ``undo()`` and raise
        ``DependencyUnavailable``."""
        if event is None:
            return None
        try:
            return self._log.append(event)
        except DependencyUnavailable:
            metrics.DECISION_LOG_FAILURES.inc()
            if undo is not None:
                undo()
            raise
