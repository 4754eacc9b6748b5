"""The system under test: a private Redis and the gateway under gunicorn, on loopback.

``Stack(workdir, workers=2, threads=4).start()`` starts ``redis-server`` on a free port (data
in ``workdir/redis``, no persistence) and ``gunicorn -c gunicorn.conf.py`` with production
settings (``TOOLGATE_ENV=production``, HS256 with a random 48-byte secret, a real issuer and
audience, random audit and approval secrets, the embedded engine, a SQLite decision log in
``workdir``, a metrics token; ``extra_env`` overrides any), then waits for ``/readyz``. Worker logs go to
``workdir/gateway.log``. ``stop()`` ends both; everything else is introspection and faults:
``worker_pids()``, ``rss_mib(pid)``, ``metric_sum(name)``, ``kill_worker``, ``stop_redis`` /
``start_redis`` / ``pause_redis`` / ``resume_redis``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

# The same loopback helpers the test harness uses for its real servers.
from tests.support.servers import free_port, wait_for_port

PROJECT_ROOT = Path(__file__).resolve().parent.parent
ISSUER = "https://idp.bench.toolgate.local"
AUDIENCE = "toolgate-bench"


def rss_mib(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (``VmRSS`` of /proc/<pid>/status); raises ``OSError``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise OSError(f"no VmRSS for pid {pid}")


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/*/stat), sorted."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 is the parent pid; the command name (field 2) may hold spaces and parentheses.
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)


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
        self.redis_port = free_port()
        self.port = free_port()
        self.hs256_secret = secrets.token_urlsafe(48)
        self.metrics_token = secrets.token_urlsafe(24)
        self.audit_path = self.workdir / "decisions.sqlite"
        self._redis: subprocess.Popen | None = None
        self._gunicorn: subprocess.Popen | None = None
        self._log = None
        self.http = requests.Session()
        self.http.trust_env = False  # never a proxy: loopback only

    # -- addresses -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL of the gateway, e.g. ``http://127.0.0.1:40123``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def redis_url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` of the private Redis."""
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def env(self) -> dict[str, str]:
        """The gateway's environment: production settings, see the module docstring."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(
            TOOLGATE_ENV="production",
            TOOLGATE_ENGINE="embedded",
            TOOLGATE_BIND=f"127.0.0.1:{self.port}",
            TOOLGATE_WORKERS=str(self.workers),
            TOOLGATE_THREADS=str(self.threads),
            TOOLGATE_WORKER_CONNECTIONS=str(self.worker_connections),
            TOOLGATE_LOG_LEVEL=self.log_level,
            TOOLGATE_REDIS_URL=self.redis_url,
            TOOLGATE_AUDIT_DSN=str(self.audit_path),
            TOOLGATE_AUDIT_KEY_HASH_SECRET=secrets.token_urlsafe(32),
            TOOLGATE_APPROVAL_KEYS="bench:" + secrets.token_urlsafe(32),
            TOOLGATE_JWT_ALGORITHMS="HS256",
            TOOLGATE_JWT_HS256_SECRET=self.hs256_secret,
            TOOLGATE_JWT_ISSUER=ISSUER,
            TOOLGATE_JWT_AUDIENCE=AUDIENCE,
            TOOLGATE_METRICS_TOKEN=self.metrics_token,
            PROMETHEUS_MULTIPROC_DIR=str(self.workdir / "metrics"),
        )
        env.update(self.extra_env)
        return env

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, ready_timeout_s: float = 60.0) -> Stack:
        """Start Redis and gunicorn; returns once ``/readyz`` answers 200 on every worker.

        Raises ``RuntimeError`` (with the log tail) when the gateway does not become ready.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "metrics").mkdir(exist_ok=True)
        self.start_redis()
        self._log = open(self.workdir / "gateway.log", "ab")
        self._gunicorn = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_ROOT / "gunicorn.conf.py")],
            cwd=PROJECT_ROOT, env=self.env(), stdout=self._log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + ready_timeout_s
        while time.monotonic() < deadline:
            if self._gunicorn.poll() is not None:
                raise RuntimeError("gunicorn exited during start:\n" + self.log_tail())
            try:
                # Several probes so that every worker has loaded its engine once.
                if all(self.http.get(self.url + "/readyz", timeout=5).status_code == 200 for _ in range(2 * self.workers)):
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise RuntimeError("the gateway did not become ready:\n" + self.log_tail())

    def stop(self) -> None:
        """Stop gunicorn (graceful, then kill) and Redis."""
        if self._gunicorn is not None:
            self._gunicorn.send_signal(signal.SIGTERM)
            try:
                self._gunicorn.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._gunicorn.kill()
                self._gunicorn.wait()
            self._gunicorn = None
        if self._log is not None:
            self._log.close()
            self._log = None
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
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (scripts/install.sh installs it)")
        data = self.workdir / "redis"
        data.mkdir(parents=True, exist_ok=True)
        self._redis = subprocess.Popen(
            [binary, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "",
             "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.redis_port)

    def stop_redis(self) -> None:
        """Terminate Redis (its data is lost: persistence is off)."""
        if self._redis is not None:
            self._redis.terminate()
            try:
                self._redis.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._redis.kill()
                self._redis.wait()
            self._redis = None

    def pause_redis(self) -> None:
        """Freeze Redis with SIGSTOP: connections stay open, commands time out."""
        assert self._redis is not None
        self._redis.send_signal(signal.SIGSTOP)

    def resume_redis(self) -> None:
        """Undo ``pause_redis`` with SIGCONT."""
        assert self._redis is not None
        self._redis.send_signal(signal.SIGCONT)

    # -- introspection ---------------------------------------------------------------------
    @property
    def master_pid(self) -> int:
        """The gunicorn master's pid."""
        assert self._gunicorn is not None
        return self._gunicorn.pid

    def worker_pids(self) -> list[int]:
        """The pids of the gunicorn workers alive now."""
        return child_pids(self.master_pid)

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
