"""A real ``opa run --server`` (the pinned binary scripts/install.sh builds into .tools/bin) on a
free loopback port, for parity and fault tests: start, stop, kill, SIGSTOP/SIGCONT, restart.

``OpaProcess(workdir, bundle=PATH)`` serves one bundle file or directory (``--bundle``);
``config=`` gives an OPA configuration (e.g. a bundle service to poll) written to
``workdir/config.yaml``. ``start()`` waits until ``GET /health?bundles`` answers 200, i.e.
every configured bundle is activated, or fails with OPA's own output.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import requests

from app.policy.bundle import build_tarball, read_directory, with_manifest
from app.policy.toolchain import opa_binary
from tests.support.servers import free_port


def opa_path() -> Path:
    """The ``opa`` binary; raises when it is missing (scripts/install.sh must have built it)."""
    found = opa_binary()
    if found is None:
        raise RuntimeError("no opa binary: scripts/install.sh builds it into .tools/bin/opa")
    return found


def write_bundle(policy_dir: Path, target: Path, **manifest: Any) -> Path:
    """Write the bundle tarball of ``policy_dir`` (``toolgate policy build`` without signing)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(build_tarball(with_manifest(read_directory(policy_dir), **manifest)))
    return target


class OpaProcess:
    """One OPA server process; see the module docstring."""

    def __init__(
        self, workdir: Path, *, bundle: Path | None = None, config: dict[str, Any] | None = None,
        extra_args: tuple[str, ...] = (), port: int | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.bundle = bundle
        self.config = config
        self.extra_args = extra_args
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"opa-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        argv = [str(opa_path()), "run", "--server", f"--addr=127.0.0.1:{self.port}", "--log-level=error", *self.extra_args]
        if self.config is not None:
            path = self.workdir / "config.yaml"
            path.write_text(json.dumps(self.config))  # JSON is YAML
            argv.append(f"--config-file={path}")
        if self.bundle is not None:
            argv += ["--bundle", str(self.bundle)]
        return argv

    def start(self, timeout_s: float = 30.0, *, wait_ready: bool = True) -> OpaProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        if wait_ready:
            self.wait_ready(timeout_s)
        return self

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"opa exited with {self.proc.returncode}: {self.output()[-2000:]}")
            try:
                if requests.get(self.url + "/health?bundles", timeout=0.5).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.05)
        raise TimeoutError(f"opa not ready after {timeout_s} s: {self.output()[-2000:]}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def pause(self) -> None:
        """SIGSTOP: the process hangs with its sockets open (connections are accepted by the
        kernel backlog, nothing answers)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, then reap."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
                self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def restart(self, timeout_s: float = 30.0) -> None:
        self.stop()
        self.start(timeout_s)
