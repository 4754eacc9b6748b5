"""A real gateway process: gunicorn with gunicorn.conf.py on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.support.servers import free_port

PROJECT_ROOT = Path(__file__).resolve().parents[2]


class GatewayProcess:
    """``GatewayProcess(env={...}).start()`` runs ``gunicorn -c gunicorn.conf.py`` with the
    given ``TOOLGATE_*`` settings and waits for ``/readyz``; ``stop()`` terminates it."""

    def __init__(self, env: dict[str, str], *, workers: int = 2, threads: int = 4) -> None:
        self.port = free_port()
        self.env = {
            **os.environ,
            "TOOLGATE_BIND": f"127.0.0.1:{self.port}",
            "TOOLGATE_WORKERS": str(workers),
            "TOOLGATE_THREADS": str(threads),
            "TOOLGATE_LOG_LEVEL": "WARNING",
            **env,
        }
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> GatewayProcess:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(PROJECT_ROOT / "gunicorn.conf.py")],
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                if requests.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise TimeoutError("gateway did not become ready")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stderr:
                self.proc.stderr.close()
            self.proc = None
