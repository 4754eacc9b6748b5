"""The nginx proxy in front of a test gateway: ``ProxyProcess(upstream_bind, state_dir)``
renders the configuration the gateway ships (``app.proxy.config``) for a free loopback port and
runs Debian's ``nginx`` in the foreground (``scripts/install.sh`` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from app.proxy.config import ProxyPaths, render
from app.settings import Settings
from tests.support.servers import free_port, wait_for_port


class ProxyProcess:
    """nginx proxying ``127.0.0.1:<port>`` to gunicorn at ``upstream_bind``; ``settings`` are
    extra ``Settings`` fields (e.g. ``proxy_client_timeout_s``)."""

    def __init__(self, upstream_bind: str, state_dir: Path, **settings: Any) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            raise RuntimeError("nginx is not installed (scripts/install.sh installs it)")
        self.binary = binary
        self.port = free_port()
        self.paths = ProxyPaths(state_dir)
        self.settings = Settings(bind=upstream_bind, proxy_listen=f"127.0.0.1:{self.port}", **settings)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProxyProcess:
        self.paths.state_dir.mkdir(parents=True, exist_ok=True)
        conf = self.paths.state_dir / "nginx.conf"
        conf.write_text(render(self.settings, self.paths))
        self.proc = subprocess.Popen(
            [self.binary, "-c", str(conf), "-p", str(self.paths.state_dir), "-e", str(self.paths.error_log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            wait_for_port(self.port)
        except TimeoutError:
            self.stop()
            raise
        return self

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
