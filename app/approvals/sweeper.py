"""The approval sweeper: one daemon thread per worker that calls ``ApprovalService.sweep``
every ``approval_sweep_interval_s`` seconds, so unanswered approvals expire to deny (and are
escalated) on time, with their webhooks, even when nobody looks at them. The sweep's Lua steps
are atomic, so every worker may sweep: each approval expires (and escalates) once. A failed
sweep (Redis down) is logged and retried at the next interval."""

from __future__ import annotations

import logging
import threading

from app.approvals.service import ApprovalService
from app.errors import ToolgateError

log = logging.getLogger(__name__)


class ApprovalSweeper:
    """``start()`` runs the sweep loop in a daemon thread (idempotent); ``stop()`` ends it."""

    def __init__(self, service: ApprovalService, interval_s: float) -> None:
        self._service = service
        self._interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._interval_s <= 0 or (self._thread is not None and self._thread.is_alive()):
                return
            self._thread = threading.Thread(target=self._run, name="toolgate-approval-sweeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                self._service.sweep()
            except ToolgateError as exc:
                log.warning("approval sweep failed: %s", exc.code, extra={"event": "approval_sweep_failed"})

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
