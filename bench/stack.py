"""The system under test: a private Redis and the gateway under gunicorn, on loopback.

``Stack(workdir, workers=2, threads=4).start()`` starts ``redis-server`` on a free port (data
in ``workdir/redis``, no persistence) and ``gunicorn -c gunicorn.conf.py`` with production
settings (``TOOLGATE_ENV=production``, HS256 with a random 48-byte secret, a real issuer and
audience, random audit and approval secrets, the embedded engine, a SQLite decision log in
``workdir``, a metrics token; ``extra_env`` overrides any), then waits until every worker
listens and ``/readyz`` answered on each (``bench.loopback``: the same harnesses the tests
use). Worker logs go to ``workdir/gateway.log``. ``stop()`` ends both; everything else is
introspection and faults: ``worker_pids()``, ``rss_mib(pid)``, ``metric_sum(name)``,
``kill_worker``, ``stop_redis`` / ``start_redis`` / ``pause_redis`` / ``resume_redis``.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import requests

from bench.loopback import PROJECT_ROOT, GatewayProcess, RedisServer

__all__ = ["AUDIENCE", "ISSUER", "PROJECT_ROOT", "Stack", "cpu_seconds", "metric_sum", "rss_mib"]

ISSUER = "https://idp.bench.toolgate.local"
AUDIENCE = "toolgate-bench"


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS`` of /proc/<pid>/status); raises ``OSError``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise OSError(f"no VmRSS for pid {pid}")


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """CPU seconds (``utime + stime`` of /proc/<pid>/stat, every thread of the process: the Go
    runtime's and the decision log writer's included) of each of ``pids`` still alive."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        # Fields after the ")" that ends the command name: state is field 3, utime 14, stime 15.
        fields = stat[stat.rindex(")") + 2:].split()
        out[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return out


class Stack:
    """Redis plus the gateway under gunicorn; see the module docstring."""

    def __init__(self, workdir: Path, *, workers: int = 2, threads: int = 4, log_level: str = "INFO",
                 worker_connections: int | None = None, extra_env: dict[str, str] | None = None) -> None:
        self.workdir = Path(workdir)
        self.worker_connections = worker_connections or 1000
        self.extra_env = dict(extra_env or {})
        self.workers = workers
        self.threads = threads
        self.log_level = log_level
        self.hs256_secret = secrets.token_urlsafe(48)
        self.metrics_token = secrets.token_urlsafe(24)
        self._audit_key_hash_secret = secrets.token_urlsafe(32)
        self._approval_keys = "bench:" + secrets.token_urlsafe(32)
        self.audit_path = self.workdir / "decisions.sqlite"
        self.redis = RedisServer(self.workdir / "redis")
        self._gateway: GatewayProcess | None = None
        self.http = requests.Session()
        self.http.trust_env = False  # never a proxy: loopback only

    # -- addresses -------------------------------------------------------------------------
    @property
    def gateway(self) -> GatewayProcess:
        """The gunicorn process (after ``start()``)."""
        assert self._gateway is not None, "the stack is not started"
        return self._gateway

    @property
    def url(self) -> str:
        """Base URL of the gateway, e.g. ``http://127.0.0.1:24123``."""
        return self.gateway.url

    @property
    def redis_url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` of the private Redis."""
        return self.redis.url

    def settings_env(self) -> dict[str, str]:
        """The gateway's ``TOOLGATE_*`` settings: production, see the module docstring."""
        return {
            "TOOLGATE_ENV": "production",
            "TOOLGATE_AUTHZEN_PDP_URL": "http://bench.local",
            "TOOLGATE_ENGINE": "embedded",
            "TOOLGATE_WORKER_CONNECTIONS": str(self.worker_connections),
            "TOOLGATE_LOG_LEVEL": self.log_level,
            "TOOLGATE_REDIS_URL": self.redis_url,
            "TOOLGATE_AUDIT_DSN": str(self.audit_path),
            "TOOLGATE_AUDIT_KEY_HASH_SECRET": self._audit_key_hash_secret,
            "TOOLGATE_APPROVAL_KEYS": self._approval_keys,
            "TOOLGATE_JWT_ALGORITHMS": "HS256",
            "TOOLGATE_JWT_HS256_SECRET": self.hs256_secret,
            "TOOLGATE_JWT_ISSUER": ISSUER,
            "TOOLGATE_JWT_AUDIENCE": AUDIENCE,
            "TOOLGATE_METRICS_TOKEN": self.metrics_token,
            "PROMETHEUS_MULTIPROC_DIR": str(self.workdir / "metrics"),
            **self.extra_env,
        }

    def env(self) -> dict[str, str]:
        """The whole environment of the gateway (this process's without its ``TOOLGATE_*``
        variables, plus ``settings_env()``, bind, workers and threads)."""
        return self.gateway.env

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, ready_timeout_s: float = 60.0) -> Stack:
        """Start Redis and gunicorn; returns once every worker listens and ``/readyz`` answered
        200 on several probes in a row, so that every worker has loaded its engine once.

        Raises ``RuntimeError`` or ``TimeoutError`` (with the log tail) when the gateway does not
        become ready.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "metrics").mkdir(exist_ok=True)
        self.start_redis()
        base = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        self._gateway = GatewayProcess(self.settings_env(), workers=self.workers, threads=self.threads,
                                       base_env=base, log_path=self.workdir / "gateway.log")
        self._gateway.start(ready_timeout_s, readyz_probes=2 * self.workers)
        return self

    def stop(self) -> None:
        """Stop gunicorn (graceful, then kill) and Redis."""
        if self._gateway is not None:
            self._gateway.stop()
        self.stop_redis()
        self.http.close()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of the gateway log."""
        path = self.workdir / "gateway.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    # -- Redis -----------------------------------------------------------------------------
    def start_redis(self) -> None:
        """Start (or restart) redis-server on the stack's port; raises ``RuntimeError`` if absent."""
        self.redis.start()

    def stop_redis(self) -> None:
        """Terminate Redis (its data is lost: persistence is off)."""
        self.redis.stop()

    def pause_redis(self) -> None:
        """Freeze Redis with SIGSTOP: connections stay open, commands time out."""
        self.redis.pause()

    def resume_redis(self) -> None:
        """Undo ``pause_redis`` with SIGCONT."""
        self.redis.resume()

    # -- introspection ---------------------------------------------------------------------
    @property
    def master_pid(self) -> int:
        """The gunicorn master's pid."""
        return self.gateway.master_pid

    def worker_pids(self) -> list[int]:
        """The pids of the gunicorn workers alive now."""
        return self.gateway.worker_pids()

    def kill_worker(self, pid: int) -> None:
        """SIGKILL one worker (gunicorn's master starts a replacement)."""
        if pid not in self.worker_pids():
            raise ValueError(f"{pid} is not a worker of this gateway")
        os.kill(pid, signal.SIGKILL)

    def metrics_text(self) -> str:
        """The text of ``GET /metrics`` (with the metrics token); raises ``requests.HTTPError``."""
        resp = self.http.get(self.url + "/metrics", headers={"Authorization": f"Bearer {self.metrics_token}"}, timeout=10)
        resp.raise_for_status()
        return resp.text


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a Prometheus text exposition whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != name:
            continue
        found = dict(_labels(label_text.rstrip("}")))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(value)
    return total


def _labels(text: str) -> list[tuple[str, str]]:
    pairs = []
    for part in text.split('",'):
        if "=" in part:
            key, _, value = part.partition("=")
            pairs.append((key.strip(), value.strip().strip('"')))
    return pairs
