"""What each worker's policy engine reports about itself, shared between the workers of one
gateway: the active revision, when it was activated, the last refused bundle.

Each process writes its own ``worker-<pid>.json`` into ``status_dir`` (atomically: a temporary
file renamed over the old one) whenever its status changes; ``read_all`` lists every worker's
file whose process is still alive. Without a ``status_dir`` (a single process, the tests' app)
only the own process's status is known. gunicorn.conf.py makes a private directory per gateway
(``TOOLGATE_POLICY_STATUS_DIR``) and removes a worker's file when the worker exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class WorkerStatusBoard:
    """Per-process status documents in ``status_dir`` (or in memory when it is None)."""

    def __init__(self, status_dir: Path | None) -> None:
        self._dir = Path(status_dir) if status_dir else None
        self._lock = threading.Lock()
        self._own: dict[str, Any] = {}

    def publish(self, status: dict[str, Any]) -> None:
        """Record this process's ``status`` (a JSON object); a write failure is ignored (the
        status is informative, never a reason to fail a decision)."""
        document = {**status, "pid": os.getpid()}
        with self._lock:
            self._own = document
            if self._dir is None:
                return
            try:
                self._dir.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".worker-", suffix=".tmp")
                with os.fdopen(fd, "w") as out:
                    json.dump(document, out)
                os.replace(tmp, self._dir / f"worker-{os.getpid()}.json")
            except OSError:
                pass

    def own(self) -> dict[str, Any]:
        """This process's last published status."""
        with self._lock:
            return dict(self._own)

    def read_all(self) -> list[dict[str, Any]]:
        """Every live worker's last status, by pid; this process's own one included."""
        found: dict[int, dict[str, Any]] = {}
        if self._dir is not None and self._dir.is_dir():
            for path in self._dir.glob("worker-*.json"):
                try:
                    document = json.loads(path.read_text())
                except (OSError, ValueError):
                    continue
                pid = document.get("pid") if isinstance(document, dict) else None
                if isinstance(pid, int) and _alive(pid):
                    found[pid] = document
        own = self.own()
        if own:
            found[own["pid"]] = own
        return [found[pid] for pid in sorted(found)]


def remove_worker(status_dir: Path, pid: int) -> None:
    """Delete the status file of worker ``pid`` (gunicorn's ``child_exit``)."""
    with contextlib.suppress(OSError):
        (Path(status_dir) / f"worker-{pid}.json").unlink()
