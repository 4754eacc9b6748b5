"""The anchors of the benchmark: what a user would run instead, measured in the same run.

- ``OpaServer``: a bare ``opa run --server`` (the pinned ``.tools/bin/opa``) serving the bundle
  of the shipped policies on a free loopback port.
- ``bare_opa_config``: the wrk config that asks it the policy queries of the mix
  (``POST /v1/data/toolgate/decision`` with each policy input of ``bench.engine.policy_inputs``
  in turn): the cost of the decision alone, without authentication, validation, idempotency,
  approvals or a decision record.
- The gateway with ``TOOLGATE_ENGINE=opa`` against that same server as its sidecar is run by
  ``bench.run`` (``sidecar_env``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import requests

from bench.engine import policy_inputs
from bench.loopback import PROJECT_ROOT, free_port


class OpaServer:
    """``opa run --server`` on ``127.0.0.1:<free port>`` with the shipped policies' bundle.

    ``start()`` waits for ``GET /health?bundles`` to answer 200 (bundle activated) and raises
    ``RuntimeError`` (with OPA's output) when the binary is missing, exits or is not ready in
    time. Output goes to ``workdir/opa.log``."""

    def __init__(self, workdir: Path, policy_dir: Path | None = None) -> None:
        self.workdir = Path(workdir)
        self.policy_dir = policy_dir or PROJECT_ROOT / "policies"
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server's pid (after ``start()``)."""
        assert self.proc is not None, "opa is not started"
        return self.proc.pid

    def start(self, timeout_s: float = 30.0) -> OpaServer:
        from app.policy.bundle import build_tarball, read_directory, with_manifest
        from app.policy.toolchain import opa_binary

        binary = opa_binary()
        if binary is None:
            raise RuntimeError("no opa binary: scripts/install.sh builds it into .tools/bin/opa")
        self.workdir.mkdir(parents=True, exist_ok=True)
        bundle = self.workdir / "toolgate.tar.gz"
        bundle.write_bytes(build_tarball(with_manifest(read_directory(self.policy_dir))))
        log_path = self.workdir / "opa.log"
        with log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [str(binary), "run", "--server", f"--addr=127.0.0.1:{self.port}", "--log-level=error",
                 "--bundle", str(bundle)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        with requests.Session() as http:
            http.trust_env = False
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"opa exited with {self.proc.returncode}: {log_path.read_text()[-2000:]}")
                try:
                    if http.get(self.url + "/health?bundles", timeout=0.5).status_code == 200:
                        return self
                except requests.RequestException:
                    pass
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"opa not ready after {timeout_s} s: {log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


def bare_opa_config(decision_path: str = "toolgate/decision") -> dict[str, Any]:
    """wrk ``rotate`` config: the mix's policy inputs to ``POST /v1/data/<decision_path>``."""
    bodies = [json.dumps({"input": doc}, separators=(",", ":")) for doc in policy_inputs()]
    return {"method": "POST", "path": f"/v1/data/{decision_path}", "headers": {"Content-Type": "application/json"},
            "bodies": bodies, "kind": "opa"}


def sidecar_env(opa_url: str) -> dict[str, str]:
    """The gateway settings that make ``opa_url`` its policy engine (``TOOLGATE_ENGINE=opa``)."""
    return {"TOOLGATE_ENGINE": "opa", "TOOLGATE_OPA_URL": opa_url}
